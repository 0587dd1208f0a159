"""``ivm_layer.connect()``: open a DuckDB or a PostgreSQL session from a URL.

Only the backend the URL names is imported: a PostgreSQL session never loads DuckDB's driver
or the DuckDB session code, and neither loads the SQL front-end before a view needs it.
"""

from __future__ import annotations

from typing import Any

from ..io.postgres.conninfo import is_postgres_target
from .core import SessionBase


def connect(url: str | None = None, **options: Any) -> SessionBase:
    """Open a session. ``None``, ``"duckdb://"``, ``":memory:"``: in-memory DuckDB;
    ``"duckdb:///path/file.duckdb"`` or a path ending in ``.duckdb``: a DuckDB file;
    ``"postgresql://…"``: a :class:`~ivm_layer.session.postgres.session.PostgresSession`, with
    ``options`` (``session=``, ``state_dir=``, ``set_replica_identity=``, …) passed to
    :func:`~ivm_layer.session.postgres.session.connect_postgres`; a DuckDB session takes only
    ``progress=``."""
    if is_postgres_target(url):
        from .postgres.session import connect_postgres

        return connect_postgres(url, **options)
    from .duckdb.session import connect_duckdb

    return connect_duckdb(url, **options)
