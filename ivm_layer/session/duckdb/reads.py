"""Serving reads of non-materialized incremental views without copying them (DuckDB).

Each served view ``v`` is a DuckDB ``TEMP VIEW v``: ``SELECT … FROM _ivm_rows_v`` with casts
to the view's exact column types, where ``_ivm_rows_v`` is a :class:`LiveRows` registered once:
on every scan it hands DuckDB a lazy Arrow ``RecordBatchReader`` over the engine's batched
enumeration (:func:`view_reader`). DuckDB pulls batches only as far as it needs them:
``SELECT * FROM v LIMIT 10`` reads one batch (O(rows returned)), a join with a table or an
aggregate over the view reads the view once per scan, and nothing is ever written.

``SELECT count(*) FROM v`` (alone) is answered from the engine's count in O(1): the statement
runs over an empty reader to get DuckDB's own result description, and the count is put in.

Cost per statement (measured, DuckDB 2.0): ``LIMIT 10`` ≈ 1–2 ms whatever the view's size; a
full scan ≈ 0.3 µs per row plus the engine's enumeration.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from itertools import islice

from ...engine import temporal
from ...io.duckdb.capture import quote
from ...identifiers import IDENT, fold
from ...sql.sqltext import unquote

BATCH_ROWS = 2048


def rows_name(view: str) -> str:
    """The name the view's rows are registered under while a statement runs."""
    return f"_ivm_rows_{view}"


def view_sql(view: str, columns: list[str], types: list[str]) -> str:
    """The ``TEMP VIEW`` that gives the served view its name and exact column types."""
    cols = ", ".join(f"{quote(c)}::{t} AS {quote(c)}" for c, t in zip(columns, types))
    return f"CREATE OR REPLACE TEMP VIEW {quote(view)} AS SELECT {cols} FROM {quote(rows_name(view))}"


def record_batches(chunks: Iterable[list[tuple[tuple, int]]], schema) -> Iterator:
    """One Arrow record batch per list of ``(row, k)`` pairs (multiplicity k → k copies)."""
    import pyarrow as pa

    fields = list(schema)
    for chunk in chunks:
        rows: list[tuple] = []
        for row, k in chunk:
            if k == 1:
                rows.append(row)
            else:
                rows.extend([row] * k)
        if rows:
            cols = list(zip(*rows))
            yield pa.RecordBatch.from_arrays([_array(c, f.type) for c, f in zip(cols, fields)],
                                             schema=schema)


def _array(values, typ):
    """An Arrow array of ``typ``; values Arrow does not take as they are for their type (UUIDs
    for DuckDB's UUID, which it exports as strings) are converted to text."""
    import pyarrow as pa

    day = pa.types.is_date32(typ)
    if (day or (pa.types.is_timestamp(typ) and typ.unit == "us")) and \
            any(map(temporal.is_infinite, values)):
        ints = pa.array([temporal.arrow_int(v, day) for v in values], type=pa.int32() if day else pa.int64())
        return ints.view(typ)
    try:
        return pa.array(values, type=typ)
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        if not pa.types.is_string(typ):
            raise
        return pa.array([None if v is None else str(v) for v in values], type=typ)


def chunks_of(pairs: Iterable[tuple[tuple, int]], first: int = 64, size: int = BATCH_ROWS) -> Iterator[list]:
    """``(row, k)`` pairs in lists of ``first`` pairs, then four times as many each time up to
    ``size`` (a ``LIMIT 10`` over a lookup reads 64 rows)."""
    it = iter(pairs)
    n = first
    while True:
        chunk = list(islice(it, n))
        if not chunk:
            return
        yield chunk
        n = min(n * 4, size)


def view_reader(view, schema):
    """A lazy ``RecordBatchReader`` over all of a view's rows, from the engine's batched
    enumeration (``rows_batches``: its inner loops run at C speed)."""
    import pyarrow as pa

    batches = getattr(view, "rows_batches", None)  # composite views enumerate row by row
    chunks = batches(BATCH_ROWS) if batches is not None else chunks_of(view.rows())
    return pa.RecordBatchReader.from_batches(schema, record_batches(chunks, schema))


