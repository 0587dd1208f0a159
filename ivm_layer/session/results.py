"""What one statement returned, behind the session's :class:`~ivm_layer.session.cursor.Cursor`.

- :class:`RowsResult`: rows already in Python (an answer from the engine, the row count of a
  write, ``RETURNING`` rows the session captured, ``COPY … TO STDOUT``). Fetching costs O(1) a
  row; ``arrow()`` converts the rows left, column by column.
- :class:`DuckResult`: DuckDB's own result, **streamed**: nothing is fetched when the statement
  returns; ``fetchone``/``fetchmany`` pull from DuckDB as they go (the first row of a 2M-row
  ``SELECT`` costs what it costs in DuckDB), ``df()``/``arrow()``/``fetch_record_batch()``
  hand the rows left to DuckDB's columnar converters (no Python tuples). A DuckDB connection
  holds one pending result: before the session runs anything else on it, a result that a
  cursor still holds is read out into Python (:meth:`DuckResult.detach`, O(rows left), paid
  only when results are interleaved); one no cursor holds any more is simply dropped.
- :class:`PgResult`: psycopg's cursor. Its rows arrived with the statement (a client-side
  cursor); each is converted to Python only when fetched.

Every fetch after the last row returns ``None`` / ``[]``; errors of the database while
streaming come out as :mod:`ivm_layer.errors` classes.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Iterator

from ..errors import Error, from_driver

#: PostgreSQL type OIDs → pyarrow type names (empty results keep their column types)
_PG_ARROW = {16: "bool_", 17: "binary", 20: "int64", 21: "int16", 23: "int32", 25: "string",
             700: "float32", 701: "float64", 1042: "string", 1043: "string", 1082: "date32",
             1114: "timestamp_us", 1184: "timestamp_us_utc", 114: "string", 3802: "string"}


def _arrow_type(type_code):
    import pyarrow as pa

    name = _PG_ARROW.get(type_code) if isinstance(type_code, int) else None
    if name is None:
        return None
    if name == "timestamp_us":
        return pa.timestamp("us")
    if name == "timestamp_us_utc":
        return pa.timestamp("us", tz="UTC")
    return getattr(pa, name)()


def rows_to_arrow(description, rows: list[tuple]):
    """A ``pyarrow.Table`` of Python rows: one column per description entry, the types from
    the description where it names a PostgreSQL type, else inferred (O(rows))."""
    import pyarrow as pa

    names = [getattr(d, "name", None) or d[0] for d in description]
    cols = list(zip(*rows)) if rows else [()] * len(names)
    arrays = []
    for d, col in zip(description, cols):
        typ = _arrow_type(getattr(d, "type_code", None) if not isinstance(d, tuple) else d[1])
        try:
            arrays.append(pa.array(col, type=typ))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            try:
                arrays.append(pa.array(col))
            except (pa.ArrowInvalid, pa.ArrowTypeError):   # mixed values: their text
                arrays.append(pa.array([None if v is None else str(v) for v in col], type=pa.string()))
    return pa.Table.from_arrays(arrays, names=names)


class Result:
    """The protocol the cursor reads (the base class serves no rows)."""

    description = None
    rowcount = -1

    def fetchone(self) -> tuple | None:
        return None

    def fetchmany(self, size: int) -> list[tuple]:
        return []

    def fetchall(self) -> list[tuple]:
        return []

    def arrow(self):
        """The rows left as a ``pyarrow.Table``."""
        return rows_to_arrow(self.description or [], self.fetchall())

    def reader(self, batch_rows: int):
        """The rows left as a ``pyarrow.RecordBatchReader`` of ``batch_rows``-row batches."""
        import pyarrow as pa

        table = self.arrow()
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=batch_rows))

    def df(self):
        """The rows left as a ``pandas.DataFrame``."""
        return self.arrow().to_pandas()

    def detach(self) -> None:
        """Stop depending on the connection (see :class:`DuckResult`)."""

    def close(self) -> None:
        """Drop the rows left."""


class RowsResult(Result):
    """Rows already in Python."""

    def __init__(self, description=None, rows: list[tuple] | None = None, rowcount: int = -1):
        self.description = description
        self._rows = rows if rows is not None else []
        self._pos = 0
        self.rowcount = rowcount

    def fetchone(self) -> tuple | None:
        if self._pos >= len(self._rows):
            return None
        row = self._rows[self._pos]
        self._pos += 1
        return row

    def fetchmany(self, size: int) -> list[tuple]:
        out = self._rows[self._pos:self._pos + size]
        self._pos += len(out)
        return out

    def fetchall(self) -> list[tuple]:
        out = self._rows[self._pos:] if self._pos else self._rows
        self._pos = len(self._rows)
        return out

    def close(self) -> None:
        self._rows = []
        self._pos = 0


class DuckResult(Result):
    """DuckDB's pending result on ``conn``, streamed (see the module docstring)."""

    def __init__(self, conn, description):
        self.description = description
        self._conn = conn
        self._rest: RowsResult | None = None      # set once DuckDB has nothing more for us
        self._reader = None                       # a handed-out reader still reading DuckDB
        self._batches: list | None = None         # ... its batches, read out by detach()
        self._error: Error | None = None          # what reading out failed with

    # -- fetching --------------------------------------------------------------------------
    def fetchone(self) -> tuple | None:
        if self._rest is not None:
            return self._rest.fetchone()
        row = self._call(self._conn.fetchone)
        if row is None:
            self._done()
        return row

    def fetchmany(self, size: int) -> list[tuple]:
        if self._rest is not None:
            return self._rest.fetchmany(size)
        rows = self._call(self._conn.fetchmany, size)
        if len(rows) < size:
            self._done()
        return rows

    def fetchall(self) -> list[tuple]:
        if self._rest is not None:
            return self._rest.fetchall()
        rows = self._call(self._conn.fetchall)
        self._done()
        return rows

    def arrow(self):
        if self._rest is not None:
            return self._rest.arrow()
        conn = self._conn
        table = self._call(getattr(conn, "to_arrow_table", None) or conn.fetch_arrow_table)
        self._done()
        return table

    def df(self):
        if self._rest is not None:
            return self._rest.df()
        out = self._call(self._conn.df)
        self._done()
        return out

    def reader(self, batch_rows: int):
        """DuckDB's record batch reader, wrapped so that its batches survive a later statement
        of the session (:meth:`detach` reads them out first)."""
        import pyarrow as pa

        if self._rest is not None:
            return self._rest.reader(batch_rows)
        conn = self._conn
        inner = self._call(getattr(conn, "to_arrow_reader", None) or conn.fetch_record_batch, batch_rows)
        self._reader = inner
        self._done()                              # every row belongs to the reader now

        def batches() -> Iterator:
            while True:
                if self._batches is not None:     # detached: read out already
                    yield from self._batches
                    self._batches = []
                    return
                try:
                    batch = self._call(inner.read_next_batch)
                except StopIteration:
                    self._reader = None
                    return
                yield batch

        return pa.RecordBatchReader.from_batches(inner.schema, batches())

    # -- life cycle --------------------------------------------------------------------------
    @property
    def pending(self) -> bool:
        """Whether DuckDB still holds rows of this result."""
        return self._rest is None or (self._reader is not None and self._batches is None)

    def detach(self) -> None:
        """Read the rows left into Python before the connection runs another statement (O(rows
        left)); an error while reading is kept for the next fetch of this result, not raised
        into the statement that comes next."""
        if not self.pending:
            return
        try:
            if self._reader is not None:
                self._batches = list(self._call(self._reader.read_all).to_batches())
            else:
                self._rest = RowsResult(self.description, self._call(self._conn.fetchall), self.rowcount)
        except Error as e:
            self._error = e
            self._batches = []
        self._reader = None
        self._done()

    def close(self) -> None:
        self._rest = RowsResult(self.description, [], self.rowcount)
        self._batches = []
        self._reader = None

    def _done(self) -> None:
        if self._rest is None:
            self._rest = RowsResult(self.description, [], self.rowcount)

    def _call(self, fn, *args):
        import duckdb

        if self._error is not None:
            raise self._error
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Arrow output on a DB-API result", UserWarning)
                return fn(*args)
        except duckdb.Error as e:
            self._done()
            raise from_driver(e) from e


