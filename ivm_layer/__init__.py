"""ivm-layer: incremental views over DuckDB and PostgreSQL change streams.

The engine maintains views defined by SQL with the Dynamic Yannakakis family of
algorithms (GDyn / IEDyn): a compact, semi-join-reduced representation of the view that
is linear in the input, updated in place, with constant-delay enumeration of results
and of changes.
"""

from __future__ import annotations

from .compile import compile_view
from .engine.protocol import View
from .errors import (
    ConcurrentModificationError,
    CyclicQueryError,
    IVMError,
    SQLError,
    UnsupportedSQLError,
    UpdateError,
)
from .session import connect

__version__ = "0.1.0"

__all__ = [
    "compile_view",
    "View",
    "IVMError",
    "SQLError",
    "UnsupportedSQLError",
    "CyclicQueryError",
    "UpdateError",
    "ConcurrentModificationError",
    "connect",
]
