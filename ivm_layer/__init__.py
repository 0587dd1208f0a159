"""ivm-layer: incremental views over DuckDB and PostgreSQL change streams.

The engine maintains views defined by SQL with the Dynamic Yannakakis family of
algorithms (GDyn / IEDyn): a compact, semi-join-reduced representation of the view that
is linear in the input, updated in place, with constant-delay enumeration of results
and of changes.

This module is also a PEP 249 (DB-API 2.0) driver: :func:`connect` returns a session with
``cursor()``, ``commit()``, ``rollback()``, ``close()``; the module globals ``apilevel``,
``threadsafety`` and ``paramstyle`` and the exception classes are here.

``import ivm_layer`` loads only this file and :mod:`ivm_layer.errors`: the SQL front-end,
the engine and the database drivers load when first used (``compile_view``, ``connect``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import (
    ConcurrentModificationError,
    CyclicQueryError,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    IVMError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    SQLError,
    UnsupportedSQLError,
    UpdateError,
    Warning,  # the PEP 249 name
)

if TYPE_CHECKING:  # pragma: no cover
    from .compile import compile_view
    from .engine.protocol import View
    from .session import connect

__version__ = "0.1.0"

#: PEP 249: the DB-API level this module implements
apilevel = "2.0"
#: PEP 249: threads may share the module, not a session (use one session per thread)
threadsafety = 1
#: PEP 249: ``?`` placeholders; ``$1`` (numeric) and ``$name`` (named, with a mapping) work
#: too, on DuckDB and PostgreSQL sessions alike
paramstyle = "qmark"

_LAZY = {
    "compile_view": ("ivm_layer.compile", "compile_view"),
    "View": ("ivm_layer.engine.protocol", "View"),
    "connect": ("ivm_layer.session", "connect"),
}


def __getattr__(name: str):
    """Load the engine and the sessions on first use (PEP 562)."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'ivm_layer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ConcurrentModificationError",
    "CyclicQueryError",
    "DataError",
    "DatabaseError",
    "Error",
    "IVMError",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "SQLError",
    "UnsupportedSQLError",
    "UpdateError",
    "View",
    "Warning",
    "apilevel",
    "compile_view",
    "connect",
    "paramstyle",
    "threadsafety",
]
