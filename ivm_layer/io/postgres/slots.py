"""Every ivm-layer replication slot of a database, with the WAL it holds on the server.

A logical replication slot keeps the server's WAL from its ``restart_lsn`` on until its
consumer acknowledges it, whether or not that consumer is running: a PostgreSQL session that
is closed, or a stopped daemon, holds WAL without limit unless ``max_slot_wal_keep_size`` caps
it. :func:`ivm_slots` lists the slots with their owner (a session's view from the ``ivm.views``
catalog, a daemon from its labelled publication) so that ``ivm status`` can report them while
nothing runs. One catalog query; O(slots).
"""

from __future__ import annotations

from dataclasses import dataclass

#: a slot holding more than this is reported as a warning (``ivm status --warn-mb``)
WARN_BYTES = 1 << 30


@dataclass(frozen=True)
class SlotReport:
    slot: str
    owner: str                 # "session S, view V", "daemon (checkpoint …)" or "unknown"
    session: str | None        # the PostgreSQL session owning it (None: a daemon or unknown)
    view: str | None
    active: bool               # a consumer is connected now
    retained_bytes: int        # WAL the server keeps for it (current position − restart_lsn)
    wal_status: str | None     # PostgreSQL's: reserved, extended, unreserved, lost


def max_slot_wal_keep_size(conn) -> str:
    """The server's ``max_slot_wal_keep_size`` (``-1``: a slot may hold WAL without limit)."""
    return conn.execute("SHOW max_slot_wal_keep_size").fetchone()[0]


def ivm_slots(conn) -> list[SlotReport]:
    """The ``ivm_…`` logical slots of the current database, largest retained WAL first."""
    has_catalog = conn.execute("SELECT to_regclass('ivm.views') IS NOT NULL").fetchone()[0]
    owner_sql = ("LEFT JOIN ivm.views v ON v.slot = s.slot_name " if has_catalog else "")
    cols = "v.session, v.name" if has_catalog else "NULL::text, NULL::text"
    rows = conn.execute(
        f"SELECT s.slot_name, {cols}, s.active, "
        "coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn), 0)::bigint, s.wal_status, "
        "d.description "
        "FROM pg_replication_slots s "
        f"{owner_sql}"
        "LEFT JOIN pg_publication p ON p.pubname IN (s.slot_name, left(s.slot_name, -length('_slot')) || '_pub') "
        "LEFT JOIN pg_description d ON d.objoid = p.oid AND d.classoid = 'pg_publication'::regclass "
        "WHERE s.database = current_database() AND s.slot_type = 'logical' "
        "AND s.slot_name LIKE 'ivm\\_%' ORDER BY 6 DESC, 1").fetchall()
    out: list[SlotReport] = []
    seen: set[str] = set()
    for slot, session, view, active, retained, wal_status, label in rows:
        if slot in seen:
            continue
        seen.add(slot)
        if session is not None:
            owner = f"session {session}, view {view}"
        elif label and label.startswith("ivm daemon "):
            owner = "daemon (" + label[len("ivm daemon "):] + ")"
        else:
            owner = "unknown"
        out.append(SlotReport(slot, owner, session, view, bool(active), int(retained), wal_status))
    out.sort(key=lambda r: (-r.retained_bytes, r.slot))
    return out
