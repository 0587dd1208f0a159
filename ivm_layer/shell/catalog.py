"""The catalog listings: ``\\d [NAME]``, ``\\dt``, ``\\dn``, ``\\df``, ``\\l`` and ``\\dv``.

On PostgreSQL (a session, or a plain client of a server) they run psql's own catalog queries
(``pg_catalog``), with psql's columns and patterns (``t*``, ``public.*``, ``"Mixed"``); on
DuckDB the same listings come from ``duckdb_tables()``, ``duckdb_schemas()``,
``duckdb_functions()`` and ``duckdb_databases()``. Incremental views are listed by ``\\dv``
(from the session, or from ``SHOW INCREMENTAL VIEWS`` on ``ivm serve``) and are left out of
``\\dt``; the layer's own bookkeeping schema ``ivm`` is left out unless a pattern names it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import ShellError
from ..identifiers import ascii_lower, resolve, sql_fold
from .metaargs import plain_name, require
from .render import render_result

if TYPE_CHECKING:
    from .context import ShellContext


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def name_pattern(pattern: str) -> tuple[str | None, str]:
    """psql's pattern → (schema regex or None, name regex), both anchored: ``*`` any text,
    ``?`` one character, ``.`` between schema and name, unquoted letters folded to lower
    case, ``"…"`` taken as written."""
    parts: list[list[str]] = [[]]
    quoted = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == '"':
            if quoted and pattern.startswith('""', i):
                parts[-1].append('"')
                i += 2
                continue
            quoted = not quoted
        elif not quoted and c == ".":
            parts.append([])
        elif not quoted and c == "*":
            parts[-1].append(".*")
        elif not quoted and c == "?":
            parts[-1].append(".")
        else:
            parts[-1].append(re.escape(c if quoted else c.lower()))
        i += 1
    regexes = ["^(" + "".join(p) + ")$" for p in parts[-2:]]
    return (regexes[0], regexes[1]) if len(regexes) == 2 else (None, regexes[0])


def _filters(runner: ShellContext, args: list[str], schema_col: str, name_col: str,
             visible: str | None = None) -> tuple[str, bool]:
    """SQL conditions for an optional pattern argument, and whether it named a schema."""
    if not args:
        return (f" AND {visible}" if visible else ""), False
    schema, name = name_pattern(args[0])
    match = "{col} OPERATOR(pg_catalog.~) {rx}" if _postgres(runner) else "regexp_full_match({col}, {rx})"
    out = " AND " + match.format(col=name_col, rx=_literal(name))
    if schema is not None:
        out += " AND " + match.format(col=schema_col, rx=_literal(schema))
    elif visible:
        out += f" AND {visible}"
    return out, schema is not None


def _postgres(runner: ShellContext) -> bool:
    return runner.session.dialect == "postgres"


def _title(runner: ShellContext, title: str) -> None:
    if runner.display.format == "aligned":
        runner.write(title + "\n")


def _listing(runner: ShellContext, title: str, sql: str, empty: str, args: list[str]) -> None:
    res = runner.execute(sql)
    if not res.rows and runner.display.format == "aligned":
        what = f' named "{args[0]}"' if args else ""
        runner.write(f"Did not find any {empty}{what}.\n")
        return
    _title(runner, title)
    runner.write(render_result(res.columns or [], res.rows, runner.display))


def _view_names(runner: ShellContext) -> set[str]:
    try:
        return set(runner.session.views)   # keys (ivm_layer.identifiers)
    except runner.db_errors:
        return set()


def tables(runner: ShellContext, args: list[str]) -> None:
    """``\\dt [PATTERN]``: tables (not the incremental views, which ``\\dv`` lists)."""
    require(args, 0, 1, "\\dt [PATTERN]")
    views = sorted(_view_names(runner))
    skip = f" AND c.relname NOT IN ({', '.join(map(_literal, views))})" if views else ""
    if _postgres(runner):
        cond, named = _filters(runner, args, "n.nspname", "c.relname", "pg_catalog.pg_table_is_visible(c.oid)")
        sql = ("SELECT n.nspname AS \"Schema\", c.relname AS \"Name\", "
               "CASE c.relkind WHEN 'p' THEN 'partitioned table' ELSE 'table' END AS \"Type\", "
               "pg_catalog.pg_get_userbyid(c.relowner) AS \"Owner\" "
               "FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
               "WHERE c.relkind IN ('r', 'p') AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast' "
               f"AND n.nspname <> 'information_schema'{'' if named else ' AND n.nspname <> ' + _literal('ivm')}"
               f"{cond}{skip} ORDER BY 1, 2")
    else:
        cond, named = _filters(runner, args, "schema_name", "table_name")
        skip = skip.replace("c.relname", sql_fold("table_name"))   # DuckDB keys: ASCII lower case
        sql = ("SELECT schema_name AS \"Schema\", table_name AS \"Name\", "
               "CASE WHEN temporary THEN 'temporary table' ELSE 'table' END AS \"Type\" "
               "FROM duckdb_tables() WHERE database_name IN (current_database(), 'temp') "
               f"{'' if named else ' AND schema_name <> ' + _literal('ivm')}{cond}{skip} ORDER BY 1, 2")
    _listing(runner, "List of relations", sql, "relations", args)


def schemas(runner: ShellContext, args: list[str]) -> None:
    """``\\dn [PATTERN]``: schemas."""
    require(args, 0, 1, "\\dn [PATTERN]")
    if _postgres(runner):
        cond = f" AND n.nspname OPERATOR(pg_catalog.~) {_literal(name_pattern(args[0])[1])}" if args else \
            " AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'"
        sql = ("SELECT n.nspname AS \"Name\", pg_catalog.pg_get_userbyid(n.nspowner) AS \"Owner\" "
               f"FROM pg_catalog.pg_namespace n WHERE true{cond} ORDER BY 1")
    else:
        cond = f" AND regexp_full_match(schema_name, {_literal(name_pattern(args[0])[1])})" if args else \
            " AND schema_name <> 'ivm'"
        sql = ("SELECT DISTINCT schema_name AS \"Name\" FROM duckdb_schemas() "
               f"WHERE database_name = current_database(){cond} ORDER BY 1")
    _listing(runner, "List of schemas", sql, "schemas", args)


def functions(runner: ShellContext, args: list[str]) -> None:
    """``\\df [PATTERN]``: user-defined functions (DuckDB: macros)."""
    require(args, 0, 1, "\\df [PATTERN]")
    if _postgres(runner):
        cond, _ = _filters(runner, args, "n.nspname", "p.proname", "pg_catalog.pg_function_is_visible(p.oid)")
        sql = ("SELECT n.nspname AS \"Schema\", p.proname AS \"Name\", "
               "pg_catalog.pg_get_function_result(p.oid) AS \"Result data type\", "
               "pg_catalog.pg_get_function_arguments(p.oid) AS \"Argument data types\", "
               "CASE p.prokind WHEN 'a' THEN 'agg' WHEN 'w' THEN 'window' WHEN 'p' THEN 'proc' "
               "ELSE 'func' END AS \"Type\" FROM pg_catalog.pg_proc p "
               "LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
               "WHERE n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema'"
               f"{cond} ORDER BY 1, 2, 4")
    else:
        cond, _ = _filters(runner, args, "schema_name", "function_name")
        sql = ("SELECT schema_name AS \"Schema\", function_name AS \"Name\", "
               "coalesce(return_type, '') AS \"Result data type\", "
               "array_to_string(parameters, ', ') AS \"Argument data types\", "
               "CASE function_type WHEN 'table_macro' THEN 'table macro' ELSE function_type END AS \"Type\" "
               f"FROM duckdb_functions() WHERE NOT internal{cond} ORDER BY 1, 2, 4")
    _title(runner, "List of functions")
    res = runner.execute(sql)
    runner.write(render_result(res.columns or [], res.rows, runner.display))


def databases(runner: ShellContext, args: list[str]) -> None:
    """``\\l``: databases (DuckDB: the attached ones)."""
    require(args, 0, 1, "\\l [PATTERN]")
    if _postgres(runner):
        cond = f" WHERE d.datname OPERATOR(pg_catalog.~) {_literal(name_pattern(args[0])[1])}" if args else ""
        sql = ("SELECT d.datname AS \"Name\", pg_catalog.pg_get_userbyid(d.datdba) AS \"Owner\", "
               "pg_catalog.pg_encoding_to_char(d.encoding) AS \"Encoding\", d.datcollate AS \"Collate\", "
               "d.datctype AS \"Ctype\", pg_catalog.array_to_string(d.datacl, E'\\n') AS \"Access privileges\" "
               f"FROM pg_catalog.pg_database d{cond} ORDER BY 1")
    else:
        cond = f" AND regexp_full_match(database_name, {_literal(name_pattern(args[0])[1])})" if args else ""
        sql = ("SELECT database_name AS \"Name\", coalesce(path, '(in memory)') AS \"Path\", "
               "type AS \"Type\", CASE WHEN readonly THEN 'read only' ELSE 'read/write' END AS \"Access\" "
               f"FROM duckdb_databases() WHERE NOT internal{cond} ORDER BY 1")
    _title(runner, "List of databases")
    res = runner.execute(sql)
    runner.write(render_result(res.columns or [], res.rows, runner.display))


def views(runner: ShellContext, args: list[str]) -> None:
    """``\\dv [NAME]``: incremental views with their kind, rows, class, tables (and lag)."""
    require(args, 0, 1, "\\dv [NAME]")
    session = runner.session
    if hasattr(session, "view_listing"):      # a plain client: the server's own listing
        columns, rows = session.view_listing(*plain_name(args[0])) if args else session.view_listing()
        _title(runner, "List of incremental views")
        runner.write(render_result(columns, rows, runner.display))
        return
    infos = session.info(plain_name(args[0])[0] if args else None)
    columns = ["Name", "Kind", "Rows", "Class", "Tables"]
    rows = [[i.name, i.kind, i.rows, i.query_class, ", ".join(i.tables)] for i in infos]
    if session.dialect == "postgres":
        columns += ["Lag bytes", "Lag seconds", "WAL retained"]
        for r, i in zip(rows, infos):
            r += [i.lag_bytes, None if i.lag_seconds is None else round(i.lag_seconds, 3),
                  i.wal_retained_bytes]
    if any(i.rebuilds for i in infos):  # writes to static tables rebuilt a view (paper 003)
        columns.append("Rebuilds")
        for r, i in zip(rows, infos):
            r.append(i.rebuilds)
    _title(runner, "List of incremental views")
    runner.write(render_result(columns, [tuple(r) for r in rows], runner.display))


def _catalog_filter(session) -> str:
    if session.dialect == "duckdb":
        return "table_schema IN ('main', 'temp') AND table_catalog = current_database()"
    return ("table_schema NOT IN ('information_schema', 'pg_catalog', 'ivm') "
            "AND table_schema NOT LIKE 'pg\\_%'")


def describe(runner: ShellContext, args: list[str]) -> None:
    """``\\d``: every relation; ``\\d NAME``: one table's columns or one view's definition."""
    require(args, 0, 1, "\\d [NAME]")
    session = runner.session
    client = hasattr(session, "view_listing")   # a client of a server: the server's views
    infos = {} if client else {i.name: i for i in session.info()}
    kinds = session.view_kinds() if client else {n: i.kind for n, i in infos.items()}
    if not args:
        res = runner.execute(
            "SELECT table_schema, table_name, table_type FROM information_schema.tables "
            f"WHERE {_catalog_filter(session)} ORDER BY table_name, table_schema")
        rows = {}
        for schema, name, ttype in res.rows:
            kind = "view" if "VIEW" in str(ttype).upper() else "table"
            if name in kinds:
                kind = "materialized incremental view" if kinds[name] == "materialized" else "incremental view"
            elif "TEMP" in str(ttype).upper():
                kind = "temporary table"
            rows.setdefault(name, (schema, name, kind))
        for name in kinds:
            rows.setdefault(name, ("", name, "incremental view"))
        _title(runner, "List of relations")
        runner.write(render_result(["Schema", "Name", "Type"], sorted(rows.values(), key=lambda r: r[1]),
                                   runner.display))
        return
    name, quoted = plain_name(args[0])
    key = resolve(name, infos) if quoted else ascii_lower(name)
    if key in infos:
        i = infos[key]
        what = "Materialized incremental view" if i.kind == "materialized" else "Incremental view"
        _title(runner, f'{what} "{i.name}"')
        runner.write(render_result(["Column", "Type"], list(zip(i.columns, i.types)), runner.display))
        if runner.display.format == "aligned":
            runner.write(f"Kind: {i.kind}\nClass: {i.query_class}\nRows: {i.rows}\nBase tables: {', '.join(i.tables)}\n"
                         f"Definition:\n    {i.definition}\n")
        return
    match = f"table_name = {_literal(name)}" if quoted else f"{sql_fold('table_name')} = {_literal(ascii_lower(name))}"
    res = runner.execute(
        "SELECT table_schema, column_name, data_type, is_nullable, column_default "
        f"FROM information_schema.columns WHERE {_catalog_filter(session)} AND {match} "
        "ORDER BY table_schema, ordinal_position")
    if not res.rows:
        raise ShellError(f"did not find any relation named {args[0]!r}")
    schema = res.rows[0][0]
    view = (name if quoted else resolve(name, kinds)) if client else None
    if view in kinds:                  # a view the server keeps: its columns, then its listing
        _title(runner, f'{"Materialized incremental view" if kinds[view] == "materialized" else "Incremental view"} "{view}"')
        runner.write(render_result(["Column", "Type"], [(c, t) for s, c, t, _, _ in res.rows if s == schema],
                                   runner.display))
        if runner.display.format == "aligned":
            columns, listing = session.view_listing(view, True)
            runner.write("".join(f"{c}: {v}\n" for c, v in zip(columns[1:], listing[0][1:])))
        return
    rows = [(c, t, "" if n == "YES" else "not null", "" if d is None else d) for s, c, t, n, d in res.rows if s == schema]
    _title(runner, f'Table "{schema}.{name}"')
    runner.write(render_result(["Column", "Type", "Nullable", "Default"], rows, runner.display))
