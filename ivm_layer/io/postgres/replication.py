"""PostgreSQL logical replication: publications, slots with exported snapshots, snapshot COPY,
the streaming reader, slot hygiene and lag. Decoding is in :mod:`ivm_layer.io.postgres.pgoutput`.

Transport: the raw replication protocol over a psycopg 3 connection opened with
``replication=database``. ``CREATE_REPLICATION_SLOT`` and ``START_REPLICATION`` are sent
with libpq's simple query protocol through ``conn.pgconn`` (a walsender refuses the
extended protocol), and the copy-both stream is read with ``pgconn.get_copy_data`` and
written with ``pgconn.put_copy_data``: XLogData (``w``) messages carry pgoutput payloads,
primary keepalives (``k``) are answered at once when they ask for a reply, and standby
status updates (``r``) report the *flushed* position — what the consumer says is durably
applied (:attr:`ReplicationStream.flushed_lsn`), never more.

Consistent snapshot handoff (no gap, no duplicate)::

    rs = ReplicationStream(url)
    slot = rs.create_slot("ivm_db_s_v")           # CREATE_REPLICATION_SLOT … (SNAPSHOT 'export')
    rows = copy_tables(url, slot.snapshot, {"t": columns})   # REPEATABLE READ + SET TRANSACTION SNAPSHOT
    rs.start("ivm_db_s_v", "ivm_pub", slot.consistent_lsn)  # stream everything committed after it
    for lsn, payload in rs.read(timeout=1.0): ...

The exported snapshot stays valid only while the replication connection runs no other
command, so the COPY happens between ``create_slot`` and ``start`` on another connection.

Every connection the module opens uses ``DateStyle=ISO``, ``IntervalStyle=postgres`` and
``extra_float_digits=1`` so that the value text of the stream and of COPY is the same and
psycopg's loaders parse both alike.
"""

from __future__ import annotations

import datetime as _dt
import select
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ...identifiers import ascii_lower
from .conninfo import (  # noqa: F401 (re-exported)
    FATAL_SQLSTATES,
    ConnectionLost,
    PostgresError,
    is_retryable,
    redact_text,
)
from .conninfo import redact as redact_target
from .pgoutput import PG_EPOCH, ValueDecoder, parse_lsn

SESSION_OPTIONS = "-c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=1"
CONNECT_TIMEOUT = 10     # seconds, unless the target or PGCONNECT_TIMEOUT says otherwise

_KEEPALIVE = struct.Struct("!QQB")
_XLOGDATA = struct.Struct("!QQQ")
_STATUS = struct.Struct("!cQQQQB")


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_table(table: str) -> str:
    """``schema.table`` / ``table`` (pgoutput naming) → a quoted SQL name."""
    if "." in table:
        s, t = table.split(".", 1)
        return f"{quote_ident(s)}.{quote_ident(t)}"
    return f"public.{quote_ident(table)}"


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(url: str, autocommit: bool = True):
    """An ordinary psycopg connection with the module's session settings."""
    import psycopg

    try:
        conn = psycopg.connect(with_session_options(url), autocommit=autocommit)
    except psycopg.Error as e:
        cls = ConnectionLost if is_retryable(e) else PostgresError
        raise cls(f"cannot connect to {redact(url)}: {redact_error(e, url)}", getattr(e, "sqlstate", None)) from None
    from .infinity import register

    register(conn.adapters)   # ±infinity dates and timestamps load and dump
    return conn


def with_session_options(target: str) -> str:
    """``target`` (URL or conninfo) with the module's settings added to its ``options`` (or
    to ``$PGOPTIONS``), keeping the user's own, and a ``connect_timeout`` of 10 s unless one
    is given."""
    import os

    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(target)
    own = given.get("options") or os.environ.get("PGOPTIONS") or ""
    extra = {}
    if "connect_timeout" not in given and "PGCONNECT_TIMEOUT" not in os.environ:
        extra["connect_timeout"] = CONNECT_TIMEOUT     # reconnect loops stay within their budget
    return make_conninfo(target, options=f"{own} {SESSION_OPTIONS}".strip(), **extra)


def redact(url: str) -> str:
    """The URL or conninfo string without its password (see :func:`ivm_layer.io.postgres.conninfo.redact`)."""
    return redact_target(url)


