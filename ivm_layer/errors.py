"""Every exception and warning ivm-layer raises, in one module, each with its SQLSTATE.

The classes follow PEP 249 (the DB-API), so code written for any Python database driver
catches them the usual way, and every one of them is also an :class:`IVMError`::

    Exception
    ├── Warning                      PEP 249 (a builtins.Warning: usable with warnings.warn)
    │   └── IVMWarning               also a UserWarning
    │       ├── SubscriberWarning, CatalogWarning, ViewStoppedWarning, LagWarning
    └── Error                        PEP 249
        └── IVMError                 every error of the layer
            ├── InterfaceError       misuse of the API (closed session/cursor), connection targets
            │   └── ConnectionTargetError
            └── DatabaseError
                ├── DataError        a value does not fit (UpdateError, EngineValueError)
                ├── OperationalError the database or a stream failed (lost connection, replication,
                │                    checkpoints, sinks, stopped views)
                ├── IntegrityError   a constraint was violated (unique, not null, foreign key, check)
                ├── InternalError    the database's internal error
                ├── ProgrammingError bad SQL, unknown names, missing privileges
                │   └── SQLError
                │       └── UnsupportedSQLError (also a NotSupportedError)
                └── NotSupportedError (CyclicQueryError)

Every class has a ``sqlstate`` (PostgreSQL's five-character code, ``None`` for the bare base
classes); an instance may carry a more precise one (``err.sqlstate``). An error that a
database driver (DuckDB, psycopg) raised is translated by :func:`from_driver` into the class
above that PEP 249 gives it, keeping the driver's exception as ``__cause__``: PostgreSQL's
SQLSTATE as it is, DuckDB's exception class mapped to the code PostgreSQL uses for the same
failure (DuckDB has none of its own). Translation costs O(1) per error.

This module imports nothing outside the standard library.
"""

from __future__ import annotations

import builtins
import re


