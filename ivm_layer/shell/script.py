"""Cut shell input into SQL statements and meta-commands, remembering where each starts.

A line whose first non-blank character is a backslash, met outside a statement, is a
meta-command (the whole line, like psql). Everything else is SQL, cut at top-level
semicolons by the dialect's tokenizer (:func:`ivm_layer.sql.statements.split_statements`);
a statement left unterminated at the end of the input still runs, as in psql.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# Text without comments, backslashes or dollar quotes is cut the same way by a scan for quotes
# and semicolons as by sqlglot's tokenizer; only other text pays for loading sqlglot (~0.15 s,
# most of `ivm shell -c "SELECT 1"`).
_NOT_PLAIN = re.compile(r"--|/\*|\\|\$")


@dataclass(frozen=True)
class Item:
    """One statement or meta-command of an input and its position in that input."""

    kind: str        # "sql" or "meta"
    text: str
    line: int        # 1-based line of its first character
    column: int      # 1-based column of its first character
    number: int      # 1-based position among the input's items


def is_complete(text: str, dialect: str) -> bool:
    """Whether the REPL should run ``text`` on Enter: a meta-command, or SQL whose last token
    is a top-level ``;`` (not inside a string, identifier or comment)."""
    stripped = text.strip()
    if not stripped or stripped.startswith("\\") or stripped.splitlines()[-1].lstrip().startswith("\\"):
        return True
    return _sql_complete(text, dialect)


def _plain_cut(text: str) -> tuple[list[tuple[int, int]], bool] | None:
    """For plain text (see ``_NOT_PLAIN``): the ``(start, end)`` of each non-empty statement and
    whether the text ends with a top-level ``;``; ``None`` when sqlglot must read it (comments,
    backslashes, dollar quotes, an unterminated quote)."""
    if _NOT_PLAIN.search(text):
        return None
    spans: list[tuple[int, int]] = []
    start, i, n = 0, 0, len(text)
    ends_with_semicolon = False
    while i < n:
        c = text[i]
        if c in "'\"":
            end = _quote_end(text, i)
            if end is None:
                return None
            i = end
            ends_with_semicolon = False
            continue
        if c == ";":
            if text[start:i].strip():
                spans.append(_trimmed(text, start, i))
            start = i + 1
            ends_with_semicolon = True
        elif not c.isspace():
            ends_with_semicolon = False
        i += 1
    if text[start:].strip():
        spans.append(_trimmed(text, start, n))
    return spans, ends_with_semicolon


def _quote_end(text: str, i: int) -> int | None:
    """The index after the quoted string or identifier starting at ``i`` (doubled quotes
    inside), or None when it is not closed."""
    c, j = text[i], i + 1
    while True:
        k = text.find(c, j)
        if k == -1:
            return None
        if text.startswith(c, k + 1):
            j = k + 2
            continue
        return k + 1


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while text[start].isspace():
        start += 1
    while text[end - 1].isspace():
        end -= 1
    return start, end


def _split(text: str, dialect: str) -> list[str]:
    plain = _plain_cut(text)
    if plain is not None:
        return [text[a:b] for a, b in plain[0]]
    from ..sql.statements import split_statements

    return split_statements(text, dialect)


def _sql_complete(text: str, dialect: str) -> bool:
    plain = _plain_cut(text)
    if plain is not None:
        return plain[1]
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import TokenType

    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(text)
    except SqlglotError:
        return False  # an unterminated string or comment
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def parse_script(text: str, dialect: str) -> list[Item]:
    """The statements and meta-commands of ``text`` in order, with their positions."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    items: list[Item] = []

    def position(offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(starts, offset) - 1
        return i + 1, offset - starts[i] + 1

    def flush(buf_start: int, buf_end: int) -> None:
        chunk = text[buf_start:buf_end]
        pos = 0
        for stmt in _split(chunk, dialect):
            at = chunk.find(stmt, pos)
            if at < 0:  # the splitter returns exact substrings; never expected
                at = pos
            pos = at + len(stmt)
            line, col = position(buf_start + at)
            items.append(Item("sql", stmt, line, col, len(items) + 1))

    buf_start: int | None = None
    for i, ln in enumerate(lines):
        cut = _meta_after_statement(text, buf_start, starts[i], ln, dialect)
        if cut is not None:  # "SELECT 1; \\x": the statement, then the meta-command
            flush(starts[i] if buf_start is None else buf_start, starts[i] + cut)
            buf_start = None
            body = ln[cut:].strip()
            items.append(Item("meta", body, i + 1, cut + 1, len(items) + 1))
            continue
        if ln.lstrip().startswith("\\"):
            if buf_start is not None:  # an unterminated statement before a meta-command runs first
                flush(buf_start, starts[i])
                buf_start = None
            body = ln.strip()
            items.append(Item("meta", body, i + 1, len(ln) - len(ln.lstrip()) + 1, len(items) + 1))
            continue
        if buf_start is None:
            if not ln.strip():
                continue
            buf_start = starts[i]
        end = starts[i + 1]
        if _sql_complete(text[buf_start:end], dialect):
            flush(buf_start, end)
            buf_start = None
    if buf_start is not None:
        flush(buf_start, len(text))
    return items


def _meta_after_statement(text: str, buf_start: int | None, line_start: int, line: str,
                          dialect: str) -> int | None:
    """The column (0-based) of a meta-command that follows a complete statement on ``line``
    (psql runs ``SELECT 1; \\x`` as both), or None."""
    idx = line.find("\\")
    while idx > 0:
        prefix = text[line_start if buf_start is None else buf_start:line_start + idx]
        if prefix.strip() and prefix.rstrip().endswith(";") and _sql_complete(prefix, dialect):
            return idx
        idx = line.find("\\", idx + 1)
    return None
