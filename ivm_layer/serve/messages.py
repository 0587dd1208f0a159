"""The frontend (client → server) messages of the PostgreSQL v3 wire protocol, as plain data.

:mod:`.codec` turns bytes into these and back; nothing here does I/O. Names follow the
protocol chapter of the PostgreSQL manual ("Message Formats").
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROTOCOL_V3 = 196608          # 3.0
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102


@dataclass(frozen=True)
class Startup:
    """``StartupMessage``: protocol version and the connection parameters (user, database, …)."""

    version: int
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SSLRequest:
    pass


@dataclass(frozen=True)
class GSSENCRequest:
    pass


@dataclass(frozen=True)
class CancelRequest:
    pid: int
    secret: int


@dataclass(frozen=True)
class Query:
    """``Q``: a simple query (one or more statements)."""

    sql: str


@dataclass(frozen=True)
class Parse:
    """``P``: prepare ``sql`` as statement ``name`` ("" = unnamed); ``param_oids`` may hold 0s."""

    name: str
    sql: str
    param_oids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Bind:
    """``B``: bind parameters (``None`` = NULL) to a statement, making portal ``portal``."""

    portal: str
    statement: str
    param_formats: tuple[int, ...]
    params: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]

    def param_format(self, i: int) -> int:
        """The format code of parameter ``i`` (none given: text; one: for all)."""
        f = self.param_formats
        return 0 if not f else f[0] if len(f) == 1 else f[i]

    def result_format(self, i: int) -> int:
        f = self.result_formats
        return 0 if not f else f[0] if len(f) == 1 else f[i]


@dataclass(frozen=True)
class Describe:
    """``D``: describe a statement (``kind`` ``S``) or a portal (``P``)."""

    kind: str
    name: str


@dataclass(frozen=True)
class Execute:
    """``E``: run a portal, returning at most ``max_rows`` rows (0 = all)."""

    portal: str
    max_rows: int


@dataclass(frozen=True)
class Close:
    kind: str
    name: str


@dataclass(frozen=True)
class Sync:
    pass


@dataclass(frozen=True)
class Flush:
    pass


@dataclass(frozen=True)
class CopyData:
    data: bytes


@dataclass(frozen=True)
class CopyDone:
    pass


@dataclass(frozen=True)
class CopyFail:
    message: str


@dataclass(frozen=True)
class Terminate:
    pass


@dataclass(frozen=True)
class PasswordData:
    """``p``: a password, SASLInitialResponse or SASLResponse; which one depends on the
    authentication exchange in progress (:mod:`.auth` reads it)."""

    data: bytes


@dataclass(frozen=True)
class FunctionCall:
    """``F``: the legacy fast-path function call (answered with an error)."""

    data: bytes
