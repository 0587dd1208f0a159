"""PostgreSQL connection targets the way libpq takes them, and what identifies a database.

- :func:`is_postgres_target`: does a ``connect()`` argument name a PostgreSQL database? URLs
  (``postgresql://``, ``postgres://``, any letter case, and SQLAlchemy's
  ``postgresql+psycopg://`` / ``+psycopg2://``) and libpq conninfo strings
  (``host=127.0.0.1 port=5432 user=app dbname=shop``, ``""`` meaning "all from PG*").
- :func:`normalize`: the text handed to libpq (the scheme spelled as libpq wants it); every
  other parameter — ``PG*`` variables, ``~/.pgpass``, ``sslmode`` and friends, service
  files — is left to libpq itself (psycopg's :mod:`psycopg.conninfo` does the parsing).
- :func:`redact` / :func:`redact_text`: passwords never leave this module in messages.
- :class:`DatabaseIdentity`: the server's system identifier plus the database OID and name,
  read from the server — never from the spelling of the target — so two spellings of one
  database share one state.
- :class:`ControlConnection`: an ordinary connection that reconnects (bounded retries with
  backoff) when the server restarted or the connection dropped.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass

from ...errors import IVMError

_URL = re.compile(r"^\s*(postgres(?:ql)?)(\+[a-z0-9_]+)?://", re.IGNORECASE)
_DRIVERS = {"+psycopg", "+psycopg2", "+psycopg3", "+pg8000", "+asyncpg"}
# libpq connection keywords (PostgreSQL 15); a conninfo string is "keyword=value …"
_KEYWORDS = {
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "channel_binding",
    "connect_timeout", "client_encoding", "options", "application_name",
    "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode", "requiressl",
    "sslcompression", "sslcert", "sslkey", "sslpassword", "sslrootcert", "sslcrl", "sslcrldir",
    "sslsni", "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname",
    "gsslib", "service", "target_session_attrs", "load_balance_hosts",
}
_KV = re.compile(r"^\s*([a-z_]+)\s*=", re.IGNORECASE)


class ConnectionTargetError(IVMError):
    """The connection target (URL or conninfo string) cannot be used."""


def is_postgres_target(text: str | None) -> bool:
    """True when ``text`` is a PostgreSQL URL or a libpq conninfo string (``""`` too: all
    parameters from the ``PG*`` environment, as ``psql`` with no arguments)."""
    if text is None:
        return False
    if _URL.match(text):
        return True
    if text.strip() == "":
        return True
    m = _KV.match(text)
    return bool(m) and m.group(1).lower() in _KEYWORDS


def normalize(text: str) -> str:
    """The target as libpq accepts it: URL schemes in lower case and without a SQLAlchemy
    driver suffix; conninfo strings unchanged. Checked by libpq's own parser; errors are
    raised as :class:`ConnectionTargetError` without the password."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    m = _URL.match(text)
    out = text.strip()
    if m:
        driver = (m.group(2) or "").lower()
        if driver and driver not in _DRIVERS:
            raise ConnectionTargetError(f"connection URL {redact(text)}: unknown driver {driver[1:]!r}; "
                                        "use postgresql://user@host:port/dbname")
        out = "postgresql://" + text[m.end():]
    try:
        conninfo_to_dict(out)
    except ProgrammingError as e:
        raise ConnectionTargetError(f"cannot read the connection target {redact(text)}: "
                                    f"{redact_text(str(e), text)}") from None
    return out


