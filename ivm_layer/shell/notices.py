"""Warnings and notices printed the way psql prints the server's: ``WARNING:  text`` and
``NOTICE:  text`` lines on standard error, never a Python warning with a file path and a
source line.

:func:`install` routes Python ``warnings`` (the layer's ``UserWarning`` s: a view rebuilt from
a fresh snapshot, a replication slot lagging, a catalog row that failed its checks), the
``ivm_layer``/``ivm`` loggers' warnings, and the server notices of a psycopg connection
(:meth:`Notices.watch_connection`) through one printer that prints each distinct text once.

A PostgreSQL session also runs its own bookkeeping on the user's connection (the TEMP tables
that serve views); the notices those statements cause (``schema "pg_temp" does not exist,
skipping``) are not the user's and are left out (:data:`BOOKKEEPING`).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable
from typing import IO

from .redact import mask

#: notices caused by a PostgreSQL session's own statements on the user's connection
BOOKKEEPING = re.compile(r'(?:schema "pg_temp"|table "_ivm_\w+") does not exist, skipping')


class Notices:
    """The printer; see the module docstring."""

    def __init__(self, err: IO[str]):
        self.err = err
        self.before: Callable[[], None] | None = None   # flushes the screen output first
        self._seen: set[str] = set()
        self._watched: object | None = None

    def emit(self, severity: str, text: str) -> None:
        text = mask(" ".join(str(text).split()) if "\n" not in str(text) else str(text).rstrip())
        key = f"{severity}:{text}"
        if key in self._seen:
            return
        self._seen.add(key)
        if self.before is not None:
            self.before()
        self.err.write(f"{severity}:  {text}\n")
        self.err.flush()

    def _showwarning(self, message, category, filename, lineno, file=None, line=None) -> None:
        self.emit("WARNING", str(message))

    def install(self) -> None:
        """Take over ``warnings.showwarning`` and the layer's loggers for this process."""
        warnings.showwarning = self._showwarning
        handler = _Handler(self)
        for name in ("ivm_layer", "ivm"):
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            logger.propagate = False
            if logger.level == logging.NOTSET:
                logger.setLevel(logging.WARNING)

    def watch_connection(self, conn) -> None:
        """Print the server notices of psycopg connection ``conn`` (once per connection)."""
        if conn is None or conn is self._watched:
            return
        self._watched = conn
        def handler(diag) -> None:
            text = diag.message_primary or ""
            if diag.severity_nonlocalized == "NOTICE" and BOOKKEEPING.fullmatch(text):
                return
            self.emit(diag.severity or "NOTICE", text)

        conn.add_notice_handler(handler)


class _Handler(logging.Handler):
    def __init__(self, notices: Notices):
        super().__init__(logging.WARNING)
        self.notices = notices

    def emit(self, record: logging.LogRecord) -> None:
        severity = "WARNING" if record.levelno < logging.ERROR else "ERROR"
        self.notices.emit(severity, record.getMessage())
