"""``ivm daemon``: run the CDC daemon, or show the status of a running one.

    ivm daemon --source postgresql://… --views views.sql --sink source --checkpoint DIR
               [--master local[*]|spark://host:7077|yarn|k8s://…] [--shards N] [--trigger 1s|available-now]
               [--ui-port N | --no-ui] [--metrics-port N] [--conf spark.key=value …]
               [--driver-host H] [--driver-bind-address A] [--driver-memory 4g] [--max-result-size 2g]
    ivm daemon --config daemon.toml [flags overriding the file]
    ivm daemon --status --checkpoint DIR
    ivm daemon --explain --source … --views views.sql --shards N [--checkpoint DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from ..errors import IVMError
from .config import DaemonConfig, load_toml, parse_conf


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ivm daemon",
        description="Maintain CREATE INCREMENTAL VIEWs over a PostgreSQL change stream with Spark.")
    p.add_argument("--config", help="a TOML file with the settings below (flags override it)")
    p.add_argument("--source", help="postgresql://user@host:port/db (wal_level=logical)")
    p.add_argument("--views", help="a file of CREATE INCREMENTAL [MATERIALIZED] VIEW statements")
    p.add_argument("--sink", action="append", dest="sinks",
                   help="source | postgresql://… | duckdb:FILE | parquet:DIR | console (repeatable; "
                        "default: source)")
    p.add_argument("--checkpoint", help="directory for Spark offsets and the engine state")
    p.add_argument("--master", help="local[*] (default), local[N], spark://host:7077, yarn or k8s://https://host:port "
                                    "(passed to Spark; see docs/daemon.md for what YARN and Kubernetes need)")
    p.add_argument("--shards", type=int, help="engines to run in parallel (default 1: in the driver)")
    p.add_argument("--trigger", help="batch interval like 1s or 500ms, or available-now (catch up, exit)")
    p.add_argument("--max-changes-per-batch", type=int, dest="max_changes_per_batch",
                   help="at most this many row changes per batch (whole transactions; default 100000)")
    p.add_argument("--set-replica-identity", action="store_true", default=None, dest="set_replica_identity",
                   help="ALTER source tables lacking it to REPLICA IDENTITY FULL (otherwise an error)")
    p.add_argument("--name", help="daemon name (publication, slot and sink bookkeeping derive from it)")
    p.add_argument("--status", action="store_true", help="print the status of the daemon using --checkpoint")
    p.add_argument("--json", action="store_true", help="with --status: print the raw JSON")
    p.add_argument("--explain", action="store_true",
                   help="print how --shards N routes each view's tables (the checkpoint's recorded plan, "
                        "else the one a first start would choose from the tables' sizes) and exit")
    p.add_argument("--log-level", dest="log_level", help="Spark log level (default WARN)")
    spark = p.add_argument_group("Spark")
    spark.add_argument("--conf", action="append", dest="conf", metavar="KEY=VALUE",
                       help="a Spark setting, passed through (repeatable; also a [conf] table in --config)")
    spark.add_argument("--ui-port", type=int, dest="ui_port",
                       help="the Spark UI's port (default Spark's 4040, the next free one if taken; 0: any)")
    spark.add_argument("--no-ui", action="store_false", dest="ui", default=None, help="no Spark UI")
    spark.add_argument("--metrics-port", type=int, dest="metrics_port",
                       help="serve Prometheus metrics on this port (/metrics; 0: any free port, see --status)")
    spark.add_argument("--metrics-host", dest="metrics_host", help="address the metrics endpoint binds (default 127.0.0.1)")
    spark.add_argument("--driver-host", dest="driver_host",
                       help="the address executors reach the driver at (spark.driver.host; default 127.0.0.1 "
                            "with local/spark:// masters, the host's name on YARN/Kubernetes)")
    spark.add_argument("--driver-bind-address", dest="driver_bind_address",
                       help="the address the driver binds (spark.driver.bindAddress; default: --driver-host)")
    spark.add_argument("--driver-memory", dest="driver_memory", help="spark.driver.memory, e.g. 4g (default 1g)")
    spark.add_argument("--max-result-size", dest="max_result_size",
                       help="spark.driver.maxResultSize, e.g. 2g (default 1g; 0: unlimited)")
    spark.add_argument("--sink-commit", dest="sink_commit", choices=["pipelined", "spark"],
                       help="pipelined (default): a batch's sinks are written beside the next batch, so "
                            "Spark's commit log runs up to one batch ahead of the sinks (ivm_daemon_batches, "
                            "shown by --status, is the truth); spark: a batch is committed to Spark only "
                            "once its sinks hold it (slower when a change makes many view rows)")
    return p


def config_from_args(args: argparse.Namespace) -> DaemonConfig:
    data = load_toml(args.config) if args.config else {}
    for key in ("source", "views", "sinks", "checkpoint", "master", "shards", "trigger",
                "max_changes_per_batch", "name", "log_level", "set_replica_identity", "ui", "ui_port",
                "metrics_port", "metrics_host", "driver_host", "driver_bind_address", "driver_memory",
                "max_result_size", "sink_commit"):
        v = getattr(args, key)
        if v is not None:
            data[key] = v
    if args.conf:
        data["conf"] = {**(data.get("conf") or {}), **parse_conf(args.conf)}
    return DaemonConfig(**data)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s ivm daemon: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        cfg = config_from_args(args)
        if args.status:
            from .status import format_status, read_status

            if not cfg.checkpoint:
                raise IVMError("--status needs --checkpoint DIR (or --config)")
            st = read_status(cfg.checkpoint)
            if st is None:
                print(f"no daemon status in {cfg.checkpoint} (never started there?)", file=sys.stderr)
                return 1
            print(json.dumps(st, indent=1) if args.json else format_status(st))
            return 0
        if args.explain:
            from .routingplan import explain

            if not cfg.source or not cfg.views:
                raise IVMError("--explain needs --source and --views (or --config)")
            print(explain(cfg))
            return 0
        from .runner import run

        return run(cfg)
    except IVMError as e:
        print(f"ivm daemon: {e}", file=sys.stderr)
        return 2
