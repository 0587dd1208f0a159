"""Cheap statement routing: a lexical classifier of the statement head.

Every statement a session receives is routed here before anything else, so the routing
costs O(length of the statement head), not a parse: the leading keywords and, for writes,
the target table are read with a few regular expressions. Only incremental-view DDL,
``DROP`` and writes to tables that an incremental view reads are ever parsed (by the
session, not here), and never a ``VALUES`` list. Text this router does not understand is
routed as ``other``/``unknown_write`` and goes to the database untouched, so deeply nested
or malformed SQL gets the database's own error.

Kinds (``Route.kind``):

===============  ==================================================================
``begin`` …      ``begin``, ``commit``, ``rollback``: transaction control
``create_view``  ``CREATE [OR REPLACE] INCREMENTAL [MATERIALIZED] VIEW``
``drop``         ``DROP …`` (the session parses it: it is short); ``DROP SCHEMA name``
                 has ``target`` and flag ``schema``
``alter``        ``ALTER TABLE|VIEW name …`` (``target``; flag ``table`` or ``view``)
``create_table`` ``CREATE [OR REPLACE] [TEMP] TABLE name`` (``target``, flag ``or_replace``)
``insert``       ``INSERT [OR REPLACE|OR IGNORE] INTO name`` (flags ``upsert``, ``returning``,
                 ``values`` for ``INSERT INTO name [(cols)] VALUES …``)
``update``       ``UPDATE name`` (flag ``returning``)
``delete``       ``DELETE FROM name`` (flag ``returning``)
``truncate``     ``TRUNCATE [TABLE] name``
``copy_from``    ``COPY name [(cols)] FROM …`` (``columns`` is the column-list text)
``merge``        ``MERGE INTO name``
``read``         queries and other statements that change no table data
``unknown_write`` may write any table (``EXECUTE``, ``CALL``, ``IMPORT``, a ``WITH`` that
                 writes, ``EXPLAIN ANALYZE`` of a write, anything unrecognised)
``other``        changes no table data (``SET``, ``PRAGMA``, ``CREATE INDEX``, ``ATTACH`` …)
===============  ==================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..identifiers import IDENT
from ..sql.sqltext import skip_literal, unquote

_SKIP = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.DOTALL)
_IDENT = IDENT
_NAME = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?(?:\s*\.\s*({_IDENT}))?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)
_DO_UPDATE = re.compile(r"\bON\s+CONFLICT\b.*\bDO\s+UPDATE\b", re.IGNORECASE | re.DOTALL)
_WRITE_WORD = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|COPY)\b", re.IGNORECASE)

_READ_HEADS = {"SELECT", "FROM", "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC", "SUMMARIZE",
               "PIVOT", "UNPIVOT", "PIVOT_WIDER", "PIVOT_LONGER"}
_OTHER_HEADS = {"SET", "RESET", "PRAGMA", "INSTALL", "LOAD", "ATTACH", "DETACH", "USE",
                "CHECKPOINT", "FORCE", "VACUUM", "ANALYZE", "EXPORT", "COMMENT", "PREPARE",
                "DEALLOCATE", "GRANT", "REVOKE", "LISTEN", "UNLISTEN", "NOTIFY", "DISCARD"}
_UNKNOWN_WRITE_HEADS = {"EXECUTE", "CALL", "IMPORT", "DO"}


@dataclass(frozen=True)
class Route:
    """Where one statement goes. ``target`` is the written table's name, lower-cased, when
    it is in the default schema (``None`` for another schema or database: never tracked)."""

    kind: str
    text: str
    target: str | None = None
    flags: frozenset[str] = frozenset()
    columns: str | None = None          # COPY name (cols) FROM: the "(cols)" text
    target_span: tuple[int, int] | None = None


def _values_follow(text: str, pos: int) -> bool:
    """Whether ``[(column list)] VALUES`` starts at ``pos``."""
    if text.startswith("(", pos):
        depth, i = 0, pos
        while i < len(text):
            end = skip_literal(text, i)
            if end is not None:
                i = end
                continue
            depth += (text[i] == "(") - (text[i] == ")")
            i += 1
            if depth == 0:
                break
        pos = _SKIP.match(text, i).end()
    return text[pos:pos + 6].upper() == "VALUES" and not text[pos + 6:pos + 7].isalnum()


_DEFAULT_SCHEMAS = ("main", "public")


class _Head:
    """A cursor over the head of a statement: keywords and names, comments skipped."""

    __slots__ = ("catalogs", "dialect", "pos", "text")

    def __init__(self, text: str, catalogs: frozenset[str] = frozenset(), dialect: str = "duckdb"):
        self.text = text
        self.catalogs = catalogs
        self.dialect = dialect
        self.pos = _SKIP.match(text).end()

    def peek(self) -> str:
        m = _WORD.match(self.text, self.pos)
        return m.group(0).upper() if m else self.text[self.pos:self.pos + 1]

    def word(self) -> str:
        m = _WORD.match(self.text, self.pos)
        if not m:
            return ""
        self.pos = _SKIP.match(self.text, m.end()).end()
        return m.group(0).upper()

    def accept(self, *words: str) -> bool:
        save = self.pos
        for w in words:
            if self.word() != w:
                self.pos = save
                return False
        return True

    def name(self) -> tuple[str | None, tuple[int, int] | None, bool]:
        """``(table, span, local)``: the next (qualified) name; ``local`` is False when it is
        qualified with a schema other than main/public or with a database other than the
        session's own (``catalogs``): ``t``, ``main.t``, ``db.t`` and ``db.main.t`` all name
        table ``t`` of the session's database ``db``."""
        m = _NAME.match(self.text, self.pos)
        if not m:
            return None, None, False
        self.pos = _SKIP.match(self.text, m.end()).end()
        parts = [unquote(p, self.dialect) for p in m.groups() if p is not None]
        if len(parts) == 1:
            local = True
        elif len(parts) == 2:
            local = parts[0] in _DEFAULT_SCHEMAS or parts[0] in self.catalogs
        else:
            local = parts[0] in self.catalogs and parts[1] in _DEFAULT_SCHEMAS
        return parts[-1], m.span(), local


