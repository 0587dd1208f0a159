"""Compiling a PostgreSQL session's view definition: the columns it reads of each table
(only those are copied and streamed), the engine view, and PostgreSQL's output types."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from ...errors import InternalError, PrivilegeError, SQLError, from_driver
from ...io.postgres import conninfo as pgconn
from ...io.postgres import replication as pgc
from ...maintain.checkpoint import CheckpointStore
from ...maintain.viewset import ViewSet
from ...sql.constants import constant_inputs
from ...sql.paramtypes import describable, input_types, is_hidden
from ...identifiers import normalize_tree
from ...sql.statements import CreateIncrementalView, named_columns
from ..core import dedupe_names
from .served import ServedTable
from .state import UNIT_COLUMN, PgContext, PgView, compile_engine_view, slot_name


def used_columns(ctx: PgContext, st: CreateIncrementalView) -> dict[str, list[tuple[str, int, str]]]:
    tree = normalize_tree(sqlglot.parse_one(st.select_sql, read=ctx.dialect), ctx.dialect)
    # SELECT * / t.* read every column; COUNT(*) reads none
    star = any(not isinstance(s.parent, exp.Count) for s in tree.find_all(exp.Star))
    # every identifier (columns, JOIN … USING names, and harmlessly table names/aliases):
    # a superset of the columns the view reads
    names = {i.name for i in tree.find_all(exp.Identifier)}
    used: dict[str, list[tuple[str, int, str]]] = {}
    for t in st.tables:
        if t in ctx.views:
            raise SQLError(f"incremental view {st.name!r} reads incremental view {t!r}: "
                           "views over views are not supported yet")
        cols = pgc.table_columns(ctx.ctl, t)
        if cols is None:
            raise SQLError(f"unknown table {t!r} in the definition of {st.name!r} "
                           "(source tables must be in the public schema)", sqlstate="42P01")
        used[t] = [(c, oid, typ) for c, typ, oid in cols if star or c in names]
    if not used and not constant_inputs(st.select_sql, ctx.dialect)[1]:
        raise SQLError(f"incremental view {st.name!r} reads no table")
    return used


def compile_pg_view(ctx: PgContext, st: CreateIncrementalView, slot: str | None = None) -> PgView:
    """The engine view, output columns/types, slot and checkpoint store of a definition."""
    ctl = ctx.ctl
    used = used_columns(ctx, st)
    # a table read for its row count only (COUNT(*)) has no used column: the engine sees
    # one constant column, so that no ALTER TABLE of it can stop the view
    schema = {t: {c: typ for c, _, typ in cols} or {UNIT_COLUMN: "integer"} for t, cols in used.items()}
    view = compile_engine_view(st, schema, ctx.dialect)
    parameterized = bool(getattr(view, "params", None))
    if parameterized and st.materialized:
        raise SQLError(f"a parameterized view has no contents of its own to materialize: "
                       f"CREATE INCREMENTAL VIEW {st.name} (without MATERIALIZED)")
    # a parameterized view's query is typed without its placeholders, its inputs as hidden columns
    described, ranges = describable(st.select_sql, ctx.dialect) if parameterized else (st.select_sql, [])
    try:
        cur = ctl.execute(f"SELECT * FROM ({described}) AS q LIMIT 0")
    except pgconn.driver_error() as e:
        if pgconn.is_permission_error(e):
            raise PrivilegeError(f"incremental view {st.name!r}: permission denied reading its tables "
                                 f"({str(e).strip()}); GRANT SELECT on them to this role",
                                 sqlstate=getattr(e, "sqlstate", None) or PrivilegeError.sqlstate) from e
        raise from_driver(e, f"incremental view {st.name!r}: {str(e).strip()}") from e
    types = [ctl.execute("SELECT format_type(%s, NULL)", [d.type_code]).fetchone()[0]
             for d in cur.description]
    names = [d.name for d in cur.description]
    hidden = [(n, t) for n, t in zip(names, types) if parameterized and is_hidden(n)]
    types = [t for n, t in zip(names, types) if not (parameterized and is_hidden(n))]
    columns = dedupe_names([n for n in names if not (parameterized and is_hidden(n))])
    columns = named_columns(st.name, st.columns, columns)
    if len(types) != len(view.columns):
        raise InternalError(f"internal: PostgreSQL sees {len(types)} columns, the engine {len(view.columns)}")
    slot = slot or slot_name(ctx.db, ctx.session, st.name)
    vs = PgView(st, view, list(used), used, columns, types, slot)
    vs.schema = schema
    if parameterized:
        vs.input_types = input_types(hidden, ranges)
        vs.described = described
        vs.hidden = [n for n, _ in hidden]
        vs.ranges = ranges
    vs.store = CheckpointStore(ctx.state_dir, slot)
    vs.viewset = ViewSet({vs.name: vs}, checkpoint=vs.store)
    if not st.materialized and not parameterized:    # a parameterized view is read by lookups only
        vs.served = ServedTable(st.name, columns, types)
    vs.oids = {t: ctl.execute("SELECT to_regclass(quote_ident(%s))::oid::int", [t]).fetchone()[0]
               for t in used}
    return vs

