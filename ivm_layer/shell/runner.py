"""Run shell input through a session: statements (cancellable with Ctrl-C), meta-commands,
results and errors, each error with the position of its statement.

Each statement runs in a worker thread while the main thread waits, so ``Ctrl-C`` (a
``KeyboardInterrupt`` in the main thread) never lands in the middle of the session's own
bookkeeping: it sends the database a cancel request (DuckDB ``interrupt()``, libpq cancel)
and the statement fails with the database's "interrupted" error, leaving the session and
its views consistent.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from ..errors import IVMError
from . import meta
from .interrupt import call_interruptibly, cancel_statement
from .redact import mask
from .render import Display, command_tag, is_query, leading_words, render_result
from .script import Item, parse_script

# Statements after which table names may have changed (completion is refreshed).
_SCHEMA_WORDS = {"CREATE", "DROP", "ALTER", "ATTACH", "DETACH", "IMPORT", "USE", "ROLLBACK", "ABORT"}


def database_errors() -> tuple[type[BaseException], ...]:
    """The exception types that are a statement's failure, not the shell's: the layer's (the
    sessions translate the drivers' errors), and the drivers' own for what the shell runs
    directly on a connection (psycopg only if a PostgreSQL session loaded it)."""
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


class Runner:
    """Runs inputs (a REPL entry, a ``-c`` string, a file) through one session and prints to
    ``out``/``err``. Remembers whether the last statement failed, for the exit status."""

    def __init__(self, session, display: Display, out: IO[str] | None = None,
                 err: IO[str] | None = None, interactive: bool = False, on_error_stop: bool = False):
        self.session = session
        self.display = display
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.interactive = interactive
        self.on_error_stop = on_error_stop  # scripts (and files they include) stop at an error
        self.last_failed = False
        self.errors = 0
        self.cancelled = False          # the last failure was a Ctrl-C cancel
        self.on_schema_change: Callable[[], None] | None = None
        self.db_errors = database_errors()
        self._depth = 0

    # -- output -------------------------------------------------------------------------
    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def error(self, message: str, where: str = "") -> None:
        self.err.write(mask(f"{where}ERROR:  {message}".rstrip()) + "\n")
        self.err.flush()

    # -- inputs -------------------------------------------------------------------------
    def run_source(self, text: str, source: str | None) -> bool:
        """Run every statement and meta-command of ``text``; ``source`` names it in error
        positions (None: typed at the prompt). Returns False when it stopped at an error
        (``on_error_stop``) or a cancel (scripts); raises :class:`meta.QuitShell` on ``\\q``."""
        items = parse_script(text, self.session.dialect)
        for item in items:
            ok = self.run_item(item, source, multi=len(items) > 1)
            if not ok and self.on_error_stop:
                return False
            if not ok and self.cancelled and not self.interactive:
                return False  # Ctrl-C stops a script
        return True

    def run_file(self, path: str) -> bool:
        """``\\i`` / ``-f``: run a file (``-`` is standard input)."""
        if path == "-":
            return self.run_source(sys.stdin.read(), "<stdin>")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise meta.ShellError(f"{path}: {e.strerror or e}") from None
        if self._depth > 16:
            raise meta.ShellError(f"{path}: \\i nested more than 16 levels deep")
        self._depth += 1
        try:
            return self.run_source(text, path)
        finally:
            self._depth -= 1

    def run_item(self, item: Item, source: str | None, multi: bool = False) -> bool:
        """Run one statement or meta-command; print its result or its error. True if it worked."""
        self.cancelled = False
        try:
            if item.kind == "meta":
                meta.run(self, item.text)
            else:
                self._statement(item.text)
        except meta.QuitShell:
            raise
        except meta.ShellError as e:
            self._failed(e, item, source, multi)
            return False
        except self.db_errors as e:
            self._failed(e, item, source, multi)
            return False
        self.last_failed = False
        return True

    def _failed(self, exc: BaseException, item: Item, source: str | None, multi: bool) -> None:
        self.last_failed = True
        self.errors += 1
        self.cancelled = bool(getattr(exc, "ivm_interrupted", False))
        if self.cancelled:
            self.err.write("Cancel request sent\n")
        where = ""
        if source is not None:
            col = f":{item.column}" if item.column > 1 else ""
            where = f"ivm:{source}:{item.line}{col}: "
        elif multi:
            where = f"statement {item.number} (line {item.line}, column {item.column}): "
        self.error(str(exc).strip() or type(exc).__name__, where)

    # -- statements ---------------------------------------------------------------------
    def execute(self, sql: str) -> Result:
        """Run one statement through the session, cancellable; fetch its rows."""
        def work() -> Result:
            t0 = time.perf_counter()
            cur = self.session.execute(sql)
            desc = cur.description
            rows = cur.fetchall() if desc is not None else []
            cols = [getattr(d, "name", None) or d[0] for d in desc] if desc is not None else None
            return Result(cols, rows, cur.rowcount, time.perf_counter() - t0)

        result, _ = call_interruptibly(work, lambda: cancel_statement(self.session))
        return result

    def _statement(self, sql: str) -> None:
        res = self.execute(sql)
        is_count = (res.columns == ["Count"] and not is_query(sql))  # DuckDB's DML/DDL result
        if res.columns is not None and not is_count:
            self.write(render_result(res.columns, res.rows, self.display))
        elif not self.display.quiet and self.display.format == "aligned":
            rowcount = res.rows[0][0] if is_count and len(res.rows) == 1 else res.rowcount
            tag = command_tag(sql, rowcount)
            if tag:
                self.write(tag + "\n")
        if self.display.timing and not self.display.quiet:
            self.write(f"Time: {res.elapsed * 1000:.3f} ms\n")
        words = leading_words(sql, 1)
        if self.on_schema_change is not None and words and words[0] in _SCHEMA_WORDS:
            self.on_schema_change()
