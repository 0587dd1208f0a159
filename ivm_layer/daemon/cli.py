"""``ivm daemon``: run the CDC daemon, or show the status of a running one.

    ivm daemon --source postgresql://… --views views.sql --sink source --checkpoint DIR
               [--master local[*]|spark://host:7077] [--shards N] [--trigger 1s|available-now]
    ivm daemon --config daemon.toml [flags overriding the file]
    ivm daemon --status --checkpoint DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from ..errors import IVMError
from .config import DaemonConfig, load_toml


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
    p.add_argument("--master", help="local[*] (default), local[N] or spark://host:7077")
    p.add_argument("--shards", type=int, help="engines to run in parallel (default 1: in the driver)")
    p.add_argument("--trigger", help="batch interval like 1s or 500ms, or available-now (catch up, exit)")
    p.add_argument("--max-changes-per-batch", type=int, dest="max_changes_per_batch",
                   help="at most this many row changes per batch (whole transactions; default 100000)")
    p.add_argument("--set-replica-identity", action="store_true", default=None, dest="set_replica_identity",
                   help="ALTER source tables lacking it to REPLICA IDENTITY FULL (otherwise an error)")
    p.add_argument("--name", help="daemon name (publication, slot and sink bookkeeping derive from it)")
    p.add_argument("--status", action="store_true", help="print the status of the daemon using --checkpoint")
    p.add_argument("--json", action="store_true", help="with --status: print the raw JSON")
    p.add_argument("--log-level", dest="log_level", help="Spark log level (default WARN)")
    return p


def config_from_args(args: argparse.Namespace) -> DaemonConfig:
    data = load_toml(args.config) if args.config else {}
    for key in ("source", "views", "sinks", "checkpoint", "master", "shards", "trigger",
                "max_changes_per_batch", "name", "log_level", "set_replica_identity"):
        v = getattr(args, key)
        if v is not None:
            data[key] = v
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
        from .runner import run

        return run(cfg)
    except IVMError as e:
        print(f"ivm daemon: {e}", file=sys.stderr)
        return 2