def redact_error(err: BaseException, url: str) -> str:
    """A library error's text with any password of ``url`` (or any ``password=`` field) removed."""
    return redact_text(str(err).strip(), url)


def current_wal_lsn(conn) -> int:
    return parse_lsn(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])


# -- catalog ------------------------------------------------------------------------------
def table_columns(conn, table: str) -> list[tuple[str, str, int]] | None:
    """``[(column, sql_type, type_oid)]`` of a table in column order, or None if it does not exist.
    ``table`` is ``name`` (searched in ``public``) or ``schema.name``: the exact name, else its
    ASCII lower case (how PostgreSQL folds the name unquoted; :func:`ivm_layer.identifiers.resolve`)."""
    schema, name = table.split(".", 1) if "." in table else ("public", table)
    folded = ascii_lower(name)
    rows = conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid::int, c.relname = %s "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname IN (%s, %s) AND c.relkind IN ('r', 'p') "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname <> %s, a.attnum",
        [name, schema, name, folded, name]).fetchall()
    if not rows:
        return None
    exact = rows[0][3]
    return [(r[0], r[1], r[2]) for r in rows if r[3] == exact]


def replica_identity(conn, table: str) -> str:
    """``'d'`` default, ``'n'`` nothing, ``'f'`` full, ``'i'`` index."""
    r = conn.execute("SELECT relreplident FROM pg_class WHERE oid = %s::regclass",
                     [quote_table(table)]).fetchone()
    if r is None:
        raise PostgresError(f"no table {table!r}")
    return r[0]


def set_replica_identity_full(conn, table: str) -> None:
    conn.execute(f"ALTER TABLE {quote_table(table)} REPLICA IDENTITY FULL")


# -- publications -------------------------------------------------------------------------
def ensure_publication(conn, name: str, tables: Iterable[str]) -> None:
    """Create publication ``name`` for exactly ``tables`` (insert/update/delete/truncate), or
    reset an existing one to that list."""
    names = ", ".join(quote_table(t) for t in sorted(set(tables)))
    exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", [name]).fetchone()
    if not names:  # a view of constants only (SELECT 1): an empty publication streams nothing
        if exists:
            conn.execute(f"DROP PUBLICATION {quote_ident(name)}")
        conn.execute(f"CREATE PUBLICATION {quote_ident(name)}")
        return
    if exists:
        conn.execute(f"ALTER PUBLICATION {quote_ident(name)} SET TABLE {names}")
    else:
        conn.execute(f"CREATE PUBLICATION {quote_ident(name)} FOR TABLE {names}")


def drop_publication(conn, name: str) -> None:
    conn.execute(f"DROP PUBLICATION IF EXISTS {quote_ident(name)}")


# -- slots ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlotInfo:
    name: str
    consistent_lsn: int      # the stream starts with the first transaction committing after it
    snapshot: str | None     # exported snapshot name (valid until the next replication command)


@dataclass(frozen=True)
class SlotLag:
    slot: str
    active: bool
    current_lsn: int          # the server's WAL position now
    confirmed_flush_lsn: int  # what the consumer acknowledged as durable
    restart_lsn: int          # the oldest WAL the slot retains
    sent_lsn: int | None = None   # how far its walsender has decoded and sent (None if inactive)

    @property
    def lag_bytes(self) -> int:
        """WAL written after the last acknowledged position."""
        return max(0, self.current_lsn - self.confirmed_flush_lsn)

    @property
    def retained_bytes(self) -> int:
        """WAL the server keeps on disk for this slot."""
        return max(0, self.current_lsn - self.restart_lsn)


def slot_exists(conn, name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", [name]).fetchone() is not None


def slot_lag(conn, name: str) -> SlotLag | None:
    """Positions of slot ``name`` (None if it does not exist)."""
    r = conn.execute(
        "SELECT s.active, pg_current_wal_lsn()::text, s.confirmed_flush_lsn::text, s.restart_lsn::text, "
        "r.sent_lsn::text FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid "
        "WHERE s.slot_name = %s", [name]).fetchone()
    if r is None:
        return None
    return SlotLag(name, r[0], parse_lsn(r[1]), parse_lsn(r[2] or "0/0"), parse_lsn(r[3] or "0/0"),
                   parse_lsn(r[4]) if r[4] else None)


def drop_slot(conn, name: str, wait: float = 10.0) -> bool:
    """Drop slot ``name`` if it exists (waiting up to ``wait`` s for its walsender to go away);
    True when it was dropped."""
    import psycopg

    deadline = time.monotonic() + wait
    while True:
        try:
            r = conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                             "WHERE slot_name = %s", [name]).fetchall()
            return bool(r)
        except psycopg.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise PostgresError(f"replication slot {name!r} is in use by another process") from None
            time.sleep(0.1)


