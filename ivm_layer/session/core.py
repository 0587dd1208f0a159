"""What every session offers, whatever the database behind it: the DB-API style
:class:`Cursor`, :class:`ViewInfo` and :class:`SessionBase` (statement dispatch and the view
introspection API used by the shell). :mod:`ivm_layer.session.duckdb.session` (DuckDB) and
:mod:`ivm_layer.session.postgres.session` (PostgreSQL) subclass it with their change capture."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Self

from ..engine.view import View
from ..errors import IVMError, SubscriberWarning  # noqa: F401 - SubscriberWarning: its old home
from .router import split


class Cursor:
    """A DB-API style cursor over a fully fetched result."""

    arraysize = 1

    def __init__(self, description: list | None = None, rows: list[tuple] | None = None,
                 rowcount: int = -1):
        self.description = description
        self._rows = rows or []
        self._pos = 0
        self.rowcount = rowcount

    def fetchone(self) -> tuple | None:
        if self._pos >= len(self._rows):
            return None
        row = self._rows[self._pos]
        self._pos += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        n = self.arraysize if size is None else size
        out = self._rows[self._pos:self._pos + n]
        self._pos += len(out)
        return out

    def fetchall(self) -> list[tuple]:
        out = self._rows[self._pos:]
        self._pos = len(self._rows)
        return out

    def __iter__(self) -> Iterator[tuple]:
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    def close(self) -> None:
        self._rows = []
        self._pos = 0


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

    def execute(self, sql: str, params: Sequence[Any] | dict | None = None) -> Cursor:
        """Run one or more statements; return the cursor of the last one."""
        self._check_open()
        texts = split(sql)
        if params is not None and len(texts) != 1:
            raise IVMError(f"parameters need exactly one statement, got {len(texts)}")
        cur = Cursor()
        for text in texts:
            cur = self._execute_one(text, params)
        return cur

    def view(self, name: str) -> View:
        """The engine view ``name``, kept fresh by this session."""
        self._check_open()
        return self._state(name).view

    @property
    def views(self) -> list[str]:
        return sorted(self._views)

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
                                lag_bytes, lag_seconds, getattr(vs, "rebuilds", 0)))
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
    def _execute_one(self, text: str, params) -> Cursor:  # pragma: no cover
        raise NotImplementedError

    def _view_lag(self, vs) -> tuple[int | None, float | None]:
        """(bytes, seconds) the view is behind its source; (None, None) without a stream."""
        return None, None

    def _check_open(self) -> None:
        if self._closed:
            raise IVMError("the session is closed")

    def _state(self, name: str):
        vs = self._views.get(name.lower())
        if vs is None:
            raise IVMError(f"no incremental view named {name!r}; views: {', '.join(sorted(self._views)) or 'none'}")
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
        while cand.lower() in seen:
            i += 1
            cand = f"{base}_{i}"
        seen.add(cand.lower())
        out.append(cand)
    return out

