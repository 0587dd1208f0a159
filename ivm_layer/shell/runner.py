"""Run shell input through a session: statements (cancellable with Ctrl-C), meta-commands,
results and errors, each error with the position of its statement.

An input (a REPL entry, a ``-c`` string, a file) is read by a :class:`~.script.Scanner`, one
item at a time, so a meta-command runs before the text after it is read. The query buffer
(a statement without its ``;`` yet) survives meta-commands, as in psql; at the end of a
script it is run, at the end of a REPL entry it is handed back to the prompt
(:attr:`Runner.pending`).

Each statement runs in a worker thread while the main thread waits, so ``Ctrl-C`` (a
``KeyboardInterrupt`` in the main thread) never lands in the middle of the session's own
bookkeeping: it sends the database a cancel request (DuckDB ``interrupt()``, libpq cancel)
and the statement fails with the database's "interrupted" error, leaving the session and
its views consistent.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from ..errors import IVMError
from . import meta
from .interrupt import call_interruptibly, cancel_statement
from .notices import Notices
from .output import Target
from .redact import mask
from .render import (
    Display,
    command_tag,
    is_query,
    leading_words,
    render_plan,
    render_result,
)
from .script import Item, ScanError, Scanner
from .variables import Variables

# Statements after which table names may have changed (completion is refreshed).
_SCHEMA_WORDS = {"CREATE", "DROP", "ALTER", "ATTACH", "DETACH", "IMPORT", "USE", "ROLLBACK", "ABORT"}


def database_errors() -> tuple[type[BaseException], ...]:
    """The exception types that are a statement's failure, not the shell's: the layer's and
    the drivers' that are loaded (a DuckDB shell never loads psycopg, a plain client of a
    server never loads duckdb)."""
    errors: list[type[BaseException]] = [IVMError]
    for name in ("duckdb", "psycopg"):
        module = sys.modules.get(name)
        if module is not None:
            errors.append(module.Error)
    return tuple(errors)


@dataclass
class Result:
    """What one statement returned."""

    columns: list[str] | None   # None: not a row-returning statement
    rows: list[tuple]
    rowcount: int
    elapsed: float              # seconds
    interrupted: bool = False   # Ctrl-C came while it ran, too late to cancel it


class Runner:
    """Runs inputs through one session and prints results to ``out`` (``\\o`` may redirect
    them), messages to the console, errors to ``err``. Remembers whether the last statement
    failed and how many did, for the exit status."""

    def __init__(self, session, display: Display, out: IO[str] | None = None,
                 err: IO[str] | None = None, interactive: bool = False, on_error_stop: bool = False,
                 variables: Variables | None = None, mode: str = "", database: str = ""):
        self.session = session
        self.display = display
        self.console = out or sys.stdout
        self.out = self.console
        self.err = err or sys.stderr
        self.interactive = interactive
        self.variables = variables or Variables()
        self.variables.on_change = self._variable_changed
        if on_error_stop:
            self.variables.set("ON_ERROR_STOP", "on")
        self.mode = mode
        self.database = database
        self.last_failed = False
        self.errors = 0
        self.cancelled = False          # the last failure was a Ctrl-C cancel
        self.last_query: str | None = None
        self.pending = ""               # the query buffer an interactive entry left
        self.on_schema_change: Callable[[], None] | None = None
        self.db_errors = database_errors()
        self.notices = Notices(self.err)
        self.notices.before = self.flush
        self.scanner: Scanner | None = None
        self._output: Target | None = None
        self._held: list[str] = []
        self._files: list[str] = []     # the files being run (\ir resolves against the last)

    @property
    def on_error_stop(self) -> bool:
        return self.variables.flag("ON_ERROR_STOP")

    def _variable_changed(self, name: str, value: str | None) -> None:
        if name == "QUIET":
            self.display.quiet = self.variables.flag("QUIET")

    # -- output -------------------------------------------------------------------------
    # Screen output is held and written in one piece before the next statement runs, at the
    # end of each input, before an error and before anything waits: one system call per
    # statement, not one per line.

    def write(self, text: str) -> None:
        """Query output (results, command tags): the screen, or where ``\\o`` sends it."""
        if self.out is self.console:
            self._held.append(text)
        else:
            self.out.write(text)

    def say(self, text: str) -> None:
        """Messages of meta-commands and timing: always the screen."""
        self._held.append(text)

    def flush(self) -> None:
        """Write what is held to the screen now (before anything waits or prints elsewhere)."""
        if self._held:
            self.console.write("".join(self._held))
            self._held.clear()
        self.console.flush()
        if self.out is not self.console:
            self.out.flush()

    def error(self, message: str, where: str = "") -> None:
        self.flush()
        self.err.write(mask(f"{where}ERROR:  {message}".rstrip()) + "\n")
        self.err.flush()

    def set_output(self, spec: str | None) -> None:
        """``\\o [FILE | |COMMAND]``: send query output there; None: back to the screen."""
        self.flush()
        target = Target(spec) if spec else None
        if self._output is not None:
            self._output.close()
        self._output = target
        self.out = target.stream if target is not None else self.console

    def close(self) -> None:
        self.set_output(None)
        self.flush()

    # -- the query buffer ---------------------------------------------------------------
    def scanner_pending(self) -> str:
        return self.scanner.pending() if self.scanner is not None else ""

    def scanner_take(self) -> str:
        return self.scanner.take() if self.scanner is not None else ""

    def read_data_lines(self) -> list[str] | None:
        """The data lines after the current command up to ``\\.`` when the input is a script
        or a pasted block; None when they must be read from the terminal."""
        if self.scanner is None or (self.interactive and not self._files and
                                    self.scanner.pos >= len(self.scanner.text.rstrip())):
            return None
        return self.scanner.read_data_lines()

    # -- inputs -------------------------------------------------------------------------
    def run_source(self, text: str, source: str | None, stop_at_error: bool = False,
                   first_line: int = 1) -> bool:
        """Run every statement and meta-command of ``text``; ``source`` names it in error
        positions (None: typed at the prompt). Returns False when it stopped at an error
        (``stop_at_error``, ``ON_ERROR_STOP``) or a cancel (scripts); raises
        :class:`meta.QuitShell` on ``\\q``. A REPL entry (``source`` None, interactive)
        leaves an unfinished statement in :attr:`pending`; anywhere else it runs. ``first_line``:
        the number of the input's first line in error positions (a paste run in parts)."""
        scanner = Scanner(text, self.variables.get, first_line)
        outer, self.scanner = self.scanner, scanner
        keep = source is None and self.interactive
        try:
            return self._run_scanner(scanner, source, stop_at_error, keep)
        finally:
            self.scanner = outer
            self.flush()

    def _run_scanner(self, scanner: Scanner, source: str | None, stop_at_error: bool, keep: bool) -> bool:
        """The items of ``scanner`` in order; see :meth:`run_source`."""
        try:
            for item in scanner.items():
                if not self._step(item, source, stop_at_error):
                    return False
        except ScanError as e:
            self.error(str(e), f"ivm:{source}: " if source else "")
            self.last_failed = True
            return not (stop_at_error or self.on_error_stop)
        rest = scanner.pending()
        self.pending = rest if keep else ""
        if rest and not keep:
            line, col = scanner.position(scanner.pending_start())
            scanner.take()
            return self._step(Item("sql", rest, line, col, scanner.count + 1), source, stop_at_error)
        return True

    def _step(self, item: Item, source: str | None, stop_at_error: bool) -> bool:
        """Run one item; False when the input must stop there: an error under
        ``stop_at_error`` or ``ON_ERROR_STOP`` (not at the prompt, as psql), or a cancelled
        statement of a script."""
        if self.run_item(item, source):
            return True
        typed = self.interactive and source is None
        stop = stop_at_error or (self.on_error_stop and not typed)
        return not (stop or (self.cancelled and not self.interactive))

    def run_file(self, path: str) -> bool:
        """``\\i`` / ``-f``: run a file (``-`` is standard input)."""
        if path == "-":
            return self.run_source(sys.stdin.read(), "<stdin>")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise meta.ShellError(f"{path}: {e.strerror or e}") from None
        if len(self._files) > 16:
            raise meta.ShellError(f"{path}: \\i nested more than 16 levels deep")
        self._files.append(path)
        try:
            return self.run_source(text, path)
        finally:
            self._files.pop()

    def resolve_path(self, path: str, relative: bool) -> str:
        """``\\ir``: a relative path is taken from the directory of the file being run."""
        path = os.path.expanduser(path)
        if relative and self._files and not os.path.isabs(path):
            return os.path.join(os.path.dirname(self._files[-1]), path)
        return path

    def run_item(self, item: Item, source: str | None) -> bool:
        """Run one statement or meta-command; print its result or its error. True if it worked."""
        self.cancelled = False
        try:
            if item.kind == "meta":
                meta.run(self, item.text)
            else:
                self.run_query(item.text)
        except meta.QuitShell:
            raise
        except (meta.ShellError, *self.db_errors) as e:
            self._failed(e, item, source)
            return False
        self.last_failed = False
        return True

    def _failed(self, exc: BaseException, item: Item, source: str | None) -> None:
        self.last_failed = True
        self.errors += 1
        self.cancelled = bool(getattr(exc, "ivm_interrupted", False))
        if self.cancelled:
            self.flush()
            self.err.write("Cancel request sent\n")
        message = str(exc).strip() or type(exc).__name__
        self.variables.quiet_set("ERROR", "true")
        self.variables.quiet_set("LAST_ERROR_MESSAGE", message)
        self.variables.quiet_set("SQLSTATE", getattr(exc, "sqlstate", None) or "XX000")
        where = ""
        if source is not None:
            col = f":{item.column}" if item.column > 1 else ""
            where = f"ivm:{source}:{item.line}{col}: "
        elif item.number > 1 or (self.scanner is not None and self.scanner.text[self.scanner.pos:].strip()):
            where = f"statement {item.number} (line {item.line}, column {item.column}): "
        self.error(message, where)

    # -- statements ---------------------------------------------------------------------
    def execute(self, sql: str) -> Result:
        """Run one statement through the session, cancellable; fetch its rows."""
        if self.session.dialect == "postgres":
            self.notices.watch_connection(self.session.connection)

        if self._held:      # what the statements before printed shows before this one runs
            self.flush()

        def work() -> Result:
            t0 = time.perf_counter()
            cur = self.session.execute(sql)
            desc = cur.description
            rows = cur.fetchall() if desc is not None else []
            cols = [getattr(d, "name", None) or d[0] for d in desc] if desc is not None else None
            return Result(cols, rows, cur.rowcount, time.perf_counter() - t0)

        result, interrupted = call_interruptibly(work, lambda: cancel_statement(self.session))
        result.interrupted = interrupted
        return result

    def run_query(self, sql: str, target: str | None = None) -> None:
        """Run a statement and print its result (to ``target``: ``\\g FILE``)."""
        self.last_query = sql
        res = self.execute(sql)
        self.variables.quiet_set("ERROR", "false")
        self.variables.quiet_set("SQLSTATE", "00000")
        out = Target(target) if target else None
        try:
            self.show(res, sql, out.stream if out is not None else None)
        finally:
            if out is not None:
                out.close()
        words = leading_words(sql, 1)
        if self.on_schema_change is not None and words and words[0] in _SCHEMA_WORDS:
            self.on_schema_change()
        if res.interrupted:     # the statement ended before the cancel reached it: stop here
            raise KeyboardInterrupt

    def show(self, res: Result, sql: str, stream: IO[str] | None = None) -> None:
        """Print a statement's result: rows, an EXPLAIN plan as lines, or its command tag."""
        write = stream.write if stream is not None else self.write
        is_count = (res.columns == ["Count"] and not is_query(sql))  # DuckDB's DML/DDL result
        if res.columns is not None and not is_count:
            self.variables.quiet_set("ROW_COUNT", str(len(res.rows)))
            if (res.columns == ["explain_key", "explain_value"] and self.display.format == "aligned"
                    and self.display.expanded != "on"):
                write(render_plan(res.rows))       # DuckDB's plan, drawn as lines like its CLI
            else:
                write(render_result(res.columns, res.rows, self.display))
        else:
            rowcount = res.rows[0][0] if is_count and len(res.rows) == 1 else res.rowcount
            self.variables.quiet_set("ROW_COUNT", str(max(rowcount, 0)))
            if not self.display.quiet and self.display.format == "aligned":
                tag = command_tag(sql, rowcount)
                if tag:
                    write(tag + "\n")
        if self.display.timing and not self.display.quiet:
            self.say(f"Time: {res.elapsed * 1000:.3f} ms\n")