# -- snapshot COPY --------------------------------------------------------------------------
ProgressFn = Callable[[str, int, int], None]


def copy_tables(url: str, snapshot: str | None, tables: dict[str, list[tuple[str, int]]],
                values: ValueDecoder | None = None, progress: ProgressFn | None = None
                ) -> dict[str, list[tuple]]:
    """Read ``tables`` (``{table: [(column, type_oid), …]}``) as of exported ``snapshot`` (or
    a fresh REPEATABLE READ snapshot if None) with COPY, in one transaction; rows decoded
    with the stream's :class:`~ivm_layer.io.postgres.pgoutput.ValueDecoder`."""
    values = values or ValueDecoder()
    conn = connect(url)
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        if snapshot is not None:
            conn.execute(f"SET TRANSACTION SNAPSHOT {quote_literal(snapshot)}")
        out = {t: copy_table(conn, t, cols, values, progress) for t, cols in tables.items()}
        conn.execute("COMMIT")
        return out
    finally:
        conn.close()


def copy_table(conn, table: str, columns: list[tuple[str, int]], values: ValueDecoder,
               progress: ProgressFn | None = None) -> list[tuple]:
    """All rows of ``table`` (:func:`copy_batches` on ``conn``, inside the caller's transaction),
    reporting ``progress`` every 50,000 rows against the planner's row estimate."""
    total = 0
    if progress is not None:
        est, size = conn.execute("SELECT reltuples::bigint, pg_relation_size(oid) FROM pg_class "
                                 "WHERE oid = %s::regclass", [quote_table(table)]).fetchone()
        if est < 0 and size > 16 << 20:     # never analyzed: count (in the same snapshot)
            est = conn.execute(f"SELECT count(*) FROM {quote_table(table)}").fetchone()[0]
        total = max(0, int(est))
    rows: list[tuple] = []
    reported = 0
    for batch in copy_batches(conn, table, columns, values):
        rows += batch
        if progress is not None and len(rows) - reported >= 50_000:
            reported = len(rows)
            progress(table, reported, total)
    if progress is not None:
        progress(table, len(rows), max(total, len(rows)))
    return rows


def copy_batches(conn, table: str, columns: list[tuple[str, int]], values: ValueDecoder,
                 where: str = "") -> Iterator[list[tuple]]:
    """``COPY (SELECT cols FROM table [WHERE where]) TO STDOUT`` on ``conn``, as lists of rows
    (one per chunk received): the text format parsed here (a line may span chunks) and each
    field decoded with ``values``' loaders, so the rows equal what the replication stream
    decodes."""
    loaders = [values.loader(oid) for _, oid in columns]
    cols = ", ".join(quote_ident(c) for c, _ in columns)
    if not columns:                  # rows only counted: one NULL column per row
        loaders, cols, columns = [None], "NULL", [("", 0)]
    sql = f"SELECT {cols} FROM {quote_table(table)}" + (f" WHERE {where}" if where else "")
    ncols = len(columns)
    with conn.cursor().copy(f"COPY ({sql}) TO STDOUT") as cp:
        pending = b""
        for chunk in cp:
            data = bytes(chunk)
            lines = (pending + data if pending else data).split(b"\n")
            pending = lines.pop()
            batch = []
            for line in lines:
                fields = line.split(b"\t")
                if len(fields) != ncols:
                    raise PostgresError(f"COPY of {table}: {len(fields)} fields, expected {ncols}")
                batch.append(tuple(None if f == b"\\N" else ld(_unescape(f) if b"\\" in f else f)
                                   for ld, f in zip(loaders, fields)))
            if batch:
                yield batch
        if pending:
            raise PostgresError(f"COPY of {table}: truncated last line")


_ESC = {ord("b"): 8, ord("f"): 12, ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("v"): 11, ord("\\"): 92}


