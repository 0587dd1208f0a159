"""PostgreSQL spellings in ordinary statements that DuckDB reads differently, rewritten lexically.

Only statements a quick search flags are touched, and only outside literals and comments:

- ``public.t`` → ``main.t`` (DuckDB's default schema is ``main``; clients say ``public``);
- ``version()``, ``pg_catalog.version()`` → PostgreSQL's version string (drivers parse it);
- ``current_schema()``/``current_schema`` → ``'public'``, ``current_user``/``session_user``
  → the user, ``current_database()`` → the database name the client connected to,
  ``pg_backend_pid()`` → its backend id, ``current_schemas(…)`` → ``['pg_catalog', 'public']``.

Cost: one regular-expression search per statement; a rewrite only where it matches.
"""

from __future__ import annotations

import re

from . import sqlscan

_FLAG = re.compile(r"public\s*\.|version\s*\(|current_schema|current_user|session_user|current_database|"
                   r"pg_backend_pid|current_schemas", re.IGNORECASE)
_PUBLIC = re.compile(r'(?<![\w."])(?:public|"public")\s*\.\s*(?=["A-Za-z_])', re.IGNORECASE)


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


_SUBS = [
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?version\s*\(\s*\)", re.IGNORECASE), "ivm_version()"),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?current_schemas\s*\([^()]*\)", re.IGNORECASE), "['pg_catalog', 'public']"),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?current_schema\b\s*(?:\(\s*\))?", re.IGNORECASE), "ivm_current_schema()"),
]
_PER_CLIENT = [
    (re.compile(r"\b(current_user|session_user)\b(?!\s*\()", re.IGNORECASE), "ivm_{0}()", "{user}"),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?(current_database)\s*\(\s*\)", re.IGNORECASE), "ivm_{0}()", "{database}"),
    (re.compile(r"\b(?:pg_catalog\s*\.\s*)?(pg_backend_pid)\s*\(\s*\)", re.IGNORECASE), "ivm_{0}()", "{pid}"),
]


def client_macros(version: str, user: str, database: str, pid: int) -> list[str]:
    """The TEMP macros a client connection needs for the rewritten spellings."""
    return [f"CREATE OR REPLACE TEMP MACRO ivm_version() AS {_lit(version)}",
            "CREATE OR REPLACE TEMP MACRO ivm_current_schema() AS 'public'",
            f"CREATE OR REPLACE TEMP MACRO ivm_current_user() AS {_lit(user)}",
            f"CREATE OR REPLACE TEMP MACRO ivm_session_user() AS {_lit(user)}",
            f"CREATE OR REPLACE TEMP MACRO ivm_current_database() AS {_lit(database)}",
            f"CREATE OR REPLACE TEMP MACRO ivm_pg_backend_pid() AS {int(pid)}"]


_LIKE = re.compile(r"\b((?:NOT\s+)?I?LIKE)\s+((?:E)?'(?:[^']|'')*')(?!\s*ESCAPE)", re.IGNORECASE)


def like_escapes(text: str) -> str:
    """PostgreSQL's LIKE takes ``\\`` as its escape character by default, DuckDB's none:
    patterns with a backslash get an explicit ``ESCAPE '\\'``."""
    if "\\" not in text or not re.search(r"LIKE", text, re.IGNORECASE):
        return text
    return _LIKE.sub(lambda m: f"{m.group(1)} {m.group(2)} ESCAPE '\\'" if "\\" in m.group(2) else m.group(0), text)


def rewrite(text: str, user: str, database: str, pid: int, macros: bool = True) -> str:
    """``text`` with the spellings above rewritten: to the ``ivm_*`` macros of
    :func:`client_macros` (``macros``), or to literals (the shared catalog database)."""
    text = like_escapes(text)
    if not _FLAG.search(text):
        return text
    values = {"{user}": _lit(user), "{database}": _lit(database), "{pid}": str(int(pid))}

    def code(piece: str) -> str:
        piece = _PUBLIC.sub("main.", piece)
        for pat, rep in _SUBS:
            piece = pat.sub(rep, piece)
        for pat, rep, lit in _PER_CLIENT:
            piece = pat.sub((lambda m, rep=rep: rep.format(m.group(1).lower())) if macros else values[lit], piece)
        return piece
    return sqlscan.map_code(text, code)


_FUNC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\((.*)\)$", re.DOTALL)
_CAST = re.compile(r'^CAST\((?:"?([A-Za-z_][A-Za-z0-9_]*)"?|.*) AS [^()]+(?:\(\d+(?:,\s*\d+)?\))?\)$', re.DOTALL)
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_RENAMED = {"count_star": "count", "ivm_version": "version", "ivm_current_schema": "current_schema",
            "ivm_current_user": "current_user", "ivm_session_user": "session_user",
            "ivm_current_database": "current_database", "ivm_pg_backend_pid": "pg_backend_pid"}


def column_name(name: str) -> str:
    """DuckDB's name for a result column → the one PostgreSQL gives: a function call is named
    for the function (``count(*)`` → ``count``), a cast for what it casts, any other
    expression ``?column?``; names that are identifiers (columns, aliases) stay."""
    if _PLAIN.match(name) or not name:
        return _RENAMED.get(name, name)
    c = _CAST.match(name)
    if c:
        return c.group(1) or "?column?"
    f = _FUNC.match(name)
    if f and "(" not in f.group(1):
        return _RENAMED.get(f.group(1).lower(), f.group(1).lower())
    return "?column?" if any(ch in name for ch in " +-*/'()<>=|:,.\"") or name[:1].isdigit() else name
