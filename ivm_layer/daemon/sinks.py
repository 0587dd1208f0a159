"""Sinks for view changes, each written idempotently per Spark batch id.

A sink receives, per batch id, every view's change ``[(row, Δk)]``. Table sinks keep one row
per distinct view row with its multiplicity::

    <view>(<view columns…>, ivm_count BIGINT, ivm_key UUID PRIMARY KEY)

(``ivm_key`` is the row's 128-bit digest, :mod:`.rowdigest`, computed a column at a time; a
table an older release filled keeps its ``blake2b(repr(row))`` keys, ``row_key``, and a
``TEXT`` key keeps working; a bag is ``SELECT cols FROM v, generate_series(1, ivm_count)``).
A batch is merged in one transaction together with the bookkeeping row
``ivm_daemon_batches(daemon, batch_id)``: a batch id at or below the recorded one is skipped,
so a replayed batch is never applied twice. The merge is O(changes) whatever the statistics
say. The PostgreSQL sink first tries the rows a batch adds as new rows: one COPY straight
into the table under a savepoint (a backlog of inserts mostly adds new view rows; the primary
key refuses a row the table holds, and then the savepoint is rolled back). Rows go in
PostgreSQL's binary format, encoded a block at a time with numpy (:mod:`.pgcopy`), in key
order. Everything else is COPied into a temporary stage and merged with ``INSERT … ON
CONFLICT (ivm_key) DO UPDATE``, which probes the primary key once per row and returns only
the keys whose count dropped to zero (or below: someone else changed the table, an error),
deleted by key — no join, no scan of the sink table.

- ``source`` / ``postgresql://…``: a PostgreSQL database
- ``duckdb:FILE``: a DuckDB database file
- ``parquet:DIR``: ``DIR/<view>/batch-<id>.parquet`` (columns + ``ivm_delta``), one file per
  batch and view, written to a temporary name and renamed; an existing file is a replay
- ``console``: one line per change on stdout
"""

from __future__ import annotations

import operator
import os
import re
import sys
from collections.abc import Mapping

from ..engine.view import Change, View
from ..errors import IVMError
from ..maintain.contracts import FaultTolerance
from ..sql.statements import named_columns
from .sinkrows import DIGEST_COMMENT, CopyRows, qi, row_key

_count = operator.itemgetter(1)


def _added(change: Change) -> Change:
    """The rows a change adds (k > 0)."""
    return change if min(map(_count, change)) > 0 else [(row, k) for row, k in change if k > 0]


#: ``{view: (columns, sql_types)}``
Layouts = dict[str, tuple[list[str], list[str]]]
BOOKKEEPING = "ivm_daemon_batches"
#: after a batch whose added rows were not all new, this many batches of the view are upserted
UPSERT_BATCHES = 8
#: how long a PostgreSQL sink keeps reconnecting to write a batch (a server restart)
RETRY_SECONDS = 120.0


class SinkError(IVMError):
    """A sink cannot be opened or written."""


def refuse_negative(view: str, label: str, dropped: list[tuple[object, int]]) -> None:
    """Fail the batch when a merge left keys with a negative count: the table was changed by
    someone else (the batch's transaction is then rolled back)."""
    bad = sum(1 for _, n in dropped if n < 0)
    if bad:
        raise SinkError(f"table {view!r} in {label} would hold {bad} row(s) with a negative "
                        "count: it was changed by someone else; drop it and restart the daemon "
                        "with a new --checkpoint")


def view_layout(view: View, schema: Mapping[str, list[tuple[str, str, int]]],
                types: list[str] | None = None, listed: list[str] | None = None) -> tuple[list[str], list[str]]:
    """The view's column names and PostgreSQL types: ``types`` as the source database typed
    the view's query (``pgsource.view_types``; any view, also one made of several), else the
    type of the base column each output column reads (which covers plain join views only).
    ``listed``: the names of the view's column list, for its first columns."""
    if types is not None:
        if len(types) != len(view.columns):
            raise SinkError(f"the source types {len(types)} columns of the view, the engine has "
                            f"{len(view.columns)}")
        return named_columns("", listed, list(view.columns)), list(types)
    gcq = view.plan.gcq
    if gcq.aggregate is not None:
        raise SinkError("the column types of an aggregate view come from the source database: "
                        "pass them as types=")
    types = []
    for col, var in zip(gcq.columns, gcq.output):
        found = None
        for atom in gcq.atoms:
            if var in atom.vars:
                found = schema[atom.relation][atom.vars.index(var)][1]
                break
        if found is None:
            raise SinkError(f"cannot tell the SQL type of view column {col!r}")
        types.append(found)
    return named_columns("", listed, list(gcq.columns)), types


