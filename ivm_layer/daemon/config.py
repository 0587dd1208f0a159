"""The daemon's settings, from the command line and/or a TOML file (``--config daemon.toml``).

A TOML file holds the same settings as the flags, in a ``[daemon]`` table (or at the top
level); flags given on the command line override it. Relative paths in the file are
relative to the file's directory::

    [daemon]
    source = "postgresql://ivm@db:5432/shop"
    views = "views.sql"
    sinks = ["source", "parquet:out/"]
    checkpoint = "/var/lib/ivm/checkpoint"
    master = "local[*]"
    shards = 1
    trigger = "1s"
    max_changes_per_batch = 100000
    set_replica_identity = false   # true: ALTER the source tables to REPLICA IDENTITY FULL
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field, fields

from ..errors import IVMError


class ConfigError(IVMError):
    """The daemon's settings are missing, contradictory or malformed."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?)?\s*$", re.IGNORECASE)


def parse_trigger(text: str) -> float | None:
    """``"1s"``, ``"500ms"``, ``"2 minutes"`` → seconds; ``"available-now"``/``"once"`` → None."""
    t = str(text).strip().lower()
    if t in ("available-now", "availablenow", "available_now", "once"):
        return None
    m = _DURATION.match(t)
    if not m:
        raise ConfigError(f"trigger {text!r} is not a duration like '1s', '500ms', '2min' "
                          "or 'available-now'")
    value, unit = float(m.group(1)), (m.group(2) or "s").lower()
    return value / 1000 if unit == "ms" else value * 60 if unit.startswith("m") else value


@dataclass
class DaemonConfig:
    """Everything ``ivm daemon`` needs. See the module docstring for the TOML form."""

    source: str = ""
    views: str = ""
    checkpoint: str = ""
    sinks: list[str] = field(default_factory=lambda: ["source"])
    master: str = "local[*]"
    shards: int = 1
    trigger: str = "1s"
    max_changes_per_batch: int = 100_000
    #: name of this daemon: publication/slot names and the sinks' bookkeeping row derive from it
    name: str = ""
    publication: str = ""
    slot: str = ""
    #: snapshot tables larger than this many rows are read by several Spark partitions
    snapshot_partition_rows: int = 200_000
    #: write a full engine snapshot every this many batches (the delta log covers the rest)
    snapshot_every: int = 100
    shuffle_partitions: int = 0  # 0: the number of shards (at least 1)
    log_level: str = "ERROR"
    #: consent to ``ALTER TABLE … REPLICA IDENTITY FULL`` on source tables that lack it (updates
    #: and deletes must carry the whole old row); without it such a table is an error
    set_replica_identity: bool = False

    def validate(self) -> DaemonConfig:
        """Fill derived defaults and check the settings; returns self."""
        missing = [f for f in ("source", "views", "checkpoint") if not getattr(self, f)]
        if missing:
            raise ConfigError("missing setting(s): " + ", ".join("--" + m for m in missing)
                              + " (give them as flags or in --config daemon.toml)")
        if not self.source.startswith(("postgresql://", "postgres://")):
            raise ConfigError(f"--source {self.source!r}: only PostgreSQL sources are supported "
                              "(postgresql://user@host:port/db)")
        if not os.path.isfile(self.views):
            raise ConfigError(f"--views {self.views!r}: no such file")
        if not isinstance(self.shards, int) or self.shards < 1:
            raise ConfigError(f"--shards must be a positive integer, got {self.shards!r}")
        if self.max_changes_per_batch < 1:
            raise ConfigError("max_changes_per_batch must be at least 1")
        if not self.sinks:
            raise ConfigError("at least one --sink is needed (source, postgresql://…, duckdb:FILE, "
                              "parquet:DIR, console)")
        parse_trigger(self.trigger)
        if not (self.master.startswith(("local", "spark://"))):
            raise ConfigError(f"--master {self.master!r}: use local[*], local[N] or spark://host:port")
        self.checkpoint = os.path.abspath(self.checkpoint)
        if not self.name:  # slots are cluster-wide: unique per checkpoint directory
            base = re.sub(r"[^a-z0-9_]", "_", os.path.basename(self.checkpoint.rstrip("/")).lower())
            digest = hashlib.sha1(self.checkpoint.encode()).hexdigest()[:8]
            self.name = f"ivm_{base[:24]}_{digest}"
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,40}", self.name):
            raise ConfigError(f"name {self.name!r}: use lower-case letters, digits and _ (≤ 41 chars)")
        self.publication = self.publication or f"{self.name}_pub"
        self.slot = self.slot or f"{self.name}_slot"
        return self

    @property
    def trigger_seconds(self) -> float | None:
        return parse_trigger(self.trigger)


def load_toml(path: str) -> dict:
    """The ``[daemon]`` table (or the top level) of a TOML file, paths made absolute."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--config {path!r}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"--config {path!r}: {e}") from None
    data = data.get("daemon", data)
    known = {f.name for f in fields(DaemonConfig)}
    unknown = sorted(set(data) - known - {"sink"})
    if unknown:
        raise ConfigError(f"--config {path!r}: unknown setting(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(known))}")
    if "sink" in data:  # a single sink spelled like the flag
        data["sinks"] = [data.pop("sink")]
    if isinstance(data.get("sinks"), str):
        data["sinks"] = [data["sinks"]]
    base = os.path.dirname(os.path.abspath(path))
    for key in ("views", "checkpoint"):
        if key in data and not os.path.isabs(data[key]):
            data[key] = os.path.join(base, data[key])
    sinks = []
    for s in data.get("sinks", []):
        for prefix in ("parquet:", "duckdb:"):
            if s.startswith(prefix) and not os.path.isabs(s[len(prefix):]):
                s = prefix + os.path.join(base, s[len(prefix):])
        sinks.append(s)
    if "sinks" in data:
        data["sinks"] = sinks
    return data
