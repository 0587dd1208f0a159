"""ivm-layer: incremental views over DuckDB and PostgreSQL change streams.

The engine maintains views defined by SQL with the Dynamic Yannakakis family of
algorithms (GDyn / IEDyn): a compact, semi-join-reduced representation of the view that
is linear in the input, updated in place, with constant-delay enumeration of results
and of changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    ConcurrentModificationError,
    CyclicQueryError,
    IVMError,
    SQLError,
    UnsupportedSQLError,
    UpdateError,
)
from .session import connect

if TYPE_CHECKING:
    from .compile import compile_view
    from .engine.view import View

__version__ = "0.1.0"

# Loaded on first use (PEP 562): ``compile_view`` brings in sqlglot and the SQL front-end,
# ≈ 0.2 s of start-up that ``ivm shell`` and a session running plain statements never need.
_LAZY = {"compile_view": ".compile", "View": ".engine.view"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
