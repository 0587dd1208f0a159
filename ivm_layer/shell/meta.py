"""Backslash commands: the dispatch table, psql's argument rules and the general commands
(``\\q``, ``\\?``, ``\\echo``, ``\\set``, ``\\timing``, ``\\x``, ``\\i``, ``\\o``, ``\\g``,
``\\p``, ``\\r``, ``\\conninfo``, ``\\explain``, ``\\watch``). The catalog listings (``\\d``,
``\\dt``, ``\\dv``, …) are in :mod:`.catalog`, ``\\copy`` in :mod:`.copyio`, ``\\watch`` in
:mod:`.watch`.

Arguments follow psql: separated by blanks; ``'…'`` quotes one (``''`` is a quote, ``\\n``
``\\t`` escapes), ``"…"`` is an identifier kept with its quotes, ``:name`` / ``:'name'`` /
``:"name"`` are variables.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import ShellError
from .metaargs import plain_name, require
from .redact import mask

if TYPE_CHECKING:
    from .context import ShellContext


class QuitShell(Exception):
    """``\\q``: leave the shell."""


HELP = r"""General
  \q                     quit (Ctrl-D does too)
  \? [commands]          this help
  \conninfo              the database this shell is connected to
  \timing [on|off]       show how long each statement took
  \! COMMAND             run COMMAND in the operating system's shell

Query buffer (the statement typed so far, before its ';')
  \g [FILE]              run the query buffer (or the last query); FILE or |COMMAND takes the result
  \watch [SECONDS]       run the query buffer (or the last query) every SECONDS (2) until Ctrl-C
  \p                     print the query buffer;  \r  clear it

Incremental views
  \dv [NAME]             list incremental views: kind, rows, class, base tables (lag on PostgreSQL)
  \explain NAME          the view's plan: the join tree (GJT), its class and costs
  \watch NAME [SECONDS]  print the view's changes live (+ inserted, - deleted) until Ctrl-C