class StreamGuard:
    """The result DuckDB streams on one connection, held weakly: :meth:`settle` reads it out
    only if something still holds it, then runs what was to happen after it (unregistering
    what its statement read)."""

    def __init__(self):
        self._ref: weakref.ref | None = None
        self._after: list[Callable[[], None]] = []

    @property
    def active(self) -> bool:
        return self._ref is not None

    def track(self, result: DuckResult) -> None:
        self._ref = weakref.ref(result)

    def current(self) -> DuckResult | None:
        return self._ref() if self._ref is not None else None

    def after(self, fn: Callable[[], None]) -> None:
        self._after.append(fn)

    def settle(self) -> None:
        ref, self._ref = self._ref, None
        active = ref() if ref is not None else None
        if active is not None:
            active.detach()
        done, self._after = self._after, []
        for fn in done:
            fn()

    def close(self) -> None:
        active = self.current()
        if active is not None:
            active.close()
        self._ref = None
        self._after = []


class PgResult(Result):
    """psycopg's client-side cursor: rows converted to Python as they are fetched."""

    def __init__(self, cursor, translate: Callable[[BaseException], Error]):
        self._cur = cursor
        self._translate = translate
        self.description = cursor.description
        self.rowcount = cursor.rowcount

    def fetchone(self) -> tuple | None:
        return self._call(self._cur.fetchone)

    def fetchmany(self, size: int) -> list[tuple]:
        return self._call(self._cur.fetchmany, size)

    def fetchall(self) -> list[tuple]:
        return self._call(self._cur.fetchall)

    def close(self) -> None:
        self._cur.close()

    def _call(self, fn, *args):
        if self._cur.closed or self.description is None:     # closed, or no rows to fetch
            return None if fn == self._cur.fetchone else []
        try:
            return fn(*args)
        except Exception as e:  # the driver's errors, translated
            if isinstance(e, Error):
                raise
            err = self._translate(e)
            if err is None:
                raise
            raise err from e
