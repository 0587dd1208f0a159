"""What every session offers, whatever the database behind it: :class:`SessionBase` (PEP 249
connection methods, DuckDB-shaped shortcuts, statement dispatch and the view introspection API
used by the shell) and :class:`ViewInfo`. :mod:`ivm_layer.session.duckdb.session` (DuckDB) and
:mod:`ivm_layer.session.postgres.session` (PostgreSQL) subclass it with their change capture;
the cursor is :class:`~ivm_layer.session.cursor.Cursor`.

The same application code runs on both: ``cursor()``, ``execute``/``executemany`` with
``?``, ``$1`` or ``$name`` placeholders, ``commit()``/``rollback()``, ``close()``, the context
manager, and errors from :mod:`ivm_layer.errors` (PEP 249 classes with a SQLSTATE)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from ..errors import (
    CatalogError,
    Error,
    InterfaceError,
    ProgrammingError,
    SubscriberWarning,
)
from ..identifiers import ascii_lower, resolve
from .cursor import Cursor
from .results import Result, RowsResult
from .router import split

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.protocol import View

__all__ = ["Cursor", "SessionBase", "SubscriberWarning", "ViewInfo", "dedupe_names"]


@dataclass(frozen=True)
class ViewInfo:
    """What a session knows about one incremental view (``Session.info``; the shell's ``\\dv``)."""

    name: str
    kind: str                   # "incremental" (served from the engine) or "materialized" (a table too)
    rows: int                   # total multiplicity of the view's current contents
    query_class: str            # the planner's class, e.g. "q-hierarchical"
    tables: tuple[str, ...]     # base tables read
    columns: tuple[str, ...]    # output column names
    types: tuple[str, ...]      # the database's column types
    definition: str             # the CREATE INCREMENTAL VIEW statement
    lag_bytes: int | None = None      # change-stream sources only (PostgreSQL): bytes behind
    lag_seconds: float | None = None  # ... and seconds behind; None where the source has no lag
    rebuilds: int = 0                 # rebuilds after writes to the view's static tables
    wal_retained_bytes: int | None = None  # PostgreSQL: WAL the view's slot holds on the server


class ViewStateBase:
    """Mixin of a session's per-view state: name and kind come from its CREATE statement;
    ``subscribers`` are the session-level callbacks (see :meth:`SessionBase.subscribe`)."""

    stmt: Any
    subscribers: list

    @property
    def name(self) -> str:
        return self.stmt.name

    @property
    def materialized(self) -> bool:
        return self.stmt.materialized


class SessionBase:
    """Shared part of the sessions. Subclasses set ``dialect``, keep their views in
    ``self._views`` (name → state with ``stmt``, ``view``, ``tables``, ``columns``, ``types``,
    ``name``, ``materialized``) and ``self._closed``, and implement ``_execute_one`` and
    ``close``; ``_view_lag`` reports replication lag where the source has one."""

    dialect = "duckdb"
    _views: dict
    _closed: bool
    _last: Cursor | None = None      # the cursor of the last session.execute (DuckDB-style fetches)

    # -- PEP 249 connection methods -------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def cursor(self) -> Cursor:
        """A new cursor of this session (PEP 249)."""
        self._check_open()
        return Cursor(self)

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Cursor:
        """Run one or more statements (parameters: one statement only, ``?``/``$1``/``$name``
        placeholders); return a new cursor holding the result of the last one."""
        cur = Cursor(self)
        cur.execute(sql, params)
        self._last = cur
        return cur

    def executemany(self, sql: str, seq_of_params: Iterable[Sequence[Any] | Mapping[str, Any]]) -> Cursor:
        """Run one statement once per parameter set (see :meth:`Cursor.executemany`)."""
        cur = Cursor(self)
        cur.executemany(sql, seq_of_params)
        self._last = cur
        return cur

    def commit(self) -> None:
        """Commit the open transaction (``BEGIN`` … ); without one, do nothing: statements
        outside ``BEGIN`` commit as they run (autocommit, as in DuckDB)."""
        self._check_open()
        if self._in_transaction():
            self._run("COMMIT", None)

    def rollback(self) -> None:
        """Roll back the open transaction; without one, do nothing."""
        self._check_open()
        if self._in_transaction():
            self._run("ROLLBACK", None)

    # DuckDB-shaped shortcuts: the result of the last ``session.execute`` (``con.execute(q);
    # con.fetchall()`` works on a session as on a DuckDB connection)
    @property
    def description(self):
        return self._last_cursor().description

    @property
    def rowcount(self) -> int:
        return self._last_cursor().rowcount

    def fetchone(self) -> tuple | None:
        return self._last_cursor().fetchone()

    def fetchmany(self, size: int = 1) -> list[tuple]:
        return self._last_cursor().fetchmany(size)

    def fetchall(self) -> list[tuple]:
        return self._last_cursor().fetchall()

    def df(self):
        return self._last_cursor().df()

    fetchdf = df

    def arrow(self):
        return self._last_cursor().arrow()

    fetch_arrow_table = arrow

    def pl(self):
        return self._last_cursor().pl()

    def fetch_record_batch(self, rows_per_batch: int = 1_000_000):
        return self._last_cursor().fetch_record_batch(rows_per_batch)

    def _last_cursor(self) -> Cursor:
        cur = getattr(self, "_last", None)
        if cur is None:
            self._check_open()
            raise ProgrammingError("no statement was run through session.execute() yet", sqlstate="24000")
        return cur

    # -- running statements (the cursor calls these) -----------------------------------------------
    def _run(self, sql: str, params) -> Result:
        """Run one or more statements; the result of the last one. The database's errors
        come out as :mod:`ivm_layer.errors` classes, the driver's exception as ``__cause__``."""
        self._check_open()
        self._settle()
        texts = split(sql)
        if params is not None and len(texts) != 1:
            raise ProgrammingError(f"parameters need exactly one statement, got {len(texts)}",
                                   sqlstate="42P02")
        out: Result = RowsResult()
        for text in texts:
            out.close()
            out = self._guarded(self._execute_one, text, params)
        return out

    def _run_many(self, sql: str, seq_of_params) -> Result:
        self._check_open()
        self._settle()
        texts = split(sql)
        if len(texts) != 1:
            raise ProgrammingError(f"executemany() takes exactly one statement, got {len(texts)}",
                                   sqlstate="42P02")
        seq = list(seq_of_params)
        if not seq:
            return RowsResult(None, [], 0)
        return self._guarded(self._execute_many, texts[0], seq)

    def _guarded(self, fn, *args) -> Result:
        try:
            return fn(*args)
        except Error:
            raise
        except Exception as e:
            err = self._translate(e)
            if err is None:
                raise
            raise err from e

    def _execute_many(self, text: str, seq: list) -> Result:
        """Default: the statement once per parameter set, all in one transaction."""
        if not seq:
            return RowsResult(None, [], 0)
        own = not self._in_transaction()
        if own:
            self._execute_one("BEGIN", None).close()
        total = 0
        try:
            for params in seq:
                res = self._execute_one(text, params)
                if res.rowcount > 0:
                    total += res.rowcount
                res.close()
        except BaseException:
            if own and self._in_transaction():
                self._execute_one("ROLLBACK", None).close()
            raise
        if own:
            self._execute_one("COMMIT", None).close()
        return RowsResult(None, [], total)

    def view(self, name: str) -> View:
        """The engine view ``name``, kept fresh by this session."""
        self._check_open()
        return self._state(name).view

    @property
    def views(self) -> list[str]:
        return sorted(self._views)

    @property
    def states(self) -> dict:
        """``{name: state}`` of the views (``view``, ``columns``, ``types``, ``materialized``,
        ``error``, ``subscribers`` …): for drivers that serve them (``ivm serve``). Read it;
        the session changes it."""
        return self._views

    def info(self, name: str | None = None) -> list[ViewInfo]:
        """Describe one view (``name``) or all of them, sorted by name."""
        self._check_open()
        names = [self._state(name).name] if name is not None else sorted(self._views)
        out = []
        for n in names:
            vs = self._views[n]
            lag_bytes, lag_seconds = self._view_lag(vs)
            out.append(ViewInfo(vs.name, "materialized" if vs.materialized else "incremental",
                                len(vs.view), vs.view.query_class, tuple(vs.tables),
                                tuple(vs.columns), tuple(vs.types), vs.stmt.definition(self.dialect),
                                lag_bytes, lag_seconds, getattr(vs, "rebuilds", 0),
                                self._view_retained(vs)))
        return out

    def explain(self, name: str) -> str:
        """The view's plan (the GJT drawn as a tree, class, costs, what is materialized)."""
        self._check_open()
        return self._state(name).view.explain()

    def subscribe(self, name: str, callback: Callable[[list[tuple[tuple, int]]], Any]) -> Callable[[], None]:
        """Call ``callback(change)`` with ``[(row, Δk), …]`` after each change of view ``name``;
        returns a function that unsubscribes. The callback runs after the database committed the
        change (DuckDB inside ``BEGIN … COMMIT``: at ``COMMIT``, with the transaction's
        consolidated change, nothing on ``ROLLBACK``; PostgreSQL: as committed changes are
        applied), and an exception it raises is reported as a :class:`SubscriberWarning`: the
        change stays applied in the database and in the view alike. Callbacks registered on
        the engine view itself (``session.view(name).subscribe``) are called the same way (both
        through :meth:`ivm_layer.maintain.viewset.ViewSet.notify`)."""
        self._check_open()
        vs = self._state(name)
        vs.subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in vs.subscribers:
                vs.subscribers.remove(callback)

        return unsubscribe

    def close(self) -> None:  # pragma: no cover - every session overrides it
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- for subclasses -----------------------------------------------------------------
    def _execute_one(self, text: str, params) -> Result:  # pragma: no cover
        raise NotImplementedError

    def _in_transaction(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _settle(self) -> None:
        """Before the connection runs another statement: free it from a pending result."""

    def _translate(self, exc: BaseException) -> Error | None:
        """The layer's error for a driver exception that left a statement; None: not one."""
        return None

    def _view_lag(self, vs) -> tuple[int | None, float | None]:
        """(bytes, seconds) the view is behind its source; (None, None) without a stream."""
        return None, None

    def _view_retained(self, vs) -> int | None:
        """WAL the view's replication slot holds on the server; None without one."""
        return None

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("the session is closed", sqlstate="08003")

    def _state(self, name: str):
        vs = self._views.get(resolve(name, self._views))
        if vs is None:
            raise CatalogError(f"no incremental view named {name!r}; views: {', '.join(sorted(self._views)) or 'none'}",
                               sqlstate="42P01")
        return vs


def unalterable(name: str) -> str:
    """The message for ``ALTER`` of an incremental view (renaming one would leave its catalog row,
    served reads and change stream under the old name)."""
    return (f"{name!r} is an incremental view: it cannot be altered or renamed; DROP VIEW {name} "
            "and CREATE INCREMENTAL VIEW again with the new name or definition")


def dedupe_names(names: list[str]) -> list[str]:
    """Make column names unique the way DuckDB does (``x``, ``x_1``, …), case-insensitively."""
    seen: set[str] = set()
    out = []
    for n in names:
        base, cand, i = n, n, 0
        while ascii_lower(cand) in seen:
            i += 1
            cand = f"{base}_{i}"
        seen.add(ascii_lower(cand))
        out.append(cand)
    return out