class Sink:
    """Base class of the daemon's sinks, which implement the sink contract of
    :class:`ivm_layer.maintain.contracts.Sink`: ``prepare`` once, then ``write`` per batch id
    (idempotent), ``committed()`` what they hold."""

    label = "sink"
    fault_tolerance = FaultTolerance.EXACTLY_ONCE

    def prepare(self, layouts: Layouts, fresh: bool) -> None:
        """Create what is missing; ``fresh`` (a new checkpoint) also empties earlier output."""

    def write(self, batch_id: int, changes: Mapping[str, Change], prepared: object = None) -> bool:
        """Write one batch; False when it was already written (a replay). ``prepared``: what
        :meth:`prepare_batch` returned for these changes, if it was called."""
        raise NotImplementedError

    def prepare_batch(self, changes: Mapping[str, Change]) -> object:
        """Work on a batch that needs no connection (keys, encoding), done on the query's
        thread while the previous batch is being written; handed to :meth:`write`."""
        return None

    def committed(self) -> int | None:
        """The last batch id this sink holds for sure (-1: none), after ``prepare``; None for
        a sink that keeps no record (the daemon then writes it no batch again)."""
        return None

    def close(self) -> None:
        pass


class PostgresSink(Sink):
    def __init__(self, url: str, daemon: str):
        from ..io.postgres.replication import redact

        self.url, self.daemon, self.label = url, daemon, f"postgresql {redact(url)}"
        self.conn = None
        self.layouts: Layouts = {}
        self.key_types: dict[str, str] = {}
        self.legacy: dict[str, bool] = {}       # view → keyed by row_key (an older release)
        self.upsert_only: dict[str, int] = {}   # view → batches left that skip the COPY attempt

    def _connect(self):
        from ..io.postgres.replication import connect

        if self.conn is None or self.conn.closed:
            self.conn = connect(self.url, autocommit=True)
        return self.conn

    def prepare(self, layouts: Layouts, fresh: bool) -> None:
        self.layouts = layouts
        conn = self._connect()
        with conn.transaction():
            conn.execute(f"CREATE TABLE IF NOT EXISTS {BOOKKEEPING} (daemon TEXT PRIMARY KEY, "
                         "batch_id BIGINT NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            for view, (cols, types) in layouts.items():
                defs = ", ".join(f"{qi(c)} {t}" for c, t in zip(cols, types))
                existed = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [qi(view)]).fetchone()[0]
                conn.execute(f"CREATE TABLE IF NOT EXISTS {qi(view)} ({defs}, "
                             "ivm_count BIGINT NOT NULL, ivm_key UUID PRIMARY KEY)")
                if fresh:
                    conn.execute(f"TRUNCATE {qi(view)}")
                kt, note = conn.execute(
                    "SELECT format_type(atttypid, atttypmod), col_description(attrelid, attnum) "
                    "FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'ivm_key'",
                    [qi(view)]).fetchone()
                self.key_types[view] = "uuid" if kt == "uuid" else "text"
                # an empty uuid-keyed table takes the new digests; rows written by an older
                # release keep their keys (row_key), or a later change would miss them
                if note != DIGEST_COMMENT and kt == "uuid" and (fresh or not existed):
                    conn.execute(f"COMMENT ON COLUMN {qi(view)}.ivm_key IS '{DIGEST_COMMENT}'")
                    note = DIGEST_COMMENT
                self.legacy[view] = note != DIGEST_COMMENT
            if fresh:
                conn.execute(f"DELETE FROM {BOOKKEEPING} WHERE daemon = %s", [self.daemon])

    def committed(self) -> int:
        r = self._connect().execute(f"SELECT batch_id FROM {BOOKKEEPING} WHERE daemon = %s",
                                    [self.daemon]).fetchone()
        return -1 if r is None else int(r[0])

    def prepare_batch(self, changes: Mapping[str, Change]) -> dict[str, CopyRows]:
        """The rows each view's change adds, keyed and encoded for the COPY of new rows."""
        out = {}
        for view, change in changes.items():
            if change and self.upsert_only.get(view, 0) == 0:
                added = _added(change)
                if added:
                    out[view] = CopyRows(*self.layouts[view], added, self.legacy[view])
        return out

    def write(self, batch_id: int, changes: Mapping[str, Change], prepared: object = None) -> bool:
        """Write one batch in one transaction. A broken connection (a server restart) is
        reopened and the batch written again: the transaction either did not commit, or it
        did and its batch id is recorded, so the retry skips it."""
        import time

        import psycopg

        from ..io.postgres.replication import PostgresError

        deadline = time.monotonic() + RETRY_SECONDS
        while True:
            try:
                return self._write(batch_id, changes, prepared or {})
            except (psycopg.OperationalError, PostgresError) as e:
                if isinstance(e, psycopg.errors.QueryCanceled) or time.monotonic() > deadline:
                    raise SinkError(f"cannot write batch {batch_id} to {self.label}: {e}") from e
                if self.conn is not None:
                    self.conn.close()
                    self.conn = None
                time.sleep(1.0)

    def _write(self, batch_id: int, changes: Mapping[str, Change], prepared: dict) -> bool:
        conn = self._connect()
        with conn.transaction():
            r = conn.execute(f"SELECT batch_id FROM {BOOKKEEPING} WHERE daemon = %s FOR UPDATE",
                             [self.daemon]).fetchone()
            if r is not None and r[0] >= batch_id:
                return False
            for view, change in changes.items():
                if change:
                    self._merge(conn, view, change, prepared.get(view))
            conn.execute(f"INSERT INTO {BOOKKEEPING} (daemon, batch_id) VALUES (%s, %s) "
                         "ON CONFLICT (daemon) DO UPDATE SET batch_id = EXCLUDED.batch_id, "
                         "updated_at = now()", [self.daemon, batch_id])
        return True

    def _merge(self, conn, view: str, change: Change, rows: CopyRows | None = None) -> None:
        """Rows added by the batch are first tried as new rows: COPY straight into the table,
        under a savepoint (the primary key refuses a row the table already holds: then the
        savepoint is rolled back and the whole change goes through the upsert, and the next
        ``UPSERT_BATCHES`` batches of the view go there directly). Removed rows (and a refused
        COPY) take the upsert. ``rows``: the added rows as :meth:`prepare_batch` encoded them."""
        import psycopg

        if self.upsert_only.get(view, 0) > 0:
            self.upsert_only[view] -= 1
            return self._upsert(conn, view, change)
        if rows is None:
            added = _added(change)
            rows = CopyRows(*self.layouts[view], added, self.legacy[view]) if added else None
        if rows is not None:
            try:
                with conn.transaction():
                    rows.copy(conn, view)
            except psycopg.errors.UniqueViolation:
                self.upsert_only[view] = UPSERT_BATCHES
                return self._upsert(conn, view, change)
        if rows is None or rows.n < len(change):
            self._upsert(conn, view, [(row, k) for row, k in change if k < 0])

    def _upsert(self, conn, view: str, change: Change) -> None:
        cols, types = self.layouts[view]
        stage = f"ivm_stage_{re.sub(r'[^a-z0-9_]', '_', view.lower())}"
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {qi(stage)} "
                     f"(LIKE {qi(view)}) ON COMMIT DELETE ROWS")
        all_cols = [qi(c) for c in cols] + ["ivm_count", "ivm_key"]
        CopyRows(cols, types, change, self.legacy[view]).copy(conn, stage)
        # one pass over the stage, each row probing the primary key (no join for the planner
        # to get wrong from stale statistics); only the keys whose count dropped come back
        upd = "ivm_count = t.ivm_count + EXCLUDED.ivm_count"
        dropped = conn.execute(
            f"WITH up AS (INSERT INTO {qi(view)} AS t ({', '.join(all_cols)}) "
            f"SELECT {', '.join(all_cols)} FROM {qi(stage)} "
            f"ON CONFLICT (ivm_key) DO UPDATE SET {upd} RETURNING t.ivm_key, t.ivm_count) "
            "SELECT ivm_key, ivm_count FROM up WHERE ivm_count <= 0").fetchall()
        self._drop_keys(conn, view, dropped)

    def _drop_keys(self, conn, view: str, dropped: list[tuple[str, int]]) -> None:
        refuse_negative(view, self.label, dropped)
        if dropped:  # primary-key lookups
            kt = self.key_types.get(view, "text")
            conn.execute(f"DELETE FROM {qi(view)} WHERE ivm_key = ANY(%s::{kt}[]) AND ivm_count = 0",
                         [[k for k, _ in dropped]])

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