def _rebuild(cls: type, args: tuple, state: dict) -> BaseException:
    """Unpickle an error without calling its ``__init__`` (subclasses differ in signature)."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


# -- PEP 249 --------------------------------------------------------------------------------
class Warning(builtins.Warning):  # the PEP 249 name (shadows the builtin here only)
    """PEP 249 ``Warning``: important warnings. Ours are issued with :func:`warnings.warn`."""

    sqlstate: str | None = "01000"


class Error(Exception):
    """PEP 249 ``Error``: the base class of every error of the layer (see :class:`IVMError`).

    ``sqlstate``: PostgreSQL's code for the failure (a class attribute, or the database's own
    code for an error it raised)."""

    sqlstate: str | None = None

    def __init__(self, *args, sqlstate: str | None = None):
        super().__init__(*args)
        if sqlstate is not None:
            self.sqlstate = sqlstate

    def __reduce__(self):
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class IVMError(Error):
    """Base class of every error the layer raises (a user mistake, or a failure of the
    database or of a change stream, in the user's terms)."""


class InterfaceError(IVMError):
    """PEP 249: an error of the interface rather than of the database (a closed session or
    cursor, a fetch before any statement, a connection target that cannot be used)."""

    sqlstate = "08000"


class DatabaseError(IVMError):
    """PEP 249: an error of the database (or of the incremental layer over it)."""


class DataError(DatabaseError):
    """PEP 249: a problem with the data (a value out of range, a bad cast, division by zero)."""

    sqlstate = "22000"


class OperationalError(DatabaseError):
    """PEP 249: the database's operation failed, not necessarily the programmer's fault (lost
    connection, transaction conflict, out of memory, a replication stream that stopped)."""

    sqlstate = "58000"


class IntegrityError(DatabaseError):
    """PEP 249: a constraint was violated (unique, not null, foreign key, check)."""

    sqlstate = "23000"


class InternalError(DatabaseError):
    """PEP 249: the database's internal error (an invalid transaction state, a bug)."""

    sqlstate = "XX000"


class ProgrammingError(DatabaseError):
    """PEP 249: a programming error (bad SQL, unknown table or column, wrong parameters)."""

    sqlstate = "42000"


class NotSupportedError(DatabaseError):
    """PEP 249: a feature the database (or the incremental engine) does not support."""

    sqlstate = "0A000"


# -- SQL and the engine -----------------------------------------------------------------------
class SQLError(ProgrammingError):
    """The SQL text cannot be parsed or names something that does not exist."""

    sqlstate = "42601"


class UnsupportedSQLError(SQLError, NotSupportedError):
    """The SQL is valid but uses a construct the incremental engine does not support."""

    sqlstate = "0A000"


class CyclicQueryError(NotSupportedError):
    """The query is cyclic (no generalized join tree exists), so it cannot be maintained."""

    def __init__(self, message: str, atoms: tuple[str, ...] = ()):
        super().__init__(message)
        self.atoms = atoms


class HeavyLightRefused(NotSupportedError):
    """``WITH (epsilon = …)`` on a view paper 004's heavy/light construction does not cover
    (the message names the view's class and the reason)."""


class UpdateError(DataError):
    """An update cannot be applied (unknown table, wrong arity, delete of a missing row)."""


class ConcurrentModificationError(ProgrammingError):
    """A view was updated while one of its enumerations was still open."""

    sqlstate = "55000"


class EngineValueError(DataError):
    """The engine could not evaluate a view's definition over the tables' values."""


# -- sessions -----------------------------------------------------------------------------------
class SourceGoneError(OperationalError):
    """A table an incremental view reads was dropped or replaced behind the session's back."""

    sqlstate = "55000"


class SourceChangedError(OperationalError):
    """A source table changed in a way the view cannot follow (a used column dropped or
    retyped, replica identity lost): the view is stopped; drop and re-create it."""

    sqlstate = "55000"


class ViewStoppedError(OperationalError):
    """A read of a view that was stopped (its cause is chained and in the message)."""

    sqlstate = "55000"


class CatalogError(ProgrammingError):
    """A name, slot or publication belongs to something else: nothing was changed."""

    sqlstate = "42710"


class CheckpointError(OperationalError):
    """A checkpoint cannot be written or read (unsupported value, unsafe state directory)."""

    sqlstate = "58030"


# -- PostgreSQL connections and replication --------------------------------------------------------
class ConnectionTargetError(InterfaceError):
    """The connection target (URL or conninfo string) cannot be used."""

    sqlstate = "08001"


class ConnectionLostError(OperationalError):
    """The connection to PostgreSQL was lost (server restart, ``pg_terminate_backend``)."""

    sqlstate = "08006"


class PostgresError(OperationalError):
    """A PostgreSQL-side failure of the connector (connection, slot, replication protocol).
    ``sqlstate`` is the server's error code when there is one."""

    sqlstate = None

    def __init__(self, message: str, sqlstate: str | None = None):
        super().__init__(message, sqlstate=sqlstate)


class ConnectionLost(PostgresError, ConnectionLostError):
    """The connection went away or the server cannot take one right now (shutdown, restart,
    ``pg_terminate_backend``, a slot still held by a walsender that is exiting): worth
    retrying with a new connection."""

    sqlstate = "08006"


class PrivilegeError(ProgrammingError):
    """The role lacks a privilege the operation needs (PostgreSQL's message is included)."""

    sqlstate = "42501"


class ReplicationError(OperationalError):
    """A view's replication stream failed for good (slot dropped, server unreachable for
    longer than the retry budget, missing privileges): the view is stopped."""

    sqlstate = "55000"


class PgOutputError(OperationalError):
    """A pgoutput message could not be decoded (protocol violation or out-of-order stream)."""

    sqlstate = "08P01"


class ReplicaIdentityError(PgOutputError):
    """An UPDATE/DELETE arrived without the full old row: the table needs REPLICA IDENTITY FULL."""

    sqlstate = "55000"

    def __init__(self, message: str, table: str):
        super().__init__(message)
        self.table = table


# -- the daemon and the shell ---------------------------------------------------------------------
class ConfigError(ProgrammingError):
    """Settings (the daemon's, or a command's options) are missing, contradictory or malformed."""

    sqlstate = "F0000"


class StateError(OperationalError):
    """The checkpoint directory cannot be used (other views, unreadable files)."""

    sqlstate = "58030"


class SinkError(OperationalError):
    """A sink cannot be opened or written."""


class ShellError(ProgrammingError):
    """A meta-command was misused (unknown command, bad argument, missing file)."""


class ServeError(IVMError):
    """An error ``ivm serve`` reports to a client with a given SQLSTATE (and PostgreSQL's
    optional detail, hint and cursor position)."""

    sqlstate = "XX000"   # the instance's own code replaces it

    def __init__(self, sqlstate: str, message: str, detail: str | None = None,
                 hint: str | None = None, position: int | None = None):
        super().__init__(message, sqlstate=sqlstate)
        self.sqlstate = sqlstate
        self.detail = detail
        self.hint = hint
        self.position = position


class UsageError(ShellError):
    """The shell's command line asks for something it cannot do (exit status 1, as psql)."""


class VariableError(ShellError):
    """A shell variable name or value the shell cannot take."""


class ScanError(ShellError):
    """The shell's input cannot be cut into statements (a variable that expands forever)."""


# -- warnings ---------------------------------------------------------------------------------
class IVMWarning(Warning, UserWarning):
    """Base class of the layer's warnings (a PEP 249 ``Warning`` and a ``UserWarning``)."""


class SubscriberWarning(IVMWarning):
    """A view subscriber raised; the change it was told about is committed all the same."""


class CatalogWarning(IVMWarning):
    """A catalog row could not be resumed; its view is stopped, the others work."""


class ViewStoppedWarning(IVMWarning):
    """A view stopped while the session applied changes; its own reads raise from now on."""


class LagWarning(IVMWarning):
    """A view's replication slot retains more WAL than ``lag_warning_bytes``."""


# -- translating the drivers' exceptions ---------------------------------------------------------
#: the PEP 249 class names both drivers use, most specific first
_PEP249: dict[str, type[Error]] = {
    "IntegrityError": IntegrityError, "DataError": DataError, "NotSupportedError": NotSupportedError,
    "ProgrammingError": SQLError, "InternalError": InternalError, "OperationalError": OperationalError,
    "InterfaceError": InterfaceError, "DatabaseError": DatabaseError,
}

#: DuckDB's exception classes → PEP 249 class (for the few DuckDB leaves directly under
#: DatabaseError) and the SQLSTATE PostgreSQL uses for the same failure
_DUCKDB: dict[str, tuple[type[Error] | None, str]] = {
    "ParserException": (None, "42601"), "SyntaxException": (None, "42601"),
    "CatalogException": (None, "42P01"), "BinderException": (None, "42703"),
    "InvalidInputException": (None, "22023"), "InvalidTypeException": (None, "42804"),
    "ConstraintException": (None, "23000"), "ConversionException": (None, "22018"),
    "OutOfRangeException": (None, "22003"), "TypeMismatchException": (None, "42804"),
    "TransactionException": (None, "25000"), "SerializationException": (None, "58000"),
    "IOException": (None, "58030"), "HTTPException": (None, "58030"),
    "ConnectionException": (None, "08000"), "OutOfMemoryException": (None, "53200"),
    "ResourceInUseException": (None, "55006"), "NotImplementedException": (None, "0A000"),
    "InternalException": (None, "XX000"), "FatalException": (InternalError, "XX000"),
    "InterruptException": (OperationalError, "57014"),
    "PermissionException": (SQLError, "42501"), "SequenceException": (DataError, "2200H"),
    "DependencyException": (InternalError, "2BP01"),
}

#: refinements of a DuckDB code by its message (first match wins)
_DUCKDB_MESSAGES: list[tuple[str, re.Pattern, str]] = [
    ("23000", re.compile(r"duplicate key|unique constraint|primary key constraint", re.IGNORECASE), "23505"),
    ("23000", re.compile(r"NOT NULL constraint", re.IGNORECASE), "23502"),
    ("23000", re.compile(r"foreign key", re.IGNORECASE), "23503"),
    ("23000", re.compile(r"CHECK constraint", re.IGNORECASE), "23514"),
    ("42P01", re.compile(r"already exists", re.IGNORECASE), "42P07"),
    ("42P01", re.compile(r"(Scalar|Table|Aggregate|Macro)? ?Function with name", re.IGNORECASE), "42883"),
    ("42P01", re.compile(r"Schema with name", re.IGNORECASE), "3F000"),
    ("25000", re.compile(r"conflict", re.IGNORECASE), "40001"),
    ("25000", re.compile(r"transaction is aborted", re.IGNORECASE), "25P02"),
    ("22018", re.compile(r"division by zero", re.IGNORECASE), "22012"),
]


def duckdb_sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE PostgreSQL would give the failure a DuckDB exception describes."""
    for cls in type(exc).__mro__:
        entry = _DUCKDB.get(cls.__name__)
        if entry is not None:
            code = entry[1]
            text = str(exc)
            for base, pattern, refined in _DUCKDB_MESSAGES:
                if base == code and pattern.search(text):
                    return refined
            return code
    return None


def from_driver(exc: BaseException, message: str | None = None) -> Error:
    """A database driver's exception (DuckDB's or psycopg's) as this module's PEP 249 class,
    with its SQLSTATE and the driver's exception as ``__cause__``. ``message`` replaces the
    driver's text (e.g. with a password redacted). Raise the result with
    ``raise from_driver(e) from e``."""
    if isinstance(exc, Error):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    cls: type[Error] | None = None
    for klass in type(exc).__mro__:
        entry = _DUCKDB.get(klass.__name__)
        if entry is not None and entry[0] is not None:
            cls = entry[0]
            break
        found = _PEP249.get(klass.__name__)
        if found is not None and klass.__module__.split(".")[0] in ("duckdb", "_duckdb", "psycopg"):
            cls = found
            break
    if sqlstate is None:
        sqlstate = duckdb_sqlstate(exc)
    err = (cls or DatabaseError)(message if message is not None else str(exc).strip(), sqlstate=sqlstate)
    err.__cause__ = exc
    return err


__all__ = [
    "CatalogError",
    "CatalogWarning",
    "CheckpointError",
    "ConcurrentModificationError",
    "ConfigError",
    "ConnectionLost",
    "ConnectionLostError",
    "ConnectionTargetError",
    "CyclicQueryError",
    "HeavyLightRefused",
    "DataError",
    "DatabaseError",
    "EngineValueError",
    "Error",
    "IVMError",
    "IVMWarning",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "LagWarning",
    "NotSupportedError",
    "OperationalError",
    "PgOutputError",
    "PostgresError",
    "PrivilegeError",
    "ProgrammingError",
    "ReplicaIdentityError",
    "ReplicationError",
    "SQLError",
    "ScanError",
    "ServeError",
    "ShellError",
    "SinkError",
    "SourceChangedError",
    "SourceGoneError",
    "StateError",
    "SubscriberWarning",
    "UnsupportedSQLError",
    "UpdateError",
    "UsageError",
    "ViewStoppedError",
    "VariableError",
    "ViewStoppedWarning",
    "Warning",
    "duckdb_sqlstate",
    "from_driver",
]
