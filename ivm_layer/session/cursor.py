"""The cursor of a session: PEP 249 (the DB-API) and the result methods DuckDB users expect.

``session.cursor()`` returns a :class:`Cursor`; ``session.execute(sql, params)`` returns one
that has run ``sql``. Both backends give the same cursor:

- PEP 249: ``execute``, ``executemany``, ``description``, ``rowcount``, ``fetchone``,
  ``fetchmany`` (``arraysize``), ``fetchall``, iteration, ``close``, ``connection``,
  ``setinputsizes``/``setoutputsize`` (no-ops); any call on a closed cursor, or on a cursor
  of a closed session, raises :class:`~ivm_layer.errors.InterfaceError`; a fetch before any
  ``execute`` raises :class:`~ivm_layer.errors.ProgrammingError`. A statement that returned
  no rows (DDL, comments; PostgreSQL writes) fetches as empty, on both backends alike (DuckDB
  answers its DDL with an empty result; PEP 249 would allow raising, which would make the
  same code behave differently on the two).
- DuckDB's result methods: ``df()``/``fetchdf()``/``fetch_df()`` (pandas), ``arrow()``/
  ``fetch_arrow_table()``/``to_arrow_table()`` (a ``pyarrow.Table``), ``pl()`` (polars, when
  installed), ``fetch_record_batch(rows_per_batch)``/``to_arrow_reader()`` (a
  ``pyarrow.RecordBatchReader``). Each returns the rows not fetched yet.

Results are lazy (see :mod:`ivm_layer.session.results`): a cursor costs what the rows it hands
out cost, so ``execute("SELECT … 2M rows").fetchone()`` reads one batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Self

from ..errors import InterfaceError, ProgrammingError
from .results import Result, RowsResult


class Cursor:
    """A PEP 249 cursor over one session (see the module docstring)."""

    arraysize = 1

    def __init__(self, session=None, result: Result | None = None):
        self._session = session
        self._result: Result | None = result
        self._closed = False

    # -- PEP 249 attributes -------------------------------------------------------------------
    @property
    def description(self):
        """One 7-item entry (name, type_code, …) per result column; ``None`` when the last
        statement returned no rows."""
        return None if self._result is None else self._result.description

    @property
    def rowcount(self) -> int:
        """Rows the last statement wrote (or returned, where the database says); -1 if unknown."""
        return -1 if self._result is None else self._result.rowcount

    @property
    def connection(self):
        """The session this cursor belongs to."""
        return self._session

    # -- statements --------------------------------------------------------------------------
    def execute(self, operation: str, parameters: Sequence[Any] | Mapping[str, Any] | None = None) -> Self:
        """Run ``operation`` (one statement, or several without parameters) with ``parameters``
        for its ``?`` / ``$1`` / ``$name`` placeholders; return this cursor."""
        session = self._ready()
        self._drop_result()
        self._result = session._run(operation, parameters)
        return self

    def executemany(self, operation: str, seq_of_parameters: Iterable[Sequence[Any] | Mapping[str, Any]]) -> Self:
        """Run ``operation`` once per parameter set, as one statement where the database
        allows (``INSERT … VALUES (?, …)`` becomes one insert of every row) and in one
        transaction; ``rowcount`` is the total."""
        session = self._ready()
        self._drop_result()
        self._result = session._run_many(operation, seq_of_parameters)
        return self

    def setinputsizes(self, sizes) -> None:
        """PEP 249; does nothing."""

    def setoutputsize(self, size, column=None) -> None:
        """PEP 249; does nothing."""

    def close(self) -> None:
        """Close the cursor (its rows are dropped); every later call raises InterfaceError."""
        if not self._closed:
            self._closed = True
            self._drop_result()

    @property
    def closed(self) -> bool:
        return self._closed

    def holds(self, result: Result | None) -> bool:
        """Whether ``result`` is this cursor's current result (the session asks, to know what
        the caller may still read)."""
        return result is not None and self._result is result

    # -- rows --------------------------------------------------------------------------------
    def fetchone(self) -> tuple | None:
        """The next row, or ``None`` after the last."""
        return self._rows().fetchone()

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        """The next ``size`` rows (``arraysize`` by default); fewer at the end."""
        return self._rows().fetchmany(self.arraysize if size is None else size)

    def fetchall(self) -> list[tuple]:
        """Every row not fetched yet."""
        return self._rows().fetchall()

    def __iter__(self) -> Iterator[tuple]:
        return self

    def __next__(self) -> tuple:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    # -- DuckDB's result methods ----------------------------------------------------------------
    def df(self):
        """The rows not fetched yet as a ``pandas.DataFrame`` (needs pandas installed)."""
        rows = self._rows()
        try:
            import pandas  # noqa: F401 - only to say what is missing
        except ImportError:
            raise InterfaceError("df() needs pandas: pip install pandas") from None
        return rows.df()

    fetchdf = df
    fetch_df = df

    def arrow(self):
        """The rows not fetched yet as a ``pyarrow.Table``."""
        return self._rows().arrow()

    fetch_arrow_table = arrow
    to_arrow_table = arrow

    def pl(self):
        """The rows not fetched yet as a ``polars.DataFrame`` (needs polars installed)."""
        try:
            import polars
        except ImportError:
            raise InterfaceError("pl() needs polars: pip install polars") from None
        return polars.from_arrow(self._rows().arrow())

    def fetch_record_batch(self, rows_per_batch: int = 1_000_000):
        """The rows not fetched yet as a ``pyarrow.RecordBatchReader`` (streamed from DuckDB)."""
        return self._rows().reader(rows_per_batch)

    def to_arrow_reader(self, batch_size: int = 1_000_000):
        """Same as :meth:`fetch_record_batch`."""
        return self.fetch_record_batch(batch_size)

    # -- context manager ---------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------
    def _ready(self):
        if self._closed:
            raise InterfaceError("the cursor is closed", sqlstate="24000")
        if self._session is None:
            raise InterfaceError("this cursor belongs to no session")
        self._session._check_open()
        return self._session

    def _rows(self) -> Result:
        if self._closed:
            raise InterfaceError("the cursor is closed", sqlstate="24000")
        if self._session is not None and self._session._closed:
            raise InterfaceError("the session is closed", sqlstate="08003")
        if self._result is None:
            raise ProgrammingError("no statement was run on this cursor: call execute() first",
                                   sqlstate="24000")
        return self._result

    def _drop_result(self) -> None:
        if self._result is not None:
            self._result.close()
            self._result = None


def rows_cursor(description=None, rows: list[tuple] | None = None, rowcount: int = -1) -> Result:
    """A result of rows already in Python (what the sessions' internals return)."""
    return RowsResult(description, rows, rowcount)
