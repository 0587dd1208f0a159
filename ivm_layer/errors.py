"""Error types. Every user mistake surfaces as an :class:`IVMError` subclass."""

from __future__ import annotations


class IVMError(Exception):
    """Base class of every error the layer raises for a user mistake."""


class SQLError(IVMError):
    """The SQL text cannot be parsed or names something that does not exist."""


class UnsupportedSQLError(SQLError):
    """The SQL is valid but uses a construct the incremental engine does not support."""


class CyclicQueryError(IVMError):
    """The query is cyclic (no generalized join tree exists), so it cannot be maintained."""

    def __init__(self, message: str, atoms: tuple[str, ...] = ()):
        super().__init__(message)
        self.atoms = atoms


class UpdateError(IVMError):
    """An update cannot be applied (unknown table, wrong arity, delete of a missing row)."""


class ConcurrentModificationError(IVMError):
    """A view was updated while one of its enumerations was still open."""


class SubscriberWarning(UserWarning):
    """A view subscriber raised; the change it was told about is committed all the same."""
