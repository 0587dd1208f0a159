"""Tab completion for the REPL: SQL keywords, table / view / column names, meta-commands and
their arguments (view names, table names, file paths).

The names come from a snapshot (:meth:`SQLCompleter.update`) refreshed by the REPL after
statements that may change the catalog, so completing never queries the database.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prompt_toolkit.completion import (
    CompleteEvent,
    Completer,
    Completion,
    PathCompleter,
)
from prompt_toolkit.document import Document

from . import meta

KEYWORDS = sorted({
    "SELECT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "OFFSET", "DISTINCT",
    "AS", "ON", "USING", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "OUTER", "CROSS", "NATURAL",
    "UNION", "ALL", "INTERSECT", "EXCEPT", "WITH", "RECURSIVE", "VALUES", "INSERT", "INTO",
    "UPDATE", "SET", "DELETE", "TRUNCATE", "CREATE", "DROP", "ALTER", "TABLE", "VIEW", "INDEX",
    "SCHEMA", "SEQUENCE", "INCREMENTAL", "MATERIALIZED", "REPLACE", "OR", "AND", "NOT", "NULL",
    "IS", "IN", "EXISTS", "BETWEEN", "LIKE", "ILIKE", "CASE", "WHEN", "THEN", "ELSE", "END",
    "CAST", "ASC", "DESC", "NULLS", "FIRST", "LAST", "BEGIN", "COMMIT", "ROLLBACK",
    "TRANSACTION", "EXPLAIN", "ANALYZE", "DESCRIBE", "SHOW", "PRAGMA", "COPY", "PRIMARY", "KEY",
    "FOREIGN", "REFERENCES", "DEFAULT", "UNIQUE", "CHECK", "CONSTRAINT", "RETURNING", "IF",
    "TEMPORARY", "TEMP", "INTEGER", "INT", "BIGINT", "SMALLINT", "DOUBLE", "REAL", "DECIMAL",
    "NUMERIC", "VARCHAR", "TEXT", "BOOLEAN", "DATE", "TIMESTAMP", "INTERVAL", "TRUE", "FALSE",
    "COUNT", "SUM", "MIN", "MAX", "AVG", "COALESCE"
})

_NAME = re.compile(r"[A-Za-z_][\w$]*$|$")
_QUALIFIED = re.compile(r"([A-Za-z_][\w$]*)\.([\w$]*)$")
_ALIAS = re.compile(r"\b(?:FROM|JOIN|,)\s+([A-Za-z_][\w$]*)(?:\s+(?:AS\s+)?([A-Za-z_][\w$]*))?",
                    re.IGNORECASE)
_VIEW_ARGS = {"dv", "explain", "watch"}
_TABLE_CONTEXT = {"FROM", "JOIN", "INTO", "UPDATE", "TABLE", "VIEW"}  # a table name comes next


class SQLCompleter(Completer):
    """Completes from a snapshot of the catalog; see the module docstring."""

    def __init__(self) -> None:
        self.tables: dict[str, list[str]] = {}
        self.views: list[str] = []
        self._paths = PathCompleter(expanduser=True)

    def update(self, tables: dict[str, list[str]], views: Iterable[str]) -> None:
        """Replace the snapshot: ``{table: [columns]}`` (views included) and the view names."""
        self.tables = {t.lower(): list(cols) for t, cols in tables.items()}
        self.views = sorted(views)

    def get_completions(self, document: Document, complete_event: CompleteEvent):
        text = document.text_before_cursor
        stripped = text.lstrip()
        if stripped.startswith("\\") and "\n" not in stripped:
            yield from self._meta(stripped, complete_event)
            return
        qual = _QUALIFIED.search(text)
        if qual:
            yield from self._columns_of(qual.group(1), qual.group(2), document.text)
            return
        word = _NAME.search(text).group()
        if not word:
            return
        before = text[:len(text) - len(word)].rstrip().rsplit(None, 1)
        tables_only = bool(before) and before[-1].upper() in _TABLE_CONTEXT
        yield from self._words(word, tables_only)

    def _meta(self, stripped: str, event: CompleteEvent):
        parts = stripped.split()
        if len(parts) <= 1 and not stripped.endswith(" "):
            typed = stripped[1:]
            for n in meta.names():
                if n.startswith(typed.lower()):
                    yield Completion("\\" + n, start_position=-len(stripped))
            return
        cmd = parts[0][1:].lower()
        arg = "" if stripped.endswith(" ") else parts[-1]
        if cmd in ("i", "include", "ir", "include_relative", "o", "out", "g"):
            yield from self._paths.get_completions(Document(arg, len(arg)), event)
            return
        if cmd in _VIEW_ARGS:
            names = self.views
        elif cmd in ("d", "dt"):
            names = sorted(self.tables)
        elif cmd in ("timing", "x"):
            names = ["on", "off"] + (["auto"] if cmd == "x" else [])
        else:
            return
        for n in names:
            if n.startswith(arg.lower()):
                yield Completion(n, start_position=-len(arg))

    def _columns_of(self, qualifier: str, typed: str, full_text: str):
        table = qualifier.lower()
        if table not in self.tables:
            for m in _ALIAS.finditer(full_text):
                if m.group(2) and m.group(2).lower() == table:
                    table = m.group(1).lower()
                    break
        for c in self.tables.get(table, []):
            if c.lower().startswith(typed.lower()):
                yield Completion(c, start_position=-len(typed), display_meta=f"column of {table}")

    def _words(self, word: str, tables_only: bool = False):
        low = word.lower()
        seen: set[str] = set()
        for t in sorted(self.tables):
            if t.startswith(low):
                seen.add(t)
                yield Completion(t, start_position=-len(word),
                                 display_meta="incremental view" if t in self.views else "table")
        if tables_only:
            return
        columns = sorted({c for cols in self.tables.values() for c in cols})
        for c in columns:
            if c.lower().startswith(low) and c.lower() not in seen:
                seen.add(c.lower())
                yield Completion(c, start_position=-len(word), display_meta="column")
        upper = word[:1].isupper()
        for k in KEYWORDS:
            if k.lower().startswith(low) and k.lower() not in seen:
                yield Completion(k if upper else k.lower(), start_position=-len(word), display_meta="keyword")
