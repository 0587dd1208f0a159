"""Reading a DuckDB upsert without running it: the rows it may replace.

``INSERT OR REPLACE INTO t …`` and ``INSERT INTO t … ON CONFLICT … DO UPDATE …`` change rows
that DuckDB's ``RETURNING`` shows only after the change (their new values). On a table with
exactly one key (one ``PRIMARY KEY`` or ``UNIQUE`` constraint) the rows they may replace are
the table's rows whose key appears in the statement's source (its ``VALUES`` list or query),
read by one ``SELECT`` before it runs (:func:`upsert_preimage`); the rows actually replaced
are those whose key comes back in the ``RETURNING`` list (a conditional ``DO UPDATE … WHERE``
returns only the rows it updated). The statement is cut at its top-level keywords, never
parsed, so a long ``VALUES`` list costs one scan of its text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...identifiers import ascii_lower
from ...sql.sqltext import unquote
from .preimage import count_marks, quote, top_level

_HEAD = re.compile(r'\s*INSERT\s+(?:OR\s+REPLACE\s+)?INTO\s+(?:(?:"(?:[^"]|"")+"|[^\W\d][\w$]*)\s*\.\s*)*'
                   r'(?:"(?:[^"]|"")+"|[^\W\d][\w$]*)\s*', re.IGNORECASE)
_WORDS = re.compile(r"\b(ON\s+CONFLICT|RETURNING)\b", re.IGNORECASE)
_SOURCE = re.compile(r"\(|(?:VALUES|SELECT|FROM|WITH|TABLE)\b", re.IGNORECASE)
_IDENT = re.compile(r'\s*("(?:[^"]|"")+"|[^\W\d][\w$]*)\s*$')


def _names(column_list: str) -> list[str] | None:
    """The column names of ``(a, "B", c)`` (keys: unquoted, ASCII lower-cased), or None."""
    out = []
    for part in column_list.strip()[1:-1].split(","):
        m = _IDENT.match(part)
        if m is None:
            return None
        out.append(unquote(m.group(1)))
    return out


def upsert_preimage(text: str, table_sql: str, columns: Sequence[str], types: Sequence[str],
                    key: Sequence[str]) -> tuple[str, int] | None:
    """For an upsert into ``table_sql`` (``INSERT OR REPLACE INTO t [(cols)] <source>`` or
    ``INSERT INTO t [(cols)] <source> ON CONFLICT … DO UPDATE …``, with ``?`` or no
    parameters): a ``SELECT`` of the table's rows whose ``key`` appears in the source (each
    with ``hash(columns)``), and how many of the statement's leading parameters it uses.
    ``None`` when the statement is of another shape (an alias, ``BY NAME``, ``DEFAULT
    VALUES``, a key column the statement does not give)."""
    if "$" in text:
        return None
    head = _HEAD.match(text)
    if head is None:
        return None
    words = [(w, a, b) for w, a, b in top_level(text, _WORDS) if a >= head.end()]
    start = head.end()
    lower = [ascii_lower(c) for c in columns]
    given = lower
    if text.startswith("(", start):
        depth, i = 0, start
        while i < len(text):
            depth += (text[i] == "(") - (text[i] == ")")
            i += 1
            if depth == 0:
                break
        names = _names(text[start:i])
        # "(" can also open the source query itself: a column list is names only
        if names is not None and all(n in lower for n in names):
            given, start = names, i + len(text[i:]) - len(text[i:].lstrip())
    if not _SOURCE.match(text, start):       # an alias, BY NAME, DEFAULT VALUES, …
        return None
    ends = [a for w, a, _ in words]
    source = text[start:min(ends) if ends else len(text)].strip().rstrip(";").strip()
    if not source or any(ascii_lower(k) not in given for k in key):
        return None
    cols = ", ".join(f"_ivm_t.{quote(c)}" for c in columns)
    on = " AND ".join(f"_ivm_t.{quote(k)} = CAST(_ivm_src.{quote(ascii_lower(k))} AS {types[lower.index(ascii_lower(k))]})"
                      for k in key)
    names = ", ".join(quote(c) for c in given)
    return (f"SELECT {cols}, hash({cols}) FROM {table_sql} AS _ivm_t SEMI JOIN ({source}) "
            f"AS _ivm_src({names}) ON {on}"), count_marks(source)
