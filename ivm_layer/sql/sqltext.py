"""Reading SQL text without parsing it: where quoted strings, quoted identifiers, dollar-quoted
strings and comments end, so lexical scans (statement splitting, the session router, the
``UPDATE`` pre-image) can skip them in one pass."""

from __future__ import annotations

import re

from ..identifiers import fold

_DOLLAR = re.compile(r"\$([A-Za-z_]\w*)?\$")


def skip_literal(text: str, i: int) -> int | None:
    """The index just after the quoted string, quoted identifier, dollar-quoted string or
    comment that starts at ``i`` (the end of the text if it is not closed), or ``None`` when
    none starts there. Doubled quotes inside quotes are part of them."""
    c = text[i]
    n = len(text)
    if c in "'\"":
        j = text.find(c, i + 1)
        while j != -1 and j + 1 < n and text[j + 1] == c:
            j = text.find(c, j + 2)
        return n if j == -1 else j + 1
    if c == "-" and text.startswith("--", i):
        j = text.find("\n", i)
        return n if j == -1 else j + 1
    if c == "/" and text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return n if j == -1 else j + 2
    if c == "$":
        m = _DOLLAR.match(text, i)
        if m:
            j = text.find(m.group(0), m.end())
            return n if j == -1 else j + len(m.group(0))
    return None


def unquote(ident: str, dialect: str = "duckdb") -> str:
    """The key of an identifier as written in SQL text (a quoted one unquoted), by the rules
    of ``dialect`` (:func:`ivm_layer.identifiers.fold`)."""
    if ident.startswith('"'):
        return fold(ident[1:-1].replace('""', '"'), True, dialect)
    return fold(ident, False, dialect)