class PostgresError(IVMError):
    """A PostgreSQL-side failure of the connector (connection, slot, replication protocol).
    ``sqlstate`` is the server's error code when there is one."""

    def __init__(self, message: str, sqlstate: str | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate


class ConnectionLost(PostgresError):
    """The connection went away or the server cannot take one right now (shutdown, restart,
    ``pg_terminate_backend``, a slot still held by a walsender that is exiting): worth
    retrying with a new connection."""


# errors that a new connection attempt will not cure: bad credentials, no such database or
# slot, missing privileges
FATAL_SQLSTATES = {"28000", "28P01", "3D000", "42704", "42501", "42P01", "55000"}


def is_retryable(err: BaseException) -> bool:
    """True for a lost connection or a server that is shutting down / starting up."""
    import psycopg

    if isinstance(err, ConnectionLost):
        return True
    if isinstance(err, PostgresError):
        return err.sqlstate is not None and err.sqlstate not in FATAL_SQLSTATES and (
            err.sqlstate.startswith(("08", "57")) or err.sqlstate == "55006")
    if isinstance(err, psycopg.OperationalError | OSError):
        state = getattr(err, "sqlstate", None)
        return state not in FATAL_SQLSTATES
    return False


def redact(text: str) -> str:
    """The target for messages: URL userinfo and ``password`` parameters replaced by ``***``."""
    out = re.sub(r"(://[^/@?#]*?:)[^@/?#]*@", r"\1***@", text)
    out = re.sub(r"([?&]password=)[^&#]*", r"\1***", out, flags=re.IGNORECASE)
    out = re.sub(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", out, flags=re.IGNORECASE)
    return out


def redact_text(message: str, target: str | None = None) -> str:
    """``message`` (e.g. a library error) with the password of ``target`` and any URL
    userinfo password or ``password=`` field replaced by ``***``."""
    out = message
    if target:
        for pw in _passwords(target):
            if len(pw) >= 1:
                out = out.replace(pw, "***")
    return redact(out)


def _passwords(target: str) -> list[str]:
    from urllib.parse import unquote

    found = []
    m = re.search(r"://[^/@?#]*?:([^@/?#]*)@", target)
    if m:
        found += [m.group(1), unquote(m.group(1))]
    for m in re.finditer(r"[?&]password=([^&#]*)", target, flags=re.IGNORECASE):
        found += [m.group(1), unquote(m.group(1))]
    for m in re.finditer(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", target, flags=re.IGNORECASE):
        v = m.group(1)
        found += [v, v.strip("'")]
    return sorted({p for p in found if p}, key=len, reverse=True)


def connection_error(err: BaseException, target: str, what: str = "cannot connect to") -> str:
    """A one-line message for a failed connection, password-free."""
    return f"{what} {redact(target)}: {redact_text(str(err).strip(), target)}"


@dataclass(frozen=True)
class DatabaseIdentity:
    """What identifies a database whatever the target's spelling."""

    system_identifier: str
    database_oid: int
    database: str

    @property
    def key(self) -> str:
        """A file-name-safe key: ``pg_<system identifier>_<database oid>``."""
        return f"pg_{self.system_identifier}_{self.database_oid}"


def database_identity(conn) -> DatabaseIdentity:
    """Read the identity from the server (``pg_control_system()``; ``IDENTIFY_SYSTEM`` is
    not needed: the function is readable by every role)."""
    sysid, oid, name = conn.execute(
        "SELECT (SELECT system_identifier FROM pg_control_system())::text, d.oid::bigint, d.datname "
        "FROM pg_database d WHERE d.datname = current_database()").fetchone()
    return DatabaseIdentity(str(sysid), int(oid), name)


class ControlConnection:
    """An autocommit psycopg connection that is re-opened (bounded retries, backoff) when
    the server restarted or the connection dropped. Use :meth:`execute` for single
    statements and :meth:`transaction` for blocks; a block interrupted by a lost connection
    was rolled back by the server and raises :class:`ConnectionLostError`."""

    def __init__(self, connect, target: str, retry_seconds: float = 30.0):
        self._connect = connect          # () -> psycopg connection
        self.target = target
        self.retry_seconds = retry_seconds
        self.conn = connect()
        self._depth = 0                  # inside transaction(): never re-open silently

    def live(self):
        """The connection, re-opened first if it is closed or broken."""
        if self.conn.closed or self.conn.broken:
            self.reconnect()
        return self.conn

    def reconnect(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.1
        while True:
            try:
                self.conn = self._connect()
                return
            except PostgresError as e:
                if time.monotonic() > deadline or not is_retryable(e):
                    raise ConnectionLostError(
                        f"the connection to PostgreSQL was lost and could not be re-established within "
                        f"{self.retry_seconds:.0f} s: {e}") from None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def execute(self, sql, params=None):
        """Run one statement; a dropped connection is re-opened and the statement run once more
        (use only for statements that may safely run twice: reads and idempotent writes)."""
        import psycopg

        if self._depth:
            return self.conn.execute(sql, params)
        conn = self.live()
        try:
            return conn.execute(sql, params)
        except psycopg.OperationalError:
            if not (conn.closed or conn.broken):
                raise
            self.reconnect()
            return self.conn.execute(sql, params)

    @contextlib.contextmanager
    def transaction(self):
        import psycopg

        conn = self.live()
        self._depth += 1
        try:
            with conn.transaction():
                yield conn
        except psycopg.OperationalError as e:
            if conn.closed or conn.broken:
                raise ConnectionLostError(f"the connection to PostgreSQL was lost in a transaction "
                                          f"(rolled back by the server): {redact_text(str(e), self.target)}") from None
            raise
        finally:
            self._depth -= 1

    def cursor(self):
        return (self.conn if self._depth else self.live()).cursor()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class ConnectionLostError(IVMError):
    """The connection to PostgreSQL was lost (server restart, ``pg_terminate_backend``)."""


class PrivilegeError(IVMError):
    """The role lacks a privilege the operation needs (PostgreSQL's message is included)."""


def as_ivm_error(err: BaseException, target: str | None = None) -> IVMError:
    """A psycopg exception as the layer's error, password-free: lost connections as
    :class:`ConnectionLostError`, missing privileges as :class:`PrivilegeError` (with what to
    grant), anything else as :class:`~ivm_layer.errors.SQLError`."""
    import psycopg

    from ...errors import SQLError

    text = redact_text(str(err).strip(), target)
    if isinstance(err, psycopg.errors.InsufficientPrivilege):
        return PrivilegeError(f"permission denied: {text} (the session's role needs SELECT on the view's "
                              "tables, REPLICATION, CREATE on the database, and ownership of the tables "
                              "it publishes or sets REPLICA IDENTITY FULL on; ask their owner)")
    if isinstance(err, psycopg.OperationalError | psycopg.InterfaceError):
        return ConnectionLostError(f"the connection to PostgreSQL failed: {text}")
    return SQLError(text)


@contextlib.contextmanager
def driver_errors(target: str | None = None):
    """Raise psycopg exceptions leaving the block as :func:`as_ivm_error` says."""
    import psycopg

    try:
        yield
    except psycopg.Error as e:
        raise as_ivm_error(e, target) from None


# -- the driver's facts, for code outside ivm_layer/io/ (which never imports psycopg) ------------
def driver_error() -> type[BaseException]:
    """The driver's base exception class (``except pgconn.driver_error() as e``)."""
    import psycopg

    return psycopg.Error


def is_dropped(err: BaseException) -> bool:
    """Whether ``err`` says the connection failed (server restart, network), not the statement."""
    import psycopg

    return isinstance(err, psycopg.OperationalError)


def is_permission_error(err: BaseException) -> bool:
    import psycopg

    return isinstance(err, psycopg.errors.InsufficientPrivilege)


def in_transaction(conn) -> bool:
    """Whether a transaction block is open on ``conn`` (also a failed one)."""
    from psycopg import pq

    return conn.pgconn.transaction_status not in (pq.TransactionStatus.IDLE, pq.TransactionStatus.UNKNOWN)


def transaction_failed(conn) -> bool:
    """Whether the open transaction block on ``conn`` failed (only ROLLBACK is accepted)."""
    from psycopg import pq

    return conn.pgconn.transaction_status == pq.TransactionStatus.INERROR


@contextlib.contextmanager
def exists_ok():
    """Ignore "already exists" from a ``CREATE … IF NOT EXISTS`` that raced another session."""
    import psycopg

    with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
        yield