#: first words a session handles itself even when it has no incremental view (views created
#: or dropped, DDL checked against the layer's own schema, transactions begun and ended);
#: ``""``: a statement that starts with no word
SESSION_HEADS = frozenset({"", "CREATE", "DROP", "ALTER", "BEGIN", "START", "COMMIT", "END", "ROLLBACK",
                           "ABORT"})


def first_word(text: str) -> str:
    """The statement's first keyword, upper-cased (``""`` when it starts with no word): what
    a session with no incremental view needs to know of most statements (two regex steps).

    >>> first_word("  /* note */ insert into t values (1)"), first_word("(SELECT 1)")
    ('INSERT', '')
    """
    return _Head(text).word()


def may_write(first: str) -> bool:
    """Can a statement starting with ``first`` (see :func:`first_word`) change data? False
    only for reads (SELECT, SHOW, …) and settings (SET, …).

    >>> may_write("SELECT"), may_write("SET"), may_write("INSERT"), may_write("WITH")
    (False, False, True, True)
    """
    return first not in _READ_HEADS and first not in _OTHER_HEADS


def route(text: str, catalogs: frozenset[str] = frozenset(), dialect: str = "duckdb") -> Route:
    """Route one statement (no trailing semicolon needed). ``catalogs``: the names of the
    session's own database (lower-case), so that ``db.t`` and ``db.main.t`` are its table ``t``."""
    h = _Head(text, catalogs, dialect)
    first = h.word()
    if not first:
        rest = text[h.pos:].lstrip()
        if not rest:
            return Route("empty", text)
        return Route("read" if rest.startswith("(") else "unknown_write", text)
    if first in ("BEGIN", "START"):
        return Route("begin", text)
    if first in ("COMMIT", "END"):
        return Route("commit", text)
    if first in ("ROLLBACK", "ABORT"):
        return Route("rollback", text)
    if first in _READ_HEADS:
        return Route("read", text)
    if first == "WITH":
        return Route("unknown_write" if _WRITE_WORD.search(text) else "read", text)
    if first == "EXPLAIN":
        if h.accept("ANALYZE") or h.accept("ANALYSE"):
            return Route("unknown_write" if _WRITE_WORD.search(text, h.pos) else "read", text)
        return Route("read", text)
    if first == "CREATE":
        return _create(h, text)
    if first == "DROP":
        if h.accept("SCHEMA"):
            h.accept("IF", "EXISTS")
            schema, span, _ = h.name()
            return Route("drop", text, schema, frozenset({"schema"}), target_span=span)
        return Route("drop", text)
    if first == "ALTER":
        for what in ("TABLE", "VIEW"):
            if h.accept(what):
                h.accept("IF", "EXISTS")
                table, span, local = h.name()
                return Route("alter", text, table if local else None, frozenset({what.lower()}),
                             target_span=span)
        return Route("other", text)
    if first == "INSERT":
        flags = set()
        if h.accept("OR"):
            if h.word() == "REPLACE":
                flags.add("upsert")
        if not h.accept("INTO"):
            return Route("unknown_write", text)
        table, span, local = h.name()
        if _values_follow(text, h.pos):
            flags.add("values")
        if _DO_UPDATE.search(text, h.pos):
            flags.add("upsert")
        if _RETURNING.search(text, h.pos):
            flags.add("returning")
        return Route("insert", text, table if local else None, frozenset(flags), target_span=span)
    if first in ("UPDATE", "DELETE"):
        if first == "DELETE" and not h.accept("FROM"):
            return Route("unknown_write", text)
        table, span, local = h.name()
        flags = frozenset({"returning"}) if _RETURNING.search(text, h.pos) else frozenset()
        return Route(first.lower(), text, table if local else None, flags, target_span=span)
    if first == "TRUNCATE":
        h.accept("TABLE")
        table, span, local = h.name()
        if h.pos < len(text) and text[h.pos:].strip():
            return Route("unknown_write", text)  # several tables, CASCADE, …: not understood
        return Route("truncate", text, table if local else None, target_span=span)
    if first == "COPY":
        return _copy(h, text)
    if first == "MERGE":
        if not h.accept("INTO"):
            return Route("unknown_write", text)
        table, span, local = h.name()
        return Route("merge", text, table if local else None, target_span=span)
    if first in _OTHER_HEADS:
        return Route("other", text)
    return Route("unknown_write", text)


