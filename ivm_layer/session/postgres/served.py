"""Serving a non-materialized incremental view to PostgreSQL queries, in O(change) per read.

PostgreSQL cannot scan a Python iterator, so a served view ``v`` that a query joins, filters or
aggregates is a ``TEMP`` table ``pg_temp.v``. It is created and filled on the first such read
(one copy of the view per session), then kept in step by the view's *changes*: the engine
reports each change (delta enumeration), the session keeps them pending, and the next read
applies only them (:func:`apply_change`: a ``DELETE`` of exactly k copies by ``ctid`` and a
``COPY`` of the inserted rows). The shapes the engine answers itself need no table at all:
``SELECT count(*) FROM v`` is the engine's O(1) count, ``SELECT * FROM v [LIMIT n]`` its
enumeration (O(rows returned)).

Inside a transaction block a ``ROLLBACK`` also undoes what a read applied to the TEMP table;
:meth:`ServedTable.end_transaction` puts those changes back into the pending set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...io.postgres import replication as pgc
from ...identifiers import IDENT
from ...sql.sqltext import unquote

_IDENT = IDENT
_STAR = re.compile(rf"\s*SELECT\s+\*\s+FROM\s+(?:public\s*\.\s*)?({_IDENT})(?:\s+LIMIT\s+(\d+))?\s*;?\s*", re.I)


def star_target(text: str) -> tuple[str, int | None] | None:
    """``(v, n)`` when the statement is exactly ``SELECT * FROM v [LIMIT n]``."""
    m = _STAR.fullmatch(text)
    if not m:
        return None
    name = m.group(1)
    name = unquote(name, "postgres")
    return name, (int(m.group(2)) if m.group(2) is not None else None)


def thaw(v):
    """An array value as the engine holds it (nested tuples) → lists, as psycopg returns them."""
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    return v


def array_columns(types: list[str]) -> list[int]:
    """Positions of the array-typed columns (their values are tuples in the engine)."""
    return [i for i, t in enumerate(types) if t.endswith("]")]


def thaw_row(row: tuple, arrays: list[int]) -> tuple:
    """A view row as psycopg returns it: the array values at ``arrays`` as lists."""
    if not arrays:
        return row
    out = list(row)
    for i in arrays:
        if out[i] is not None:
            out[i] = thaw(out[i])
    return tuple(out)


def copy_rows(conn, target: str, pairs: Iterable[tuple[tuple, int]], types: list[str]) -> None:
    """COPY ``(row, k)`` pairs (k copies each) into ``target``; array values go back as lists."""
    arrays = array_columns(types)
    with conn.cursor().copy(f"COPY {target} FROM STDIN") as cp:
        for row, k in pairs:
            row = thaw_row(row, arrays)
            for _ in range(k):
                cp.write_row(row)


def apply_change(conn, table: str, tag: str, columns: list[str], types: list[str],
                 change: Iterable[tuple[tuple, int]]) -> None:
    """Apply a bag change to ``table`` (inside the caller's transaction): delete exactly k copies
    of each removed row (matched on the row's text form: ``IS NOT DISTINCT FROM`` semantics,
    by a hash join), then COPY the added rows. ``tag`` names the scratch table."""
    change = list(change)
    dels = [(r, -k) for r, k in change if k < 0]
    ins = [(r, k) for r, k in change if k > 0]
    if dels:
        cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(columns, types))
        tmp = "pg_temp." + pgc.quote_ident(f"_ivm_del_{tag}")
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {tmp} ({cols}, _ivm_id bigint, _ivm_k bigint)")
        conn.execute(f"TRUNCATE {tmp}")
        copy_rows(conn, tmp, [(r + (i, k), 1) for i, (r, k) in enumerate(dels)], types + ["bigint", "bigint"])
        rec_m = "ROW(" + ", ".join(f"m.{pgc.quote_ident(c)}" for c in columns) + ")::text"
        rec_d = "ROW(" + ", ".join(f"d.{pgc.quote_ident(c)}" for c in columns) + ")::text"
        conn.execute(
            f"DELETE FROM {table} WHERE ctid IN (SELECT rid FROM ("
            f"SELECT m.ctid AS rid, d._ivm_k AS k, "
            f"row_number() OVER (PARTITION BY d._ivm_id ORDER BY m.ctid) AS rn "
            f"FROM {table} m JOIN {tmp} d ON {rec_m} = {rec_d}) x WHERE rn <= k)")
    if ins:
        copy_rows(conn, table, ins, types)


class ServedTable:
    """The TEMP table of one served view and the view changes it has not seen yet."""

    def __init__(self, name: str, columns: list[str], types: list[str]):
        self.name = name
        self.columns = columns
        self.types = types
        self.qname = "pg_temp." + pgc.quote_ident(name)
        self.ready = False            # the table exists and equals the view minus ``pending``
        self.pending: dict[tuple, int] = {}
        self._in_txn: list[dict[tuple, int]] = []   # applied inside the open transaction block
        self._created_in_txn = False

    @property
    def wants_changes(self) -> bool:
        """Whether the engine must report the view's changes (only once the table exists)."""
        return self.ready

    def add(self, change: Iterable[tuple[tuple, int]]) -> None:
        pending = self.pending
        for row, k in change:
            v = pending.get(row, 0) + k
            if v:
                pending[row] = v
            else:
                pending.pop(row, None)

    def refresh(self, conn, rows: Iterable[tuple[tuple, int]], in_txn: bool) -> None:
        """Bring the TEMP table up to date: create and fill it once, afterwards apply only the
        pending change. ``rows`` (the view's rows) is read only on creation."""
        if not self.ready:
            cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(self.columns, self.types))
            conn.execute(f"DROP TABLE IF EXISTS {self.qname}")
            conn.execute(f"CREATE TEMP TABLE {pgc.quote_ident(self.name)} ({cols})")
            copy_rows(conn, self.qname, rows, self.types)
            self.ready = True
            self.pending = {}
            self._created_in_txn = in_txn
            return
        if not self.pending:
            return
        change = self.pending
        self.pending = {}
        apply_change(conn, self.qname, self.name, self.columns, self.types, change.items())
        if in_txn:
            self._in_txn.append(change)

    def end_transaction(self, committed: bool) -> None:
        """The transaction block ended: on rollback, what a read applied in it is undone."""
        if not committed:
            if self._created_in_txn:
                self.ready = False
                self.pending = {}
            else:
                for change in self._in_txn:
                    self.add(change.items())
        self._in_txn = []
        self._created_in_txn = False

    def drop(self) -> None:
        self.ready = False
        self.pending = {}
