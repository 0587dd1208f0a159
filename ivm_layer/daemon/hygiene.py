"""Slots and publications of daemons whose checkpoint was discarded.

Every daemon labels its publication ``COMMENT ON PUBLICATION <name>_pub IS 'ivm daemon
host=<host> checkpoint=<dir>'``. A replication slot retains WAL until it is dropped, so at
start-up the daemon looks at the other daemons' slots in the source database: an inactive
slot whose checkpoint directory no longer exists on this host belonged to a discarded
checkpoint and is dropped together with its publication; any other inactive daemon slot is
reported with the WAL it retains (it may belong to a daemon that is merely stopped, or that
runs on another host).
"""

from __future__ import annotations

import logging
import os
import re
import socket

from ..io.postgres.replication import (
    drop_publication,
    drop_slot,
    quote_ident,
    quote_literal,
)

log = logging.getLogger("ivm.daemon")

_LABEL = re.compile(r"^ivm daemon host=(?P<host>\S+) checkpoint=(?P<ckpt>.+)$")


def label(checkpoint: str) -> str:
    from .statefs import redact

    return f"ivm daemon host={socket.gethostname()} checkpoint={redact(checkpoint)}"


def mark_publication(conn, publication: str, checkpoint: str) -> None:
    conn.execute(f"COMMENT ON PUBLICATION {quote_ident(publication)} IS {quote_literal(label(checkpoint))}")


def other_daemons(conn, own_publication: str) -> list[dict]:
    """The other daemons of this database (by their labelled publications): ``publication``,
    ``slot`` (None if it has none), ``host``, ``checkpoint``, ``active``, ``retained_bytes``."""
    rows = conn.execute(
        "SELECT p.pubname, d.description, s.slot_name, coalesce(s.active, false), "
        "coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn), 0)::bigint "
        "FROM pg_publication p "
        "JOIN pg_description d ON d.objoid = p.oid AND d.classoid = 'pg_publication'::regclass "
        "LEFT JOIN pg_replication_slots s ON s.database = current_database() "
        "AND s.slot_name = left(p.pubname, -length('_pub')) || '_slot' "
        "WHERE p.pubname LIKE 'ivm\\_%%\\_pub' AND p.pubname <> %s", [own_publication]).fetchall()
    out = []
    for pub, desc, slot, active, retained in rows:
        m = _LABEL.match(desc or "")
        if m:
            out.append({"publication": pub, "slot": slot, "host": m["host"], "checkpoint": m["ckpt"],
                        "active": bool(active), "retained_bytes": int(retained)})
    return out


def clean_orphans(conn, own_publication: str) -> list[str]:
    """Drop the slots and publications of discarded checkpoints on this host, report the
    other inactive daemon slots; returns the dropped publications."""
    dropped = []
    host = socket.gethostname()
    for d in other_daemons(conn, own_publication):
        if d["active"]:
            continue
        # a URL checkpoint (s3://…) is never judged gone from here: only reported
        if d["host"] == host and "://" not in d["checkpoint"] and not os.path.isdir(d["checkpoint"]):
            if d["slot"] is not None:
                drop_slot(conn, d["slot"], wait=1.0)
            drop_publication(conn, d["publication"])
            dropped.append(d["publication"])
            log.warning("dropped publication %s and slot %s: their checkpoint %s is gone (the slot "
                        "held %d bytes of WAL)", d["publication"], d["slot"], d["checkpoint"],
                        d["retained_bytes"])
        elif d["slot"] is not None:
            log.warning("replication slot %s of the stopped daemon with checkpoint %s (host %s) retains "
                        "%d bytes of WAL; drop it with SELECT pg_drop_replication_slot('%s') if that "
                        "checkpoint is discarded", d["slot"], d["checkpoint"], d["host"],
                        d["retained_bytes"], d["slot"])
    return dropped
