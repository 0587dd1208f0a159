"""The incremental views of a DuckDB session: creation, loading, the catalog, stopping.

:class:`DuckViews` owns the views (``views``: name → :class:`ViewState`) and the capture of
their tables (``captures``: table → :class:`ivm_layer.io.duckdb.capture.TableCapture`). It compiles a
``CREATE INCREMENTAL VIEW``, loads the view from its tables in batches (static tables first,
a progress bar on a terminal), creates the view's table (MATERIALIZED) or its served ``TEMP
VIEW``, and keeps ``ivm.views`` — checking every catalog row it resumes against the name and
kind it is stored under and never replacing a table it did not create (those carry
:data:`MARKER` as their comment).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import CatalogWarning, InternalError, IVMError, SourceGoneError, SQLError
from ...io.duckdb import capture as duck
from ...maintain.viewset import ViewSet, load_view
from ...progress import Progress
from ...identifiers import sql_fold
from ...sql.statements import CreateIncrementalView, classify, named_columns
from ..core import ViewStateBase, dedupe_names
from . import ranges, reads
from .tables import arrow_type, bulk_insert

#: rows per batch of a view's initial load: large, so that most index groups are built whole
#: from sorted data (engine/bulk.py) rather than added to row by row; the rows are held by the
#: engine anyway, so the chunk costs no memory beyond its list
LOAD_CHUNK = 1 << 20

if TYPE_CHECKING:  # pragma: no cover
    from ...engine.view import View

quote = duck.quote
log = logging.getLogger("ivm_layer.session")
MARKER = "ivm-layer: incremental materialized view"


@dataclass(eq=False)
class ViewState(ViewStateBase):
    """One incremental view of a DuckDB session."""

    stmt: CreateIncrementalView
    view: View | None
    tables: list[str]
    columns: list[str]          # DuckDB column names of the view's rows
    types: list[str]            # DuckDB column types
    schema: Any = None          # Arrow schema of the rows (served views)
    error: IVMError | None = None
    subscribers: list = field(default_factory=list)
    source_types: dict = field(default_factory=dict)  # table -> DuckDB column types at creation
    rebuilds: int = 0           # times a write to a static table rebuilt the view
    sql: str = ""               # the SELECT the engine compiles: views it reads inlined as WITH items
    depends: list = field(default_factory=list)   # incremental views it reads
    engine_schema: dict = field(default_factory=dict)   # {table: {column: type}} it was compiled with
    bounds: list = field(default_factory=list)   # computed columns of bounded types (ranges.py)
    input_types: dict = field(default_factory=dict)   # parameterized: {input: DuckDB type}

    @property
    def static(self) -> set[str]:
        return set(getattr(self.stmt, "static", ()) or ())

    @property
    def wants_change(self) -> bool:
        """The view's change is written to its table (MATERIALIZED) or its computed values are
        range-checked (``bounds``); a served view is read from the engine and needs none."""
        return self.stmt.materialized or bool(self.bounds)

    def recompile(self) -> View:
        """The definition compiled again, empty (a rebuild after a write to a static table)."""
        return DuckViews.compile(self.stmt, self.engine_schema, self.sql)


class DuckViews:
    """The views of one session and the capture of the tables they read."""

    def __init__(self, conn, progress: bool | None = None):
        self.conn = conn
        self.progress = progress
        self.views: dict[str, ViewState] = {}
        self.captures: dict[str, duck.TableCapture] = {}
        self.names = reads.ViewNames()
        #: the one road of captured changes to the views (:mod:`ivm_layer.maintain.viewset`)
        self.viewset = ViewSet(self.views)

    # -- lookups ----------------------------------------------------------------------------
    def readers(self, table: str) -> list[str]:
        return sorted(v.name for v in self.views.values() if table in v.tables)

    def healthy(self, vs: ViewState) -> ViewState:
        if vs.error is not None:
            raise vs.error
        return vs

    def stored(self, table: str):
        """The engine's copy of ``table`` (what a fallback diff compares against)."""
        for vs in self.views.values():
            if vs.error is None and table in vs.tables:
                return vs.view.base_rows(table)
        return {}

    def source_columns(self, table: str) -> dict[str, str]:
        """``{column: type}`` of ``table`` as the views were created over it."""
        for vs in self.views.values():
            if table in vs.tables and vs.error is None:
                return dict(zip(self.captures[table].columns, vs.source_types[table]))
        return {}

    def object_exists(self, name: str, schemas: str = "'main', 'temp'") -> bool:
        return self.conn.execute(
            f"SELECT count(*) FROM information_schema.tables WHERE table_schema IN ({schemas}) "
            f"AND {sql_fold('table_name')} = ?", [name]).fetchall()[0][0] > 0

    # -- creating and loading -----------------------------------------------------------------
    def create(self, st: CreateIncrementalView) -> None:
        name = st.name
        if name in self.views:
            if st.if_not_exists:
                return
            if not st.or_replace:
                raise SQLError(f"incremental view {name!r} already exists", sqlstate="42P07")
            self.drop(name)
        if self.object_exists(name):
            raise SQLError(f"cannot create incremental view {name!r}: a table or view of that name exists")
        sql, depends, schema = self.expand(st)
        view = self.compile(st, schema, sql)
        self.conn.execute("BEGIN TRANSACTION")
        try:
            vs = self.install(st, view, schema, fresh_table=True, sql=sql, depends=depends)
            self.conn.execute(f"INSERT INTO {duck.SCHEMA}.views VALUES (?, ?, ?)",
                              [name, "materialized" if st.materialized else "incremental",
                               st.definition("duckdb")]).fetchall()
            self.conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            self.forget_unused()
            raise
        self.register(vs)

    def register(self, vs: ViewState) -> None:
        self.views[vs.name] = vs
        self.names.set(self.views)

    def expand(self, st: CreateIncrementalView) -> tuple[str, list[str], dict[str, dict[str, str]]]:
        """``(SELECT to compile, incremental views it reads, schema of its base tables)``. A view
        over incremental views reads their definitions as WITH items (select–project–join ones
        are inlined, others become nested views), so it is maintained from the same base-table
        changes as they are."""
        from ...sql.constants import (
            constant_inputs,  # sqlglot: loaded with the first view
        )

        # a stopped catalog row never hides a table of the same name
        depends = [t for t in st.tables if t in self.views
                   and (self.views[t].error is None or duck.table_columns(self.conn, t) is None)]
        sql = st.select_sql
        tables = [t for t in st.tables if t not in depends]
        for d in depends:
            vs = self.healthy(self.views[d])
            if is_parameterized(vs.view):
                raise SQLError(f"incremental view {st.name!r} reads parameterized view {d!r}: read it "
                               f"in a query with its inputs instead")
            tables += [t for t in vs.tables if t not in tables]
        if depends:
            items = ", ".join(f"{quote(d)} AS ({self.views[d].sql})" for d in depends)
            body = sql.lstrip()
            sql = (f"WITH {items}, {body[4:].lstrip()}" if body[:4].upper() == "WITH" and body[4:5].isspace()
                   else f"WITH {items} {body}")
        schema: dict[str, dict[str, str]] = {}
        for t in tables:
            cols = duck.table_columns(self.conn, t)
            if cols is not None:
                schema[t] = cols
        if not schema and (st.tables or not constant_inputs(sql, "duckdb")[1]):
            raise SQLError(f"unknown table {st.tables[0]!r} in the definition of {st.name!r}"
                           if st.tables else f"incremental view {st.name!r} reads no table", sqlstate="42P01")
        return sql, depends, schema

    @staticmethod
    def compile(st: CreateIncrementalView, schema: dict, sql: str):
        from ...compile import compile_view  # the engine loads with the first view

        static = tuple(getattr(st, "static", ()) or ())
        opts = {"epsilon": st.epsilon} if getattr(st, "epsilon", None) is not None else {}
        if static:
            return compile_view(sql, schema, dialect="duckdb", static=static, **opts)
        return compile_view(sql, schema, dialect="duckdb", **opts)

    def install(self, st: CreateIncrementalView, view: View, schema: dict, fresh_table: bool,
                sql: str, depends: list[str]) -> ViewState:
        """Track the base tables, bulk-load the view, describe (and fill) its table."""
        # sqlglot: loaded with the first view
        from ...sql.paramtypes import describable, input_types, is_hidden

        described, range_inputs = describable(sql, "duckdb") if is_parameterized(view) else (sql, [])
        desc = self.conn.execute(f"DESCRIBE {described}").fetchall()
        inputs = input_types([(r[0], r[1]) for r in desc], range_inputs) if is_parameterized(view) else {}
        desc = [r for r in desc if not (is_parameterized(view) and is_hidden(r[0]))]
        types = [r[1] for r in desc]
        columns = dedupe_names([r[0] for r in desc])
        columns = named_columns(st.name, st.columns, columns)
        if len(types) != len(view.columns):
            raise InternalError(f"internal: DuckDB sees {len(types)} columns, the engine {len(view.columns)}")
        vs = ViewState(st, view, list(view.tables), columns, types, sql=sql, depends=list(depends),
                       engine_schema={t: dict(schema[t]) for t in view.tables}, input_types=inputs)
        vs.source_types = {t: list(schema[t].values()) for t in vs.tables}
        for t in vs.tables:
            if t not in self.captures:
                cap = duck.TableCapture(t, list(schema[t]), list(schema[t].values()),
                                        generated=bool(duck.generated_columns(self.conn, t)),
                                        key=duck.unique_key(self.conn, t))
                cap.reset(self.conn)
                self.captures[t] = cap
        self.load(vs.name, view, vs.tables, vs.static)
        from ...engine.aggregates import AggregateView   # loaded with the first view
        from ...engine.project import ProjectView

        if isinstance(view, (AggregateView, ProjectView)):
            vs.bounds = ranges.column_bounds(types)
            if vs.bounds:
                ranges.check(vs.name, vs.columns, vs.bounds, view.rows())
        if st.materialized:
            if is_parameterized(view):
                raise SQLError(f"a parameterized view has no contents of its own to materialize: "
                               f"CREATE INCREMENTAL VIEW {st.name} (without MATERIALIZED)")
            self.fill_table(vs, fresh_table)
        else:
            self.serve(vs)
        return vs

    def serve(self, vs: ViewState) -> None:
        """Create the served view's ``TEMP VIEW`` over its (per-statement) Arrow reader."""
        import pyarrow as pa

        reads.warm_up()
        vs.schema = pa.schema([pa.field(c, arrow_type(self.conn, t)) for c, t in zip(vs.columns, vs.types)])
        if is_parameterized(vs.view):
            return  # read through lookups only (sessions.lookups)
        rows_name = reads.rows_name(vs.name)
        self.conn.register(rows_name, reads.reader((), vs.schema))
        try:
            self.conn.execute(reads.view_sql(vs.name, vs.columns, vs.types))
        finally:
            self.conn.unregister(rows_name)

    def load(self, name: str, view, tables: list[str], static: set[str]) -> None:
        """Apply the tables' rows to ``view`` in batches (static tables first), with a progress
        bar on a terminal."""
        tables = sorted(tables, key=lambda t: t not in static)
        total = sum(self.captures[t].rows for t in tables)
        bar = Progress(total, f"loading {name}", enabled=self.progress)
        for t in tables:
            for rows in self.captures[t].scan(self.conn, LOAD_CHUNK):
                load_view(view, {t: [(r, 1) for r in rows]})
                bar.advance(len(rows))
        bar.close()

    def fill_table(self, vs: ViewState, fresh: bool) -> None:
        table = f"main.{quote(vs.name)}"
        if fresh:
            cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(vs.columns, vs.types))
            self.conn.execute(f"CREATE TABLE {table} ({cols})")
            self.conn.execute(f"COMMENT ON TABLE {table} IS '{MARKER}'")
        else:
            self.conn.execute(f"DELETE FROM {table}").fetchall()
        bulk_insert(self.conn, table, vs.types, vs.view.rows())

    # -- dropping and stopping ------------------------------------------------------------------
    def drop(self, name: str) -> None:
        readers = sorted(v.name for v in self.views.values() if name in v.depends)
        if readers:
            raise SQLError(f"incremental view(s) {', '.join(readers)} read {name!r}: drop them first", sqlstate="2BP01")
        vs = self.views[name]
        self.conn.execute("BEGIN TRANSACTION")
        try:
            if vs.materialized:
                if duck.table_comment(self.conn, name) == MARKER:
                    self.conn.execute(f"DROP TABLE IF EXISTS main.{quote(name)}")
            else:
                self.conn.execute(f"DROP VIEW IF EXISTS temp.{quote(name)}")
            self.conn.execute(f"DELETE FROM {duck.SCHEMA}.views WHERE name = ?", [name]).fetchall()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        del self.views[name]
        self.names.set(self.views)
        self.forget_unused()

    def forget_unused(self) -> None:
        used = {t for v in self.views.values() if v.error is None for t in v.tables}
        for t in [t for t in self.captures if t not in used]:
            del self.captures[t]

    def source_gone(self, table: str) -> None:
        """``table`` was dropped or changed shape outside the session: stop its readers alone."""
        for vs in self.views.values():
            if table in vs.tables and vs.error is None:
                vs.error = SourceGoneError(
                    f"incremental view {vs.name!r} stopped: its table {table!r} was dropped, replaced or "
                    f"altered outside the session; DROP VIEW {vs.name} and create it again")
                vs.view = None
        self.forget_unused()

    # -- the catalog --------------------------------------------------------------------------
    def load_catalog(self) -> None:
        duck.ensure_catalog(self.conn)
        duck.drop_legacy_shadows(self.conn)
        rows = self.conn.execute(f"SELECT name, kind, definition FROM {duck.SCHEMA}.views ORDER BY name").fetchall()
        for name, kind, definition in _dependency_order(rows):
            try:
                vs = self.resume(name, kind, definition)
            except Exception as e:  # one bad row must not make the database unopenable
                err = e if isinstance(e, IVMError) else IVMError(f"{type(e).__name__}: {e}")
                stmt = CreateIncrementalView(text=str(definition), name=str(name), select_sql=str(definition),
                                             materialized=kind == "materialized")
                vs = ViewState(stmt, None, [], [], [], error=IVMError(
                    f"incremental view {name!r} could not be resumed from the catalog: {err}"))
                warnings.warn(CatalogWarning(str(vs.error)), stacklevel=4)
            self.register(vs)

    def resume(self, name: str, kind: str, definition: str) -> ViewState:
        """Recompile and reload one catalog row after checking it describes only itself."""
        if kind not in ("incremental", "materialized"):
            raise IVMError(f"unknown kind {kind!r}")
        st = classify(definition, "duckdb")
        if not isinstance(st, CreateIncrementalView):
            raise IVMError("its definition is not a CREATE INCREMENTAL VIEW statement")
        if st.name != name or st.materialized != (kind == "materialized") or st.or_replace:
            raise IVMError(f"its definition ({st.definition('duckdb')[:80]}…) does not match the "
                           f"name {name!r} and kind {kind!r} it is stored under")
        exists = self.object_exists(name)
        if st.materialized and exists and duck.table_comment(self.conn, name) != MARKER:
            raise IVMError(f"table {name!r} was not created by ivm-layer; it was left untouched")
        if not st.materialized and self.object_exists(name, "'main'"):
            raise IVMError(f"a table or view {name!r} exists in the database; it was left untouched")
        sql, depends, schema = self.expand(st)
        view = self.compile(st, schema, sql)
        self.conn.execute("BEGIN TRANSACTION")
        try:
            vs = self.install(st, view, schema, fresh_table=not exists, sql=sql, depends=depends)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            self.forget_unused()
            raise
        return vs


def is_parameterized(view) -> bool:
    """Whether ``view`` has inputs (paper 004): read only through ``lookup``."""
    return bool(getattr(view, "params", None))


def _dependency_order(rows: list[tuple]) -> list[tuple]:
    """Catalog rows with every view after the views its definition names (a view over views
    resumes once they exist); rows in a cycle or naming unknown views keep their place at the
    end, where resuming them reports the problem."""
    names = {r[0] for r in rows}
    reads: dict[str, set[str]] = {}
    for name, _, definition in rows:
        try:
            st = classify(definition, "duckdb")
            reads[name] = {t for t in getattr(st, "tables", ()) if t in names and t != name}
        except Exception:  # a bad row: resumed (and reported) in its turn
            reads[name] = set()
    done: set[str] = set()
    out: list[tuple] = []
    pending = list(rows)
    while pending:
        ready = [r for r in pending if reads[r[0]] <= done]
        if not ready:
            out.extend(pending)
            break
        for r in ready:
            out.append(r)
            done.add(r[0])
        pending = [r for r in pending if r[0] not in done]
    return out