Catalog (PATTERN: psql's, e.g. t*, public.*, "Mixed")
  \d [NAME]              list tables, views and incremental views, or describe one
  \dt [PATTERN]          list tables;  \dn [PATTERN]  schemas;  \df [PATTERN]  functions
  \l                     list databases

Input/output
  \i FILE  \ir FILE      run the statements and commands of FILE (\ir: relative to this file)
  \o [FILE | |COMMAND]   send query results to FILE or COMMAND; \o alone: back to the screen
  \copy TABLE|(QUERY) FROM|TO 'FILE'|STDIN|STDOUT [WITH (OPTIONS)]   copy data, client side
  \echo TEXT  \qecho TEXT  print TEXT (\qecho: where \o sends results)

Variables
  \set [NAME [VALUE]]    set a variable (no arguments: list them); :NAME, :'NAME', :"NAME" in SQL
  \unset NAME            remove a variable; ON_ERROR_STOP stops scripts at their first error

Output
  \x [on|off|auto]       expanded output: one "column | value" line per field

SQL statements end with ';' and may span several lines; a meta-command typed before the ';'
leaves the statement in the query buffer. Ctrl-C cancels the running statement (or clears the
input line); the shell stays open.
CREATE [OR REPLACE] INCREMENTAL [MATERIALIZED] VIEW v AS SELECT ... defines a view the layer
maintains; SELECT ... FROM v is served from it; DROP VIEW v removes it. Everything else goes
to the database unchanged.
"""

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "r": "\r", "f": "\f"}
_VAR = re.compile(r""":(?:'([A-Za-z0-9_]+)'|"([A-Za-z0-9_]+)"|([A-Za-z0-9_]+))""")


def split_args(raw: str, lookup: Callable[[str], str | None]) -> list[str]:
    """psql's meta-command arguments (see the module docstring)."""
    args: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        while i < n and raw[i].isspace():
            i += 1
        if i >= n:
            break
        piece: list[str] = []
        while i < n and not raw[i].isspace():
            c = raw[i]
            if c == "'":
                i = _single_quoted(raw, i + 1, piece)
            elif c == '"':
                end = i + 1
                while end < n and not (raw[end] == '"' and not raw.startswith('""', end)):
                    end += 2 if raw.startswith('""', end) else 1
                piece.append(raw[i:end + 1])
                i = end + 1
            elif c == "`":
                raise ShellError("backquoted shell commands in arguments are not supported")
            elif c == ":" and (m := _VAR.match(raw, i)) and lookup(m.group(1) or m.group(2) or m.group(3)) is not None:
                name = m.group(1) or m.group(2) or m.group(3)
                value = lookup(name)
                if m.group(1):
                    piece.append("'" + value.replace("'", "''") + "'")
                elif m.group(2):
                    piece.append('"' + value.replace('"', '""') + '"')
                else:
                    piece.append(value)
                i = m.end()
            else:
                piece.append(c)
                i += 1
        args.append("".join(piece))
    return args


def _single_quoted(raw: str, i: int, out: list[str]) -> int:
    n = len(raw)
    while i < n:
        c = raw[i]
        if c == "'":
            if raw.startswith("''", i):
                out.append("'")
                i += 2
                continue
            return i + 1
        if c == "\\" and i + 1 < n:
            nxt = raw[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    raise ShellError("unterminated quoted string in a meta-command")


def on_off(value: str | None, current: bool, what: str) -> bool:
    if value is None:
        return not current
    v = value.lower()
    if v in ("on", "true", "1", "yes"):
        return True
    if v in ("off", "false", "0", "no"):
        return False
    raise ShellError(f"unrecognized value {value!r} for \\{what}: expected on or off")


# -- general commands -------------------------------------------------------------------
def cmd_quit(runner: ShellContext, args: list[str]) -> None:
    raise QuitShell


def cmd_help(runner: ShellContext, args: list[str]) -> None:
    runner.say(HELP)


def cmd_echo(runner: ShellContext, args: list[str]) -> None:
    end = "\n"
    if args and args[0] == "-n":
        args, end = args[1:], ""
    runner.say(" ".join(args) + end)


def cmd_qecho(runner: ShellContext, args: list[str]) -> None:
    end = "\n"
    if args and args[0] == "-n":
        args, end = args[1:], ""
    runner.write(" ".join(args) + end)


def cmd_conninfo(runner: ShellContext, args: list[str]) -> None:
    runner.say(conninfo_text(runner) + "\n")


def cmd_timing(runner: ShellContext, args: list[str]) -> None:
    require(args, 0, 1, "\\timing [on|off]")
    runner.display.timing = on_off(args[0] if args else None, runner.display.timing, "timing")
    runner.say(f"Timing is {'on' if runner.display.timing else 'off'}.\n")


def cmd_expanded(runner: ShellContext, args: list[str]) -> None:
    require(args, 0, 1, "\\x [on|off|auto]")
    if args and args[0].lower() == "auto":
        runner.display.expanded = "auto"
        runner.say("Expanded display is used automatically.\n")
        return
    on = on_off(args[0] if args else None, runner.display.expanded == "on", "x")
    runner.display.expanded = "on" if on else "off"
    runner.say(f"Expanded display is {'on' if on else 'off'}.\n")


def cmd_set(runner: ShellContext, args: list[str]) -> None:
    if not args:
        runner.say("".join(f"{k} = '{v}'\n" for k, v in runner.variables.items()))
        return
    runner.variables.set(args[0], "".join(args[1:]))


def cmd_unset(runner: ShellContext, args: list[str]) -> None:
    require(args, 1, 1, "\\unset NAME")
    runner.variables.unset(args[0])


def cmd_include(runner: ShellContext, args: list[str], relative: bool = False) -> None:
    require(args, 1, 1, "\\i FILE")
    path = runner.resolve_path(args[0], relative)
    if not runner.run_file(path):
        raise ShellError(f"{path}: stopped at its first error (ON_ERROR_STOP) or a cancel")


def cmd_include_relative(runner: ShellContext, args: list[str]) -> None:
    cmd_include(runner, args, relative=True)


def cmd_output(runner: ShellContext, args: list[str]) -> None:
    runner.set_output(" ".join(args) if args else None)


def cmd_go(runner: ShellContext, args: list[str]) -> None:
    query = runner.scanner_take() or runner.last_query
    if not query:
        return  # psql: nothing to send, nothing said
    runner.run_query(query, " ".join(args) if args else None)


def cmd_print(runner: ShellContext, args: list[str]) -> None:
    text = runner.scanner_pending() or runner.last_query
    runner.say((text + "\n") if text else "Query buffer is empty.\n")


def cmd_reset(runner: ShellContext, args: list[str]) -> None:
    runner.scanner_take()
    runner.say("Query buffer reset (cleared).\n")


def cmd_explain(runner: ShellContext, args: list[str]) -> None:
    require(args, 1, 1, "\\explain NAME")
    runner.write(runner.session.explain(plain_name(args[0])[0]).rstrip("\n") + "\n")


def cmd_watch(runner: ShellContext, args: list[str]) -> None:
    from . import watch

    watch.command(runner, args)


def cmd_shell(runner: ShellContext, args: list[str]) -> None:
    import subprocess

    line = " ".join(args).strip()
    runner.flush()
    subprocess.run(line or "${SHELL:-/bin/sh}", shell=True, check=False)


def cmd_copy(runner: ShellContext, args: list[str]) -> None:
    from . import copyio

    copyio.command(runner, " ".join(args))


def _catalog(name: str) -> Callable[[ShellContext, list[str]], None]:
    def run(runner: ShellContext, args: list[str]) -> None:
        from . import catalog

        getattr(catalog, name)(runner, args)

    return run


COMMANDS: dict[str, Callable[[ShellContext, list[str]], None]] = {
    "q": cmd_quit, "quit": cmd_quit, "?": cmd_help, "h": cmd_help, "help": cmd_help,
    "echo": cmd_echo, "qecho": cmd_qecho, "conninfo": cmd_conninfo, "timing": cmd_timing,
    "x": cmd_expanded, "set": cmd_set, "unset": cmd_unset, "i": cmd_include, "include": cmd_include,
    "ir": cmd_include_relative, "include_relative": cmd_include_relative, "o": cmd_output,
    "out": cmd_output, "g": cmd_go, "p": cmd_print, "print": cmd_print, "r": cmd_reset,
    "reset": cmd_reset, "explain": cmd_explain, "watch": cmd_watch, "!": cmd_shell,
    "copy": cmd_copy, "d": _catalog("describe"), "dv": _catalog("views"), "dt": _catalog("tables"),
    "dn": _catalog("schemas"), "df": _catalog("functions"), "l": _catalog("databases"),
    "list": _catalog("databases"),
}
_RAW = {"copy", "!"}           # the rest of the line is one argument, taken as it is


def names() -> list[str]:
    """The meta-command names, for completion."""
    return sorted(COMMANDS)


def run(runner: ShellContext, line: str) -> None:
    """Run one meta-command line (with its leading backslash)."""
    body = line.strip()[1:]
    m = re.match(r"[^\s\\]*", body)
    cmd = m.group().removesuffix(";") if m else ""
    if not cmd:
        raise ShellError("invalid command \\: try \\? for help")
    rest = body[m.end():]
    key = cmd if cmd in COMMANDS else cmd.lower()
    handler = COMMANDS.get(key)
    if handler is None:
        if cmd.endswith("+") and cmd[:-1] in COMMANDS and cmd[:-1] in ("d", "dt", "dv", "dn", "df", "l"):
            handler = COMMANDS[cmd[:-1]]      # psql's "+" (more detail): the same listing here
        else:
            raise ShellError(f"invalid command \\{cmd}: try \\? for help")
    if key in _RAW:
        args = [rest.strip()] if rest.strip() else []
    else:
        args = [a for a in split_args(rest, runner.variables.get) if a]
    handler(runner, args)


def conninfo_text(runner: ShellContext) -> str:
    """psql's ``\\conninfo`` sentence for the runner's session, then how the shell works
    with it (password-free)."""
    session, mode = runner.session, runner.mode
    url = mask(str(getattr(session, "url", "?")))
    if session.dialect == "duckdb":
        where = "in memory" if url in ("duckdb://", ":memory:", "duckdb:///:memory:") else f"in {url}"
        return f"You are connected to DuckDB database \"{runner.database}\" {where} ({mode})."
    info = session.connection.info
    host = info.host if not info.host.startswith("/") else None
    place = f'on host "{host}" at port "{info.port}"' if host else \
        f'via socket in "{info.host}" at port "{info.port}"'
    return (f'You are connected to database "{info.dbname}" as user "{info.user}" {place}.\n'
            f"URL: {url} ({mode}).")
