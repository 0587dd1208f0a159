"""The daemon's settings, from the command line and/or a TOML file (``--config daemon.toml``).

A TOML file holds the same settings as the flags, in a ``[daemon]`` table (or at the top
level); flags given on the command line override it. Relative paths in the file are
relative to the file's directory::

    [daemon]
    source = "postgresql://ivm@db:5432/shop"
    views = "views.sql"
    sinks = ["source", "parquet:out/"]
    checkpoint = "/var/lib/ivm/checkpoint"   # or s3://bucket/prefix, gs://…, hdfs://…, abfs://…
    spark_checkpoint = "/var/lib/ivm/spark"  # Spark's own (default: <checkpoint>/spark, see docs)
    master = "local[*]"
    shards = 1
    trigger = "1s"
    max_changes_per_batch = 100000
    set_replica_identity = false   # true: ALTER the source tables to REPLICA IDENTITY FULL
    ui_port = 4040                  # Spark UI (ui = false: off)
    metrics_port = 9108             # Prometheus text on /metrics (absent: off)
    driver_host = "10.0.0.5"        # what executors connect to (default 127.0.0.1 on local/spark://)
    driver_memory = "4g"
    max_result_size = "2g"
    sink_commit = "pipelined"       # or "spark": see docs/daemon.md

    [conf]                          # any Spark setting, passed through (also --conf key=value)
    "spark.sql.shuffle.partitions" = "4"

Spark settings the daemon sets itself (see :mod:`.spark`) are overridden by ``conf``; a setting
that has its own flag (``--driver-memory`` …) may not also be given in ``conf``.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field, fields

from ..errors import ConfigError

#: masters handed to Spark as they are
MASTERS = ("local", "spark://", "yarn", "k8s://")
#: the settings that have their own flag, and the Spark setting each one sets
FLAG_CONFS = {"driver_memory": "spark.driver.memory", "max_result_size": "spark.driver.maxResultSize",
              "driver_host": "spark.driver.host", "driver_bind_address": "spark.driver.bindAddress",
              "ui_port": "spark.ui.port"}
_SIZE = re.compile(r"^\d+[kmgtp]?b?$", re.IGNORECASE)
#: ``sink_commit``: ``pipelined`` (default) — a batch's sinks are written beside the next batch,
#: so Spark's commit log runs up to one batch ahead of the sinks; ``spark`` — a batch returns to
#: Spark (which then commits it) only once its sinks hold it (measured: 17–32 % more time per
#: batch on a view with ≈ 10 view rows per change, none measurable at one row per change)
SINK_COMMITS = ("pipelined", "spark")

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
    #: Spark's checkpointLocation (offsets and commits; a path Spark's Hadoop client can write).
    #: "": ``<checkpoint>/spark`` for a local checkpoint; for a URL checkpoint a local directory
    #: under ``$XDG_STATE_HOME/ivm-layer/spark-checkpoints/<name>`` (rebuilt from the daemon's
    #: state when lost: :mod:`.epoch`)
    spark_checkpoint: str = ""
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
    #: the Spark UI: on (``ui_port``; None: Spark's 4040, the next free port if taken; 0: any) or off
    ui: bool = True
    ui_port: int | None = None
    #: Prometheus text on ``http://metrics_host:metrics_port/metrics`` (None: off)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: the address executors reach the driver at, and the one it binds to ("": 127.0.0.1 with a
    #: ``local``/``spark://`` master, Spark's own choice — the host's name — on YARN/Kubernetes)
    driver_host: str = ""
    driver_bind_address: str = ""
    driver_memory: str = ""          # spark.driver.memory ("": Spark's 1g)
    max_result_size: str = ""        # spark.driver.maxResultSize ("": Spark's 1g)
    #: any Spark settings, passed through (``--conf key=value``, the TOML ``[conf]`` table)
    conf: dict[str, str] = field(default_factory=dict)
    #: when a batch counts as committed (:data:`SINK_COMMITS`)
    sink_commit: str = "pipelined"

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
        if not self.master.startswith(MASTERS):
            raise ConfigError(f"--master {self.master!r}: use local[*], local[N], spark://host:port, "
                              "yarn or k8s://https://host:port")
        self._validate_spark()
        from .statefs import check_location, is_url, redact

        if not is_url(self.checkpoint):
            self.checkpoint = os.path.abspath(self.checkpoint)
        else:
            check_location(self.checkpoint)   # credentials in the URL are refused
        if not self.name:  # slots are cluster-wide: unique per checkpoint directory
            shown = redact(self.checkpoint)
            base = re.sub(r"[^a-z0-9_]", "_", shown.rstrip("/").rsplit("/", 1)[-1].lower())
            digest = hashlib.sha1(shown.encode()).hexdigest()[:8]
            self.name = f"ivm_{base[:24]}_{digest}"
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,40}", self.name):
            raise ConfigError(f"name {self.name!r}: use lower-case letters, digits and _ (≤ 41 chars)")
        if not self.spark_checkpoint:
            if not is_url(self.checkpoint):
                self.spark_checkpoint = os.path.join(self.checkpoint, "spark")
            else:
                base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
                self.spark_checkpoint = os.path.join(base, "ivm-layer", "spark-checkpoints", self.name)
        elif not is_url(self.spark_checkpoint):
            self.spark_checkpoint = os.path.abspath(self.spark_checkpoint)
        self.publication = self.publication or f"{self.name}_pub"
        self.slot = self.slot or f"{self.name}_slot"
        return self

    def _validate_spark(self) -> None:
        if self.sink_commit not in SINK_COMMITS:
            raise ConfigError(f"sink_commit {self.sink_commit!r}: use {' or '.join(SINK_COMMITS)}")
        for key in ("ui_port", "metrics_port"):
            v = getattr(self, key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 65535):
                raise ConfigError(f"--{key.replace('_', '-')} must be a port number (0-65535), got {v!r}")
        for key in ("driver_memory", "max_result_size"):
            v = getattr(self, key)
            if v and not _SIZE.match(str(v)):
                raise ConfigError(f"--{key.replace('_', '-')} {v!r}: use a size like 512m, 4g or 4096m")
        if not isinstance(self.conf, dict):
            raise ConfigError(f"conf must be a table of Spark settings, got {self.conf!r}")
        self.conf = {str(k): _conf_value(v) for k, v in self.conf.items()}
        bad = [k for k in self.conf if not k.startswith("spark.")]
        if bad:
            raise ConfigError(f"--conf {bad[0]}: Spark settings start with 'spark.'")
        for key, spark_key in FLAG_CONFS.items():
            if spark_key in self.conf and getattr(self, key) not in ("", None):
                raise ConfigError(f"{spark_key} is set both by --{key.replace('_', '-')} and by --conf; "
                                  "give it once")

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings the flags and ``conf`` give (over the daemon's own defaults)."""
        out: dict[str, str] = {}
        out["spark.ui.enabled"] = "true" if self.ui else "false"
        if self.ui and self.ui_port is not None:
            out["spark.ui.port"] = str(self.ui_port)
        if self.driver_memory:
            out["spark.driver.memory"] = str(self.driver_memory)
        if self.max_result_size:
            out["spark.driver.maxResultSize"] = str(self.max_result_size)
        out.update(self.conf)
        return out

    def driver_address(self) -> tuple[str | None, str | None]:
        """``(advertised host, bind address)`` of the driver as given (flags or ``conf``);
        None: not given (:func:`.spark.build_session` picks the default)."""
        host = self.driver_host or self.conf.get("spark.driver.host") or None
        bind = self.driver_bind_address or self.conf.get("spark.driver.bindAddress") or None
        return host, bind

    @property
    def trigger_seconds(self) -> float | None:
        return parse_trigger(self.trigger)


