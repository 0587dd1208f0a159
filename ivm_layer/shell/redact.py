"""Keep credentials out of what the shell prints and stores.

:func:`mask` hides passwords in URLs (``scheme://user:secret@host`` → ``scheme://user:****@host``),
in libpq keyword strings (``password=secret``) and in SQL (``PASSWORD 'secret'``,
``SECRET 'secret'``). :func:`is_sensitive` says whether a history entry must not be stored.
"""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"]*:)([^\s@'\"]*)@")
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)", re.IGNORECASE)
_SQL_SECRET = re.compile(r"(\b(?:password|secret|key_id|session_token)\s+)('(?:[^']|'')*')", re.IGNORECASE)
_SENSITIVE = re.compile(r"passw(?:or)?d|\bsecret\b|\bkey_id\b|\bsession_token\b", re.IGNORECASE)


def mask(text: str) -> str:
    """``text`` with every password it visibly carries replaced by ``****``."""
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + "****@", text)
    text = _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + "****", text)
    return _SQL_SECRET.sub(lambda m: m.group(1) + "'****'", text)


def is_sensitive(text: str) -> bool:
    """True for input that may carry a credential: it mentions a password or a secret (e.g.
    ``ALTER ROLE … PASSWORD '…'``, DuckDB ``CREATE SECRET``) or holds a URL with a password."""
    return bool(_SENSITIVE.search(text) or _URL_PASSWORD.search(text))