_DUCK_TYPES = [(r"^character varying.*|^varchar.*|^text$|^character.*|^name$", "VARCHAR"),
               (r"^double precision$", "DOUBLE"), (r"^real$", "FLOAT"),
               (r"^timestamp with time zone$", "TIMESTAMPTZ"),
               (r"^timestamp without time zone$", "TIMESTAMP"), (r"^numeric$", "DECIMAL(38,10)"),
               (r"^jsonb?$", "VARCHAR")]


def duck_type(pg_type: str) -> str:
    for pat, t in _DUCK_TYPES:
        if re.match(pat, pg_type):
            return t
    return pg_type.upper()


class DuckDBSink(Sink):
    def __init__(self, path: str, daemon: str):
        self.path, self.daemon, self.label = path, daemon, f"duckdb {path}"
        self.conn = None
        self.layouts: Layouts = {}

    def prepare(self, layouts: Layouts, fresh: bool) -> None:
        import duckdb

        self.layouts = layouts
        try:
            self.conn = duckdb.connect(self.path)
        except duckdb.Error as e:
            raise SinkError(f"cannot open the DuckDB sink {self.path}: {e}") from e
        c = self.conn
        c.execute("BEGIN").fetchall()
        c.execute(f"CREATE TABLE IF NOT EXISTS {BOOKKEEPING} (daemon VARCHAR PRIMARY KEY, batch_id BIGINT NOT NULL)").fetchall()
        for view, (cols, types) in layouts.items():
            defs = ", ".join(f"{qi(col)} {duck_type(t)}" for col, t in zip(cols, types))
            c.execute(f"CREATE TABLE IF NOT EXISTS {qi(view)} ({defs}, ivm_count BIGINT NOT NULL, "
                      "ivm_key VARCHAR PRIMARY KEY)").fetchall()
            if fresh:
                c.execute(f"DELETE FROM {qi(view)}").fetchall()
        if fresh:
            c.execute(f"DELETE FROM {BOOKKEEPING} WHERE daemon = ?", [self.daemon]).fetchall()
        c.execute("COMMIT").fetchall()

    def committed(self) -> int:
        r = self.conn.execute(f"SELECT batch_id FROM {BOOKKEEPING} WHERE daemon = ?", [self.daemon]).fetchall()
        return int(r[0][0]) if r else -1

    def write(self, batch_id: int, changes: Mapping[str, Change], prepared: object = None) -> bool:
        import pyarrow as pa

        c = self.conn
        c.execute("BEGIN").fetchall()
        try:
            r = c.execute(f"SELECT batch_id FROM {BOOKKEEPING} WHERE daemon = ?", [self.daemon]).fetchall()
            r = r[0] if r else None
            if r is not None and r[0] >= batch_id:
                c.execute("ROLLBACK").fetchall()
                return False
            for view, change in changes.items():
                if not change:
                    continue
                cols, _ = self.layouts[view]
                data = {f"c{i}": [row[i] for row, _ in change] for i in range(len(cols))}
                data["ivm_count"] = [k for _, k in change]
                data["ivm_key"] = [row_key(row) for row, _ in change]
                stage = pa.table(data)
                names = [qi(x) for x in cols] + ["ivm_count", "ivm_key"]
                src = [f"c{i}" for i in range(len(cols))] + ["ivm_count", "ivm_key"]
                c.register("ivm_stage", stage)
                dropped = c.execute(
                    f"INSERT INTO {qi(view)} ({', '.join(names)}) SELECT {', '.join(src)} FROM ivm_stage "
                    "ON CONFLICT (ivm_key) DO UPDATE SET ivm_count = ivm_count + EXCLUDED.ivm_count "
                    "RETURNING ivm_key, ivm_count").fetchall()
                c.unregister("ivm_stage")
                self._drop_keys(view, [(k, n) for k, n in dropped if n <= 0])
            c.execute(f"INSERT INTO {BOOKKEEPING} VALUES (?, ?) ON CONFLICT (daemon) DO UPDATE "
                      "SET batch_id = EXCLUDED.batch_id", [self.daemon, batch_id]).fetchall()
            c.execute("COMMIT").fetchall()
            return True
        except Exception:
            c.execute("ROLLBACK").fetchall()
            raise

    def _drop_keys(self, view: str, dropped: list[tuple[str, int]]) -> None:
        refuse_negative(view, self.label, dropped)
        keys = [k for k, _ in dropped]
        for i in range(0, len(keys), 500):  # a literal key list is an index lookup in DuckDB
            lits = ", ".join(f"'{k}'" for k in keys[i:i + 500] if re.fullmatch(r"[0-9a-f]+", k))
            if not lits:
                continue
            c = self.conn
            c.execute(f"DELETE FROM {qi(view)} WHERE ivm_count = 0 AND ivm_key IN ({lits})").fetchall()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class ParquetSink(Sink):
    def __init__(self, directory: str):
        self.dir, self.label = os.path.abspath(directory), f"parquet {directory}"
        self.layouts: Layouts = {}

    def path(self, view: str, batch_id: int) -> str:
        return os.path.join(self.dir, view, f"batch-{batch_id:012d}.parquet")

    def prepare(self, layouts: Layouts, fresh: bool) -> None:
        self.layouts = layouts
        for view in layouts:
            d = os.path.join(self.dir, view)
            os.makedirs(d, exist_ok=True)
            if fresh:
                for n in os.listdir(d):
                    if n.startswith("batch-") and n.endswith(".parquet"):
                        os.remove(os.path.join(d, n))

    def committed(self) -> int:
        """One below the newest batch with a file: that batch may lack some views' files
        (writing it again skips the files it has)."""
        ids = [int(n[6:-8]) for view in self.layouts
               for n in os.listdir(os.path.join(self.dir, view))
               if re.fullmatch(r"batch-\d+\.parquet", n)]
        return max(ids) - 1 if ids else -1

    def write(self, batch_id: int, changes: Mapping[str, Change], prepared: object = None) -> bool:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .state import write_atomic

        wrote = False
        for view, change in changes.items():
            if not change:
                continue
            target = self.path(view, batch_id)
            if os.path.exists(target):
                continue
            cols, _ = self.layouts[view]
            table = pa.table({c: [row[i] for row, _ in change] for i, c in enumerate(cols)}
                             | {"ivm_delta": pa.array([k for _, k in change], pa.int64())})
            buf = pa.BufferOutputStream()
            pq.write_table(table, buf)
            write_atomic(target, buf.getvalue().to_pybytes())
            wrote = True
        return wrote


class ConsoleSink(Sink):
    label = "console"
    fault_tolerance = FaultTolerance.NONE     # keeps no record: a batch in flight at a crash is not shown again

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def write(self, batch_id: int, changes: Mapping[str, Change], prepared: object = None) -> bool:
        for view, change in changes.items():
            for row, k in change:
                self.stream.write(f"batch {batch_id} {view} {'+' if k > 0 else ''}{k} {row!r}\n")
        self.stream.flush()
        return True


def open_sink(spec: str, source_url: str, daemon: str) -> Sink:
    """A sink from its spec: ``source``, ``postgresql://…``, ``duckdb:FILE``, ``parquet:DIR``, ``console``."""
    if spec == "source":
        return PostgresSink(source_url, daemon)
    if spec.startswith(("postgresql://", "postgres://")):
        return PostgresSink(spec, daemon)
    if spec.startswith("duckdb:"):
        return DuckDBSink(spec[len("duckdb:"):], daemon)
    if spec.startswith("parquet:"):
        return ParquetSink(spec[len("parquet:"):])
    if spec == "console":
        return ConsoleSink()
    raise SinkError(f"unknown sink {spec!r}: use source, postgresql://…, duckdb:FILE, parquet:DIR or console")