def _conf_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    raise ConfigError(f"conf: Spark settings are strings, numbers or booleans, got {v!r}")


def parse_conf(items: list[str]) -> dict[str, str]:
    """``["key=value", …]`` (``--conf``) → a dict; an item without ``=`` is an error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf {item!r}: use --conf key=value (e.g. spark.sql.shuffle.partitions=4)")
        out[key.strip()] = value.strip()
    return out


def load_toml(path: str) -> dict:
    """The ``[daemon]`` table (or the top level) of a TOML file, paths made absolute; a top-level
    ``[conf]`` table (Spark settings) becomes ``conf``."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--config {path!r}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"--config {path!r}: {e}") from None
    if "daemon" in data:
        top = data
        data = dict(top["daemon"])
        unknown_top = sorted(set(top) - {"daemon", "conf"})
        if unknown_top:
            raise ConfigError(f"--config {path!r}: unknown table(s) or setting(s) outside [daemon]: "
                              f"{', '.join(unknown_top)} (use [daemon] and [conf])")
        if "conf" in top:
            if "conf" in data:
                raise ConfigError(f"--config {path!r}: Spark settings in both [conf] and [daemon.conf]; use one")
            data["conf"] = top["conf"]
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
    for key in ("views", "checkpoint", "spark_checkpoint"):
        if key in data and not os.path.isabs(data[key]) and "://" not in data[key]:
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
