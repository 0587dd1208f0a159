"""The user's connection of a PostgreSQL session: statements as the user sent them, COPY
through psycopg's copy protocol, the TEMP tables that serve SELECTs of views, and
reconnection after a server restart (as psql does: a transaction that was open is gone, and
so are TEMP tables, SETs and prepared statements)."""

from __future__ import annotations

import contextlib
import re

from ...errors import IVMError, SQLError
from ...io.postgres import conninfo as pgconn
from ...io.postgres import replication as pgc
from ...io.postgres.conninfo import ConnectionLostError, ControlConnection
from ..core import Cursor
from ..duckdb import reads
from .served import array_columns, star_target, thaw_row
from .state import PgView

COPY_STDIO = re.compile(r"^\s*COPY\b.*\b(FROM\s+STDIN|TO\s+STDOUT)\b", re.IGNORECASE | re.DOTALL)


class UserConnection:
    """The psycopg connection the user's statements run on (autocommit), re-opened when the
    server dropped it. ``dirty``: a write committed since the views were last synced;
    ``txn_wrote``: the open transaction block wrote something."""

    def __init__(self, target: str, display: str, reconnect_seconds: float):
        self.target = target
        self.display = display
        self.reconnect_seconds = reconnect_seconds
        self.raw = pgc.connect(target)
        self.generation = 0               # bumped when re-opened (TEMP tables gone)
        self.dirty = False
        self.txn_wrote = False
        self.served_generation = 0       # the generation the served TEMP tables were made on

    @property
    def conn(self):
        """The connection, re-opened first if it is closed or broken."""
        if self.raw.closed or self.raw.broken:
            with contextlib.suppress(Exception):
                self.raw.close()
            self.raw = ControlConnection(lambda: pgc.connect(self.target), self.display,
                                         self.reconnect_seconds).conn
            self.generation += 1
            self.txn_wrote = False
        return self.raw

    def in_txn(self) -> bool:
        return pgconn.in_transaction(self.raw)

    def wrote(self) -> None:
        """A statement that may write ran (or a COPY FROM is about to)."""
        if self.in_txn():
            self.txn_wrote = True
        else:
            self.dirty = True

    def error(self, conn, e: BaseException) -> IVMError:
        """A driver exception as the layer's error (never a raw psycopg exception)."""
        text = pgconn.redact_text(str(e).strip(), self.target)
        if conn.closed or conn.broken:
            return ConnectionLostError(
                f"the connection to PostgreSQL was lost while running the statement ({text}); it may "
                "not have run, and an open transaction was rolled back; the session reconnects on the "
                "next statement")
        return SQLError(text)

    def run(self, text: str, params, prepare: bool | None = None) -> Cursor:
        conn = self.conn
        try:
            res = conn.execute(text, params, prepare=prepare)
            while res.nextset():         # a multi-statement string: the last result counts
                pass
        except pgconn.driver_error() as e:
            raise self.error(conn, e) from None
        desc = res.description
        rows = res.fetchall() if desc is not None else []
        return Cursor(desc, rows, res.rowcount)

    @contextlib.contextmanager
    def copy(self, statement: str):
        if not COPY_STDIO.match(statement):
            raise IVMError("copy() takes COPY … FROM STDIN or COPY … TO STDOUT")
        if re.search(r"\bFROM\s+STDIN\b", statement, re.IGNORECASE):
            self.wrote()
        conn = self.conn
        try:
            with conn.cursor().copy(statement) as cp:
                yield cp
        except pgconn.driver_error() as e:
            raise self.error(conn, e) from None

    def copy_statement(self, text: str, params) -> Cursor:
        """``COPY … TO STDOUT`` returns its lines as rows of one text column; ``COPY … FROM
        STDIN`` takes its data as the parameter (str or bytes in the COPY format, or an
        iterable of row tuples)."""
        if re.search(r"\bTO\s+STDOUT\b", text, re.IGNORECASE):
            out = bytearray()
            with self.copy(text) as cp:
                for chunk in cp:
                    out += chunk
            lines = bytes(out).decode().splitlines()
            return Cursor([("copy", None, None, None, None, None, None)], [(ln,) for ln in lines], len(lines))
        if params is None:
            raise IVMError("COPY … FROM STDIN needs its data: session.execute(sql, data) with the data as "
                           "text/bytes or rows, or `with session.copy(sql) as cp: cp.write_row(…)`")
        n = 0
        with self.copy(text) as cp:
            if isinstance(params, str | bytes | bytearray):
                cp.write(params)
            else:
                for row in params:
                    cp.write_row(row)
                    n += 1
        return Cursor(None, [], n or -1)

    def refresh_temp(self, vs: PgView, views) -> None:
        """Bring ``pg_temp.<view>`` up to date for a PostgreSQL read (:class:`ServedTable`:
        created once, then kept in step by the view's changes). Inside a transaction block
        that wrote, PostgreSQL evaluates the definition itself instead, so the read sees the
        transaction's own uncommitted writes (as in DuckDB sessions); the table is rebuilt
        from the engine on the next read after the block."""
        conn = self.conn
        if self.generation != self.served_generation:      # re-opened: the TEMP tables are gone
            self.forget_served(views)
        in_txn = self.in_txn()
        if in_txn and self.txn_wrote:
            q = pgc.quote_ident(vs.name)
            cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))
            conn.execute(f"DROP TABLE IF EXISTS pg_temp.{q}")
            conn.execute(f"CREATE TEMP TABLE {q} ({cols})")
            conn.execute(f"INSERT INTO pg_temp.{q} SELECT * FROM ({vs.stmt.select_sql}) AS q")
            vs.served.drop()
            return
        try:
            vs.served.refresh(conn, vs.view.rows(), in_txn)
        except Exception as e:
            if not pgconn.is_dropped(e) or not (self.raw.closed or self.raw.broken) or in_txn:
                raise
            _ = self.conn                  # dropped since the last statement: re-open, reload
            self.forget_served(views)
            vs.served.refresh(self.raw, vs.view.rows(), False)

    def forget_served(self, views) -> None:
        """The connection was re-opened: every served view's TEMP table is gone."""
        self.served_generation = self.generation
        for v in views:
            if v.served is not None:
                v.served.drop()

    def drop_temp(self, vs: PgView) -> None:
        with contextlib.suppress(Exception):
            self.raw.execute(f"DROP TABLE IF EXISTS pg_temp.{pgc.quote_ident(vs.name)}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()


def expand(pairs, limit: int | None, types: list[str]):
    """Rows of ``(row, k)`` pairs (k copies each), at most ``limit``, arrays as lists."""
    arrays = array_columns(types)
    n = 0
    for row, k in pairs:
        row = thaw_row(row, arrays)
        for _ in range(k):
            if limit is not None and n >= limit:
                return
            yield row
            n += 1


def engine_answer(user: UserConnection, shapes: dict, text: str, vs: PgView) -> Cursor | None:
    """``SELECT count(*) FROM v`` and ``SELECT * FROM v [LIMIT n]`` of a served view, answered
    by the engine (O(1) / O(rows returned)); None for any other statement. The result's
    description is PostgreSQL's, read once per statement text over an empty TEMP table."""
    if vs.materialized:
        return None
    if reads.count_target(text) == vs.name:
        return Cursor(_shape(user, shapes, text, vs), [(len(vs.view),)], 1)
    star = star_target(text)
    if star is not None and star[0] == vs.name:
        rows = list(expand(vs.view.rows(), star[1], vs.types))
        return Cursor(_shape(user, shapes, f"SELECT * FROM {pgc.quote_ident(vs.name)}", vs), rows, len(rows))
    return None


def _shape(user: UserConnection, shapes: dict, text: str, vs: PgView):
    desc = shapes.get(text)
    if desc is None:
        if not vs.served.ready:
            cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))
            user.conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {pgc.quote_ident(vs.name)} ({cols})")
        desc = user.run(f"SELECT * FROM ({text}) AS q LIMIT 0", None).description
        shapes[text] = desc
    return desc
