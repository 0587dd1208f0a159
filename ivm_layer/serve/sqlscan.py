"""Lexical rewrites of statement text that never touch string literals, quoted identifiers or
comments: the code between them is rewritten, the rest kept byte for byte.

Used for the few PostgreSQL spellings DuckDB does not take (``public.t``, ``version()``,
``OPERATOR(pg_catalog.~)``, ``::regclass`` …). Cost: one pass over the text, and only for
statements a cheap regular expression has flagged.
"""

from __future__ import annotations

from collections.abc import Callable

from ..sql.sqltext import skip_literal


def segments(text: str) -> list[tuple[bool, str]]:
    """``(is_code, piece)`` pairs that concatenate to ``text``."""
    out: list[tuple[bool, str]] = []
    start = i = 0
    n = len(text)
    while i < n:
        if text[i] in "'\"-/$":
            end = skip_literal(text, i)
            if end is not None:
                if i > start:
                    out.append((True, text[start:i]))
                out.append((False, text[i:end]))
                start = i = end
                continue
        i += 1
    if start < n:
        out.append((True, text[start:]))
    return out


def map_code(text: str, fn: Callable[[str], str]) -> str:
    """``text`` with ``fn`` applied to every piece of code outside literals and comments."""
    return "".join(fn(piece) if code else piece for code, piece in segments(text))


def code_only(text: str) -> str:
    """The text with every literal and comment blanked to spaces (same length): for searches
    that must not match inside strings."""
    return "".join(piece if code else " " * len(piece) for code, piece in segments(text))
