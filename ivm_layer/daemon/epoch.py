"""Spark's checkpoint as a rebuildable companion of the daemon's state.

The daemon's own state (``--checkpoint``, any filesystem: the engine's batches, the shards'
states, ``sinks-committed.json``) is the source of truth. Spark's ``checkpointLocation``
(``--spark-checkpoint``) only says which LSN range each Spark batch id covers (offsets and
commits); it must be a path Spark's Hadoop client can write — a local directory or HDFS
(S3 through ``s3a://`` needs the hadoop-aws jars on Spark's classpath, which the daemon does
not ship). It may therefore live on another filesystem than the daemon's state and be lost on
its own (the driver's machine is replaced): the daemon then rebuilds it instead of losing
anything.

An *epoch* pairs the two: ``<checkpoint>/spark-epoch.json`` records ``{"epoch", "batch_base",
"start_lsn"}`` and the same ``epoch`` id is written into Spark's checkpoint directory
(``ivm-epoch.json``, a file of the daemon's own, never a file of Spark's layout). The
daemon's batch id is ``batch_base + Spark's batch id``. At start-up (:func:`resolve`):

- both ids equal: Spark's checkpoint is the one that goes with the state; resume as usual;
- no batch ever applied (a fresh state): a fresh epoch at batch 0, from the initial snapshot
  (a Spark checkpoint left at the path is cleared: it belongs to no state);
- otherwise Spark's checkpoint is missing or of another epoch: it is cleared (only a
  directory holding an ``ivm-epoch.json``, or an empty one: anything else is refused, never
  deleted) and a new epoch starts at
  ``batch_base`` = the last applied batch + 1 with Spark's first offset = the LSN the state
  ends at (the source's ``initialOffset``). The slot still holds every transaction after that
  LSN (it is only confirmed up to what the sinks hold), so the stream resumes exactly; with
  ``--shards N`` the shards' logs and snapshots past that LSN (batches no sink holds) are
  dropped first.

A checkpoint of the previous version (no epoch files, Spark's checkpoint at
``<checkpoint>/spark``) is adopted as epoch 0 when that directory exists. Cost: two small
reads at start-up, two small writes when an epoch starts.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass

from ..errors import StateError
from .statefs import StateFS, redact

log = logging.getLogger("ivm.daemon")

NAME = "spark-epoch.json"
SPARK_SIDE = "ivm-epoch.json"


@dataclass
class Epoch:
    epoch: str
    batch_base: int          # the daemon's batch id = batch_base + Spark's batch id
    start_lsn: int           # Spark's initial offset (-1: the initial snapshot)
    rebuilt: bool = False    # Spark's checkpoint was rebuilt at this start


def _read(fs: StateFS, name: str) -> dict | None:
    raw = fs.read(name)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("epoch"), str) else None


def resolve(state: StateFS, spark_checkpoint: str, last_batch: int, last_lsn: int | None,
            legacy_spark_dir: bool = False) -> Epoch:
    """The epoch to run in (see the module docstring); writes the epoch files when a new one
    starts. ``last_batch``/``last_lsn``: the last batch the daemon's state holds (applied and,
    after recovery, in the sinks) and the LSN it ends at; ``legacy_spark_dir``: the state
    comes from a version without epochs and Spark's checkpoint directory is there."""
    spark = StateFS(spark_checkpoint)
    mine, theirs = _read(state, NAME), _read(spark, SPARK_SIDE)
    if mine is not None and theirs is not None and mine["epoch"] == theirs["epoch"]:
        return Epoch(mine["epoch"], int(mine["batch_base"]), int(mine["start_lsn"]))
    if mine is None and last_batch >= 0 and legacy_spark_dir:
        return _start(state, spark, Epoch(uuid.uuid4().hex, 0, -1))
    if last_batch < 0:
        _clear(spark, theirs, spark_checkpoint)
        return _start(state, spark, Epoch(uuid.uuid4().hex, 0, -1))
    if last_lsn is None:
        raise StateError(f"Spark's checkpoint {redact(spark_checkpoint)} is missing or belongs to another "
                         f"state, and the state at {state.label} does not record the LSN its batch "
                         f"{last_batch} ends at, so the stream cannot be resumed from it: give the "
                         "--spark-checkpoint it ran with, or start over with a new --checkpoint")
    _clear(spark, theirs, spark_checkpoint)
    e = Epoch(uuid.uuid4().hex, last_batch + 1, int(last_lsn), rebuilt=True)
    log.warning("Spark's checkpoint %s is missing or not the one of this state: rebuilt from the "
                "daemon's state (batch ids continue at %d, the stream resumes after LSN %X)",
                redact(spark_checkpoint), e.batch_base, e.start_lsn)
    return _start(state, spark, e)


def _clear(spark: StateFS, theirs: dict | None, location: str) -> None:
    """Remove a Spark checkpoint that does not go with the state — only one the daemon made
    (it holds an ``ivm-epoch.json``) or an empty directory; anything else is refused, never
    deleted (a wrong ``--spark-checkpoint``)."""
    if not spark.exists():
        return
    if theirs is None and (spark.list() or spark.list_dirs()):
        raise StateError(f"--spark-checkpoint {redact(location)} holds files but no ivm-epoch.json: it is "
                         "not a Spark checkpoint this daemon made; give an empty or new directory (or "
                         "the one this state ran with)")
    spark.delete_dir("")


def _start(state: StateFS, spark: StateFS, e: Epoch) -> Epoch:
    """Record a new epoch: the state's side first (a crash before Spark's side is written makes
    the next start begin another epoch from the same state, which is equally exact)."""
    doc = json.dumps({"epoch": e.epoch, "batch_base": e.batch_base, "start_lsn": e.start_lsn}).encode()
    state.write(NAME, doc)
    spark.ensure_root()
    spark.write(SPARK_SIDE, json.dumps({"epoch": e.epoch}).encode())
    return e