def _create(h: _Head, text: str) -> Route:
    or_replace = h.accept("OR", "REPLACE")
    if h.peek() == "INCREMENTAL":
        return Route("create_view", text)
    h.accept("TEMP") or h.accept("TEMPORARY") or h.accept("LOCAL", "TEMPORARY")
    if h.accept("TABLE"):
        h.accept("IF", "NOT", "EXISTS")
        table, span, local = h.name()
        return Route("create_table", text, table if local else None,
                     frozenset({"or_replace"}) if or_replace else frozenset(), target_span=span)
    return Route("other", text)


def _copy(h: _Head, text: str) -> Route:
    if h.peek() == "(":
        return Route("read", text)  # COPY (query) TO …
    table, span, local = h.name()
    if table is None:
        return Route("unknown_write", text)
    columns = None
    if h.peek() == "(":
        depth, i = 0, h.pos
        while i < len(text):
            c = text[i]
            depth += c == "("
            depth -= c == ")"
            i += 1
            if depth == 0:
                break
        columns = text[h.pos:i]
        h.pos = _SKIP.match(text, i).end()
    direction = h.word()
    if direction == "TO":
        return Route("read", text)
    if direction != "FROM" or h.peek() == "DATABASE":
        return Route("unknown_write", text)
    if h.peek() == "STDIN":
        return Route("copy_from", text, table if local else None, frozenset({"stdin"}), columns, span)
    return Route("copy_from", text, table if local else None, frozenset(), columns, span)


def split(sql: str) -> list[str]:
    """Statement texts of a string. One statement (no ``;`` before its end) is returned as
    it is without tokenizing; otherwise the string is cut at top-level semicolons, outside
    quotes and comments, by one pass over the text."""
    body = sql.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    if not body or _SKIP.match(body).end() == len(body):  # nothing but comments: no statement
        return []
    if ";" not in body:
        return [body]
    out: list[str] = []
    start = 0
    i, n = 0, len(sql)
    while i < n:
        end = skip_literal(sql, i)
        if end is not None:
            i = end
            continue
        if sql[i] == ";":
            part = sql[start:i].strip()
            if part and _SKIP.match(part).end() < len(part):
                out.append(part)
            start = i + 1
        i += 1
    part = sql[start:].strip()
    if part and _SKIP.match(part).end() < len(part):
        out.append(part)
    return out
