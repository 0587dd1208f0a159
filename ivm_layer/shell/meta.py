"""Backslash commands: ``\\dv``, ``\\d``, ``\\explain``, ``\\watch``, ``\\i``, ``\\timing``, ``\\x``,
``\\q``, ``\\?`` and a few psql habits (``\\conninfo``, ``\\echo``)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import ShellError
from .redact import mask
from .render import render_result

if TYPE_CHECKING:
    from .context import ShellContext


class QuitShell(Exception):
    """``\\q``: leave the shell."""


HELP = r"""General
  \q                     quit (Ctrl-D does too)
  \? [commands]          this help
  \i FILE                run the statements and commands of FILE
  \echo TEXT             print TEXT
  \conninfo              the database this shell is connected to

Incremental views
  \dv [NAME]             list incremental views: kind, rows, class, base tables (lag on PostgreSQL)
  \explain NAME          the view's plan: the join tree (GJT), its class and costs
  \watch NAME [SECONDS]  print the view's changes live (+ inserted, - deleted) until Ctrl-C

Catalog
  \d                     list tables, views and incremental views
  \d NAME                describe a table, view or incremental view

Output
  \timing [on|off]       show how long each statement took
  \x [on|off|auto]       expanded output: one "column | value" line per field

SQL statements end with ';' and may span several lines. Ctrl-C cancels the running
statement (or clears the input line); the shell stays open.
CREATE [OR REPLACE] INCREMENTAL [MATERIALIZED] VIEW v AS SELECT ... defines a view the layer
maintains; SELECT ... FROM v is served from it; DROP VIEW v removes it. Everything else goes
to the database unchanged.
"""


def _on_off(value: str | None, current: bool, what: str) -> bool:
    if value is None:
        return not current
    v = value.lower()
    if v in ("on", "true", "1", "yes"):
        return True
    if v in ("off", "false", "0", "no"):
        return False
    raise ShellError(f"unrecognized value {value!r} for \\{what}: expected on or off")


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _plain_name(name: str) -> tuple[str, bool]:
    """``name`` without surrounding double quotes, and whether it was quoted."""
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"'), True
    return name, False


def _unquote_single(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def _title(runner: ShellContext, title: str) -> None:
    if runner.display.format == "aligned":
        runner.write(title + "\n")


def _require(args: list[str], n_min: int, n_max: int, usage: str) -> None:
    if not n_min <= len(args) <= n_max:
        raise ShellError(f"usage: {usage}")


def cmd_quit(runner: ShellContext, args: list[str]) -> None:
    raise QuitShell


def cmd_help(runner: ShellContext, args: list[str]) -> None:
    runner.write(HELP)


def cmd_echo(runner: ShellContext, args: list[str]) -> None:
    runner.write(" ".join(_unquote_single(a) for a in args) + "\n")


def cmd_conninfo(runner: ShellContext, args: list[str]) -> None:
    s = runner.session
    runner.write(f"Connected to {mask(str(getattr(s, 'url', '?')))} ({s.dialect}).\n")


def cmd_timing(runner: ShellContext, args: list[str]) -> None:
    _require(args, 0, 1, "\\timing [on|off]")
    runner.display.timing = _on_off(args[0] if args else None, runner.display.timing, "timing")
    runner.write(f"Timing is {'on' if runner.display.timing else 'off'}.\n")


def cmd_expanded(runner: ShellContext, args: list[str]) -> None:
    _require(args, 0, 1, "\\x [on|off|auto]")
    if args and args[0].lower() == "auto":
        runner.display.expanded = "auto"
        runner.write("Expanded display is used automatically.\n")
        return
    on = _on_off(args[0] if args else None, runner.display.expanded == "on", "x")
    runner.display.expanded = "on" if on else "off"
    runner.write(f"Expanded display is {'on' if on else 'off'}.\n")


def cmd_views(runner: ShellContext, args: list[str]) -> None:
    _require(args, 0, 1, "\\dv [NAME]")
    session = runner.session
    infos = session.info(_plain_name(args[0])[0] if args else None)
    columns = ["Name", "Kind", "Rows", "Class", "Tables"]
    rows = [[i.name, i.kind, i.rows, i.query_class, ", ".join(i.tables)] for i in infos]
    if session.dialect == "postgres":
        columns += ["Lag bytes", "Lag seconds"]
        for r, i in zip(rows, infos):
            r += [i.lag_bytes, None if i.lag_seconds is None else round(i.lag_seconds, 3)]
    if any(i.rebuilds for i in infos):  # writes to static tables rebuilt a view (paper 003)
        columns.append("Rebuilds")
        for r, i in zip(rows, infos):
            r.append(i.rebuilds)
    _title(runner, "List of incremental views")
    runner.write(render_result(columns, [tuple(r) for r in rows], runner.display))


def cmd_explain(runner: ShellContext, args: list[str]) -> None:
    _require(args, 1, 1, "\\explain NAME")
    runner.write(runner.session.explain(_plain_name(args[0])[0]).rstrip("\n") + "\n")


def cmd_watch(runner: ShellContext, args: list[str]) -> None:
    from .watch import watch

    _require(args, 1, 2, "\\watch NAME [SECONDS]")
    interval = 0.2
    if len(args) == 2:
        try:
            interval = float(args[1])
        except ValueError:
            raise ShellError(f"\\watch: interval {args[1]!r} is not a number of seconds") from None
        if not 0 < interval <= 3600:
            raise ShellError("\\watch: the interval must be between 0 and 3600 seconds")
    watch(runner, _plain_name(args[0])[0], interval)


def cmd_include(runner: ShellContext, args: list[str]) -> None:
    _require(args, 1, 1, "\\i FILE")
    path = _unquote_single(args[0])
    if not runner.run_file(path):
        raise ShellError(f"{path}: stopped at its first error (--on-error-stop) or a cancel")


def _catalog_filter(session) -> str:
    if session.dialect == "duckdb":
        return "table_schema IN ('main', 'temp') AND table_catalog = current_database()"
    return ("table_schema NOT IN ('information_schema', 'pg_catalog', 'ivm') "
            "AND table_schema NOT LIKE 'pg\\_%'")


def cmd_describe(runner: ShellContext, args: list[str]) -> None:
    _require(args, 0, 1, "\\d [NAME]")
    session = runner.session
    views = {i.name: i for i in session.info()}
    if not args:
        res = runner.execute(
            "SELECT table_schema, table_name, table_type FROM information_schema.tables "
            f"WHERE {_catalog_filter(session)} ORDER BY table_name, table_schema")
        rows = {}
        for schema, name, ttype in res.rows:
            kind = "view" if "VIEW" in str(ttype).upper() else "table"
            if name in views:
                kind = "materialized incremental view" if views[name].kind == "materialized" else "incremental view"
            elif "TEMP" in str(ttype).upper():
                kind = "temporary table"
            rows.setdefault(name, (schema, name, kind))
        for name in views:
            rows.setdefault(name, ("", name, "incremental view"))
        _title(runner, "List of relations")
        runner.write(render_result(["Schema", "Name", "Type"], sorted(rows.values(), key=lambda r: r[1]),
                                   runner.display))
        return
    name, quoted = _plain_name(args[0])
    key = name if quoted else name.lower()
    if key in views:
        i = views[key]
        what = "Materialized incremental view" if i.kind == "materialized" else "Incremental view"
        _title(runner, f'{what} "{i.name}"')
        runner.write(render_result(["Column", "Type"], list(zip(i.columns, i.types)), runner.display))
        if runner.display.format == "aligned":
            runner.write(f"Kind: {i.kind}\nClass: {i.query_class}\nRows: {i.rows}\nBase tables: {', '.join(i.tables)}\n"
                         f"Definition:\n    {i.definition}\n")
        return
    match = f"table_name = {_sql_literal(name)}" if quoted else f"lower(table_name) = {_sql_literal(name.lower())}"
    res = runner.execute(
        "SELECT table_schema, column_name, data_type, is_nullable, column_default "
        f"FROM information_schema.columns WHERE {_catalog_filter(session)} AND {match} "
        "ORDER BY table_schema, ordinal_position")
    if not res.rows:
        raise ShellError(f"did not find any relation named {args[0]!r}")
    schema = res.rows[0][0]
    rows = [(c, t, "" if n == "YES" else "not null", "" if d is None else d) for s, c, t, n, d in res.rows if s == schema]
    _title(runner, f'Table "{schema}.{name}"')
    runner.write(render_result(["Column", "Type", "Nullable", "Default"], rows, runner.display))


COMMANDS: dict[str, Callable[[ShellContext, list[str]], None]] = {
    "q": cmd_quit, "quit": cmd_quit, "?": cmd_help, "h": cmd_help, "help": cmd_help,
    "echo": cmd_echo, "conninfo": cmd_conninfo, "timing": cmd_timing, "x": cmd_expanded,
    "dv": cmd_views, "explain": cmd_explain, "watch": cmd_watch, "i": cmd_include,
    "include": cmd_include, "d": cmd_describe,
}


def names() -> list[str]:
    """The meta-command names, for completion."""
    return sorted(COMMANDS)


def run(runner: ShellContext, line: str) -> None:
    """Run one meta-command line (with its leading backslash)."""
    body = line.strip()[1:]
    try:
        parts = shlex.split(body, posix=False)
    except ValueError as e:
        raise ShellError(f"cannot parse \\{body}: {e}") from None
    if not parts:
        raise ShellError("invalid command \\: try \\? for help")
    cmd, args = parts[0], parts[1:]
    cmd = cmd.removesuffix(";")
    handler = COMMANDS.get(cmd.lower() if cmd != "x" else cmd)
    if handler is None:
        raise ShellError(f"invalid command \\{cmd}: try \\? for help")
    args = [a[:-1] if a.endswith(";") and i == len(args) - 1 else a for i, a in enumerate(args)]
    handler(runner, [a for a in args if a])

