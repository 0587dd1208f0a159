"""``ivm status DATABASE``: the replication slots of PostgreSQL sessions and daemons, open or
closed, with the WAL each holds on the server.

    ivm status postgresql://…                     # every ivm slot, its owner and retained WAL
    ivm status postgresql://… --warn-mb 512       # warn above 512 MiB (default 1024)
    ivm status postgresql://… --drop-slots SESSION  # drop a closed session's slots

A slot holds WAL from its ``restart_lsn`` on while its consumer is away: a closed session's views
keep their slots (so that reopening resumes from their checkpoints without a fresh snapshot),
and the server keeps every WAL segment written since, without limit unless
``max_slot_wal_keep_size`` is set. ``--drop-slots`` frees that WAL: the session's views stay
defined and are rebuilt from a fresh snapshot the next time the session opens. Exit status: 0,
or 3 when a slot is above the warning threshold (scripts and monitoring can test it).
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import ConnectionTargetError, OperationalError
from .io.postgres import conninfo as pgconn
from .io.postgres import replication as pgc
from .io.postgres.slots import WARN_BYTES, ivm_slots, max_slot_wal_keep_size

GUIDANCE = ("A closed session's or stopped daemon's slot keeps WAL until its consumer comes back. "
            "Open the session again (it catches up and releases the WAL), drop the slots of a "
            "session you will not reopen soon with `ivm status DATABASE --drop-slots SESSION` "
            "(its views are rebuilt from a snapshot when it opens), or cap what any slot may "
            "hold: ALTER SYSTEM SET max_slot_wal_keep_size = '10GB'; SELECT pg_reload_conf(); "
            "(a slot past the cap is invalidated, and its view is rebuilt when its session opens).")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ivm status", description=__doc__.split("\n\n")[0])
    p.add_argument("database", help="postgresql://… URL or conninfo string")
    p.add_argument("--warn-mb", type=float, default=WARN_BYTES / 2**20,
                   help="warn about slots holding more WAL than this many MiB (default 1024)")
    p.add_argument("--drop-slots", metavar="SESSION",
                   help="drop the replication slots of this (closed) PostgreSQL session")
    p.add_argument("--json", action="store_true", help="print the slots as JSON")
    return p


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not pgconn.is_postgres_target(args.database):
        raise ConnectionTargetError("ivm status takes a PostgreSQL database (postgresql://… or a conninfo string): "
                       "DuckDB sessions keep no replication slots")
    conn = pgc.connect(args.database)
    try:
        with pgconn.driver_errors(args.database):
            if args.drop_slots:
                return _drop(conn, args.drop_slots)
            slots = ivm_slots(conn)
            cap = max_slot_wal_keep_size(conn)
    finally:
        conn.close()
    warn = int(args.warn_mb * 2**20)
    if args.json:
        print(json.dumps({"max_slot_wal_keep_size": cap, "warn_bytes": warn,
                          "slots": [s.__dict__ for s in slots]}, indent=2))
    else:
        _print(slots, cap, warn)
    return 3 if any(s.retained_bytes > warn for s in slots) else 0


def _print(slots, cap: str, warn: int) -> None:
    if not slots:
        print("no ivm-layer replication slots in this database")
        return
    rows = [("slot", "owner", "active", "WAL retained", "wal_status")]
    rows += [(s.slot, s.owner, "yes" if s.active else "no", _mib(s.retained_bytes), s.wal_status or "")
             for s in slots]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"max_slot_wal_keep_size = {cap}" + ("  (no limit)" if cap == "-1" else ""))
    over = [s for s in slots if s.retained_bytes > warn]
    for s in over:
        print(f"WARNING: slot {s.slot} ({s.owner}{'' if s.active else ', not connected'}) retains "
              f"{_mib(s.retained_bytes)} of WAL", file=sys.stderr)
    if over:
        print(f"HINT: {GUIDANCE}", file=sys.stderr)


def _drop(conn, session: str) -> int:
    mine = [s for s in ivm_slots(conn) if s.session == session]
    if not mine:
        print(f"session {session!r} has no replication slots in this database")
        return 0
    busy = [s.slot for s in mine if s.active]
    if busy:
        raise OperationalError(f"session {session!r} is open (slots in use: {', '.join(busy)}); close it "
                       "first — an open session releases WAL as it applies changes", sqlstate="55006")
    freed = 0
    for s in mine:
        if pgc.drop_slot(conn, s.slot, wait=1.0):
            freed += s.retained_bytes
            print(f"dropped slot {s.slot} ({s.owner})")
    print(f"freed {_mib(freed)} of WAL; the views of session {session!r} are rebuilt from a fresh "
          "snapshot when it next opens")
    return 0
