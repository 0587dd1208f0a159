"""Sessions over a real database: ``ivm_layer.connect()``.

- :mod:`.connect` — :func:`connect`: the URL picks the backend (only that one is imported).
- :mod:`.core` — what every session shares: the DB-API :class:`Cursor`, :class:`ViewInfo`,
  statement dispatch and the view introspection API.
- :mod:`.duckdb` — DuckDB sessions (in-process capture of the session's own writes).
- :mod:`.postgres` — PostgreSQL sessions (logical replication is the capture).
"""

from .connect import connect
from .core import Cursor, ViewInfo

__all__ = ["Cursor", "Session", "ViewInfo", "connect"]


def __getattr__(name: str):
    """``Session`` (the DuckDB session class) is loaded on first use (PEP 562)."""
    if name == "Session":
        from .duckdb.session import Session

        return Session
    raise AttributeError(f"module 'ivm_layer.session' has no attribute {name!r}")
