"""Sessions over a real database: ``ivm_layer.connect()``.

- :mod:`.core` — what every session shares: the DB-API :class:`Cursor`, :class:`ViewInfo`,
  statement dispatch and the view introspection API.
- :mod:`.duckdb` — DuckDB sessions (in-process capture of the session's own writes).
- :mod:`.postgres` — PostgreSQL sessions (logical replication is the capture).
"""

from .core import Cursor, ViewInfo
from .duckdb.session import Session, connect

__all__ = ["Cursor", "Session", "ViewInfo", "connect"]