def _unescape(f: bytes) -> bytes:
    """COPY text format field escapes → raw bytes."""
    out = bytearray()
    i, n = 0, len(f)
    while i < n:
        c = f[i]
        if c != 92 or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = f[i + 1]
        if e in _ESC:
            out.append(_ESC[e])
            i += 2
        elif 48 <= e <= 55:          # \ooo
            j = i + 1
            while j < n and j < i + 4 and 48 <= f[j] <= 55:
                j += 1
            out.append(int(f[i + 1:j], 8) & 0xFF)
            i = j
        elif e == ord("x"):          # \xhh
            j = i + 2
            while j < n and j < i + 4 and chr(f[j]) in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(f[i + 2:j], 16))
            i = j
        else:
            out.append(e)
            i += 2
    return bytes(out)


def stderr_progress(table: str, done: int, total: int) -> None:
    """A one-line progress bar on stderr (used for tables of more than 100,000 rows)."""
    if total < 100_000:
        return
    frac = min(1.0, done / total) if total else 1.0
    bar = "#" * int(frac * 30)
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\rloading {table}: [{bar:<30}] {done:,}/{total:,} rows{end}")
    sys.stderr.flush()


# -- streaming ------------------------------------------------------------------------------
class ReplicationStream:
    """One replication connection: slot creation with an exported snapshot, then the
    pgoutput copy-both stream.

    Not thread-safe: use it from one thread. :attr:`flushed_lsn` may be set from any
    thread (an int assignment); it is reported in the next standby status update, which is
    sent by :meth:`read` when it changed, every ``status_interval`` seconds, and whenever the
    server asks for a reply."""

    def __init__(self, url: str, status_interval: float = 10.0):
        import psycopg

        self.url = url
        try:
            self.conn = psycopg.connect(with_session_options(url), autocommit=True, replication="database")
        except psycopg.Error as e:
            cls = ConnectionLost if is_retryable(e) else PostgresError
            raise cls(f"cannot open a replication connection to {redact(url)} "
                      f"(the role needs REPLICATION and wal_level=logical): {redact_error(e, url)}",
                      getattr(e, "sqlstate", None)) from None
        self.pgconn = self.conn.pgconn
        self.flushed_lsn = 0
        self.received_lsn = 0     # highest WAL position the server reported (XLogData/keepalive)
        self.server_time: _dt.datetime | None = None
        self.status_interval = status_interval
        self._sent_flushed = -1
        self._last_status = 0.0
        self._streaming = False

    def _command(self, sql: str):
        from psycopg import pq

        res = self.pgconn.exec_(sql.encode())
        if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            msg = (res.error_message or b"").decode(errors="replace").strip()
            raise PostgresError(f"{sql.split(' (')[0]}: {msg}")
        return res

    def create_slot(self, name: str, export_snapshot: bool = True) -> SlotInfo:
        """``CREATE_REPLICATION_SLOT name LOGICAL pgoutput (SNAPSHOT 'export')``; the snapshot
        stays usable until the next command on this connection (i.e. :meth:`start`)."""
        opt = "export" if export_snapshot else "nothing"
        res = self._command(f"CREATE_REPLICATION_SLOT {quote_ident(name)} LOGICAL pgoutput (SNAPSHOT '{opt}')")
        lsn = parse_lsn(res.get_value(0, 1).decode())
        snap = res.get_value(0, 2)
        return SlotInfo(name, lsn, snap.decode() if snap else None)

    def start(self, slot: str, publication: str, start_lsn: int = 0, messages: bool = True) -> None:
        """``START_REPLICATION SLOT slot LOGICAL start_lsn (proto_version '1', …)``. The server
        sends the transactions committed after ``max(start_lsn, confirmed_flush)``."""
        from psycopg import pq

        from .pgoutput import lsn_str

        opts = f"proto_version '1', publication_names {quote_literal(quote_ident(publication))}"
        if messages:
            opts += ", messages 'true'"
        self.pgconn.send_query(
            f"START_REPLICATION SLOT {quote_ident(slot)} LOGICAL {lsn_str(start_lsn)} ({opts})".encode())
        res = self.pgconn.get_result()
        if res is None or res.status != pq.ExecStatus.COPY_BOTH:
            msg = (res.error_message if res is not None else b"no result").decode(errors="replace").strip()
            state = res.error_field(pq.DiagnosticField.SQLSTATE) if res is not None else None
            state = state.decode() if state else None
            cls = ConnectionLost if state == "55006" or self.pgconn.status != pq.ConnStatus.OK else PostgresError
            raise cls(f"START_REPLICATION on slot {slot!r} failed: {msg}", state)
        self.flushed_lsn = max(self.flushed_lsn, start_lsn)
        self.pgconn.nonblocking = 1
        self._streaming = True

    def read(self, timeout: float = 1.0) -> list[tuple[int, bytes]]:
        """Wait up to ``timeout`` s for stream data; return the XLogData payloads received,
        ``[(wal_start_lsn, pgoutput_bytes)]``, in order (possibly empty). Keepalives and
        status updates are handled here."""
        import psycopg

        if not self._streaming:
            raise PostgresError("read() before start()")
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                got = self._drain(out)
                self._maybe_status()
                if out or got:
                    return out
                left = deadline - time.monotonic()
                if left <= 0:
                    return out
                r, _, _ = select.select([self.pgconn.socket], [], [], min(left, self.status_interval))
                if r:
                    self.pgconn.consume_input()
        except (psycopg.OperationalError, OSError) as e:
            self._streaming = False
            raise ConnectionLost(f"replication connection lost: {redact_error(e, self.url)}") from None

    def _drain(self, out: list) -> bool:
        from psycopg import pq

        got = False
        while True:
            n, buf = self.pgconn.get_copy_data(1)
            if n == 0:
                return got
            if n < 0:
                # CopyDone / CommandComplete (the server shuts down or ends the stream) or an
                # error: let go of the connection, the caller reconnects
                self._streaming = False
                res = self.pgconn.get_result()
                msg = (res.error_message if res is not None else b"").decode(errors="replace").strip()
                state = res.error_field(pq.DiagnosticField.SQLSTATE) if res is not None else None
                state = state.decode() if state else None
                cls = PostgresError if state in FATAL_SQLSTATES else ConnectionLost
                raise cls(f"replication stream ended: {msg or 'the server ended the copy stream'}", state)
            got = True
            b = bytes(buf)
            kind = b[0:1]
            if kind == b"w":
                start, end, _ = _XLOGDATA.unpack_from(b, 1)
                self.received_lsn = max(self.received_lsn, end)
                out.append((start, b[25:]))
            elif kind == b"k":
                end, ts, reply = _KEEPALIVE.unpack_from(b, 1)
                self.received_lsn = max(self.received_lsn, end)
                self.server_time = PG_EPOCH + _dt.timedelta(microseconds=ts)
                if reply:
                    self._answer_ping(end)

    def _maybe_status(self) -> None:
        now = time.monotonic()
        if now - self._last_status >= self.status_interval:
            self.send_status(reply=True)    # the keepalive answer updates received_lsn
        elif self.flushed_lsn != self._sent_flushed:
            self.send_status()

    def _answer_ping(self, end: int) -> None:
        """Answer a keepalive that asks for a reply, at once. When what is durable reaches the
        server's position, say so; otherwise report everything up to it as *received* with
        an invalid (0) flush position, as pg_receivewal does: the slot keeps its acknowledged
        position, and a walsender that waits for its client before a shutdown (it compares
        the flush position, or the write position when flush is invalid, with what it sent)
        can exit instead of holding up the server's shutdown checkpoint."""
        if self.flushed_lsn >= end:
            self.send_status()
        else:
            self._send(max(self.received_lsn, end), 0)

    def send_status(self, reply: bool = False) -> None:
        """A standby status update: written = flushed = applied = :attr:`flushed_lsn`."""
        f = self.flushed_lsn
        self._send(f, f, reply)
        self._sent_flushed = f

    def _send(self, written: int, flushed: int, reply: bool = False) -> None:
        now = int((_dt.datetime.now(_dt.UTC) - PG_EPOCH).total_seconds() * 1_000_000)
        f = flushed
        self.pgconn.put_copy_data(_STATUS.pack(b"r", written, f, f, now, 1 if reply else 0))
        while self.pgconn.flush() == 1:
            select.select([], [self.pgconn.socket], [], 1.0)
        self._last_status = time.monotonic()

    def close(self) -> None:
        """Close the connection (the slot stays; its walsender exits)."""
        try:
            if self._streaming:
                import contextlib
                with contextlib.suppress(Exception):
                    self.send_status()
            self.conn.close()
        finally:
            self._streaming = False