_warming: threading.Thread | None = None


def warm_up(background: bool = False) -> None:
    """Pay pyarrow's one-time set-up (about a second on first use) when a served view is
    created or loaded, never on the user's first read (nor at all in a session without
    served views: a session opening does not load pyarrow); ``background=True`` starts it in
    a thread instead."""
    global _warming
    if background:
        if _warming is None:
            _warming = threading.Thread(target=warm_up, name="ivm-arrow-warm-up", daemon=True)
            _warming.start()
        return
    import pyarrow as pa

    pa.array([1], type=pa.int64())


class LiveRows:
    """A served view's rows as DuckDB scans them, registered once under :func:`rows_name` for
    the session's life: every scan asks for a fresh Arrow stream (the PyCapsule interface;
    DuckDB ≥ 1.5 calls ``__arrow_c_stream__`` per scan) over the engine's current rows, so a
    statement may scan the view several times, and ``session.connection`` reads it too. The
    schema comes from ``__arrow_c_schema__`` without enumerating anything. ``empty``: serve no
    rows (the session reads a statement's result shape this way)."""

    def __init__(self, views, name: str):
        self._views = views            # the session's name → view state map
        self.name = name
        self.empty = False

    def _state(self):
        vs = self._views.get(self.name)
        if vs is None:
            from ...errors import SQLError

            raise SQLError(f"incremental view {self.name!r} was dropped")
        if vs.error is not None:
            raise vs.error
        return vs

    def __arrow_c_schema__(self):
        return self._state().schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema=None):
        vs = self._state()
        rdr = reader((), vs.schema) if self.empty else view_reader(vs.view, vs.schema)
        return rdr.__arrow_c_stream__(requested_schema)


def reader(pairs: Iterable[tuple[tuple, int]], schema):
    """A lazy ``RecordBatchReader`` over ``(row, k)`` pairs (a lookup's answer)."""
    import pyarrow as pa

    return pa.RecordBatchReader.from_batches(schema, record_batches(chunks_of(pairs), schema))


class ViewNames:
    """Finds the served views a statement mentions, by one regular-expression search (no
    parse). A false hit (the name inside a string) only costs registering a reader."""

    def __init__(self, names: Iterable[str] = (), dialect: str = "duckdb"):
        self.dialect = dialect
        self.set(names)

    def set(self, names: Iterable[str]) -> None:
        names = sorted(set(names), key=len, reverse=True)
        self._names = frozenset(names)
        self._re = None
        if names:
            alt = "|".join(re.escape(n) for n in names)
            self._re = re.compile(rf'(?<![\w$])"?({alt})"?(?![\w$])', re.IGNORECASE)

    def find(self, text: str) -> list[str]:
        return list(self.counts(text))

    def counts(self, text: str) -> dict[str, int]:
        """``{view: how many times the text names it}``, in order of first mention."""
        out: dict[str, int] = {}
        if self._re is not None:
            for m in self._re.finditer(text):
                raw = m.group(0)
                name = fold(m.group(1), len(raw) > 1 and raw[0] == raw[-1] == '"', self.dialect)
                if name in self._names:
                    out[name] = out.get(name, 0) + 1
        return out


_IDENT = IDENT
_COUNT = re.compile(rf"\s*SELECT\s+count\s*\(\s*\*\s*\)(?:\s+(?:AS\s+)?{_IDENT})?\s+FROM\s+(?:main\s*\.\s*)?"
                    rf"({_IDENT})\s*;?\s*", re.IGNORECASE)


def count_target(text: str) -> str | None:
    """``v`` when the statement is exactly ``SELECT count(*) [AS x] FROM v``."""
    m = _COUNT.fullmatch(text)
    if not m:
        return None
    name = m.group(1)
    return unquote(name)
