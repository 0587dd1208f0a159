"""The PostgreSQL v3 wire protocol as pure functions: bytes → messages and messages → bytes.

Sans-I/O, like :mod:`ivm_layer.io.postgres.pgoutput` and psycopg's ``generators.py``: a
:class:`FrontendParser` is fed whatever bytes arrived and hands back complete frontend
messages (:mod:`.messages`); the ``*`` builder functions below return the bytes of backend
messages. Nothing here reads a socket, so the server (:mod:`.server`), the tests and the
fuzzer drive the same code.

Malformed input — a bad length, a truncated field, a missing terminator, an unknown message
type, a message over the size limit — raises :class:`ProtocolViolation` (SQLSTATE 08P01); the
server answers it with an ErrorResponse and closes the connection. Cost: O(message size) per
message, one ``bytes`` slice per field.
"""

from __future__ import annotations

import struct

from . import messages as m

_I16 = struct.Struct("!h")
_U16 = struct.Struct("!H")
_I32 = struct.Struct("!i")
_HDR = struct.Struct("!ci")

#: the largest message accepted by default (PostgreSQL itself caps most at 1 GB; a server
#: that buffers messages whole should refuse far less)
MAX_MESSAGE = 64 << 20
_STARTUP_MAX = 10_000       # PostgreSQL's own MAX_STARTUP_PACKET_LENGTH


class ProtocolViolation(Exception):
    """The client broke the protocol (SQLSTATE 08P01); the connection is closed after the
    error is sent."""

    sqlstate = "08P01"


class _Reader:
    """Fields of one message body, each read checking the bytes are there."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str):
        self.buf = buf
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolViolation(f"{self.what} message is truncated")

    def int16(self) -> int:
        self._need(2)
        v = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def uint16(self) -> int:
        self._need(2)
        v = _U16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def int32(self) -> int:
        self._need(4)
        v = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def byte(self) -> str:
        self._need(1)
        v = self.buf[self.pos:self.pos + 1].decode("latin-1")
        self.pos += 1
        return v

    def bytes(self, n: int) -> bytes:
        self._need(n)
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def cstring(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise ProtocolViolation(f"{self.what} message: a string is not terminated")
        raw = self.buf[self.pos:end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation(f"{self.what} message: invalid UTF-8 in a string") from None

    def rest(self) -> bytes:
        v = self.buf[self.pos:]
        self.pos = len(self.buf)
        return v

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise ProtocolViolation(f"{self.what} message has {len(self.buf) - self.pos} bytes too many")


def _count(r: _Reader, what: str) -> int:
    n = r.int16()
    if n < 0:
        raise ProtocolViolation(f"{r.what} message: negative {what} count")
    return n


def _startup(body: bytes) -> m.Startup | m.SSLRequest | m.GSSENCRequest | m.CancelRequest:
    r = _Reader(body, "startup")
    code = r.int32()
    if code == m.SSL_REQUEST:
        r.end()
        return m.SSLRequest()
    if code == m.GSSENC_REQUEST:
        r.end()
        return m.GSSENCRequest()
    if code == m.CANCEL_REQUEST:
        pid, secret = r.int32(), r.int32()
        r.end()
        return m.CancelRequest(pid, secret)
    if code >> 16 != 3:
        raise ProtocolViolation(f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                                "this server speaks 3.0")
    params: dict[str, str] = {}
    while True:
        key = r.cstring()
        if not key:
            break
        params[key] = r.cstring()
    r.end()
    if "user" not in params:
        raise ProtocolViolation("no PostgreSQL user name specified in startup packet")
    return m.Startup(code, params)


def _parse(r: _Reader) -> m.Parse:
    name, sql = r.cstring(), r.cstring()
    oids = tuple(r.int32() & 0xFFFFFFFF for _ in range(_count(r, "parameter type")))
    return m.Parse(name, sql, oids)


def _bind(r: _Reader) -> m.Bind:
    portal, stmt = r.cstring(), r.cstring()
    formats = tuple(r.int16() for _ in range(_count(r, "parameter format")))
    n = _count(r, "parameter")
    params: list[bytes | None] = []
    for _ in range(n):
        size = r.int32()
        if size == -1:
            params.append(None)
        elif size < -1:
            raise ProtocolViolation("bind message: invalid parameter length")
        else:
            params.append(r.bytes(size))
    results = tuple(r.int16() for _ in range(_count(r, "result format")))
    if len(formats) not in (0, 1, n):
        raise ProtocolViolation(f"bind message has {len(formats)} parameter formats but {n} parameters")
    if any(f not in (0, 1) for f in formats + results):
        raise ProtocolViolation("unsupported format code (only 0 = text and 1 = binary)")
    return m.Bind(portal, stmt, formats, tuple(params), results)


def _describe_or_close(r: _Reader, cls):
    kind = r.byte()
    if kind not in ("S", "P"):
        raise ProtocolViolation(f"invalid {r.what} message subtype {kind!r}")
    return cls(kind, r.cstring())


def _body(kind: str, body: bytes):
    r = _Reader(body, {"Q": "query", "P": "parse", "B": "bind", "D": "describe", "E": "execute",
                       "C": "close", "d": "CopyData", "f": "CopyFail", "p": "password"}.get(kind, kind))
    if kind == "Q":
        msg = m.Query(r.cstring())
    elif kind == "P":
        msg = _parse(r)
    elif kind == "B":
        msg = _bind(r)
    elif kind == "D":
        msg = _describe_or_close(r, m.Describe)
    elif kind == "E":
        msg = m.Execute(r.cstring(), r.int32())
    elif kind == "C":
        msg = _describe_or_close(r, m.Close)
    elif kind == "S":
        msg = m.Sync()
    elif kind == "H":
        msg = m.Flush()
    elif kind == "X":
        msg = m.Terminate()
    elif kind == "d":
        return m.CopyData(r.rest())
    elif kind == "c":
        msg = m.CopyDone()
    elif kind == "f":
        msg = m.CopyFail(r.cstring())
    elif kind == "p":
        return m.PasswordData(r.rest())
    elif kind == "F":
        return m.FunctionCall(r.rest())
    else:
        raise ProtocolViolation(f"invalid frontend message type {ord(kind)}")
    r.end()
    return msg


class FrontendParser:
    """Incremental parser of what a client sends. ``feed(data)`` then ``next()`` until it
    returns ``None``. The first message is untyped (startup, SSL or cancel request); after an
    SSLRequest/GSSENCRequest the next one is untyped again; :meth:`started` switches to typed
    messages once the startup packet has been accepted."""

    def __init__(self, max_message: int = MAX_MESSAGE):
        self.max_message = max_message
        self._buf = bytearray()
        self._typed = False

    def started(self) -> None:
        self._typed = True

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def next(self):
        """The next complete message, or ``None`` when more bytes are needed."""
        buf = self._buf
        if not self._typed:
            if len(buf) < 4:
                return None
            size = _I32.unpack_from(buf, 0)[0]
            if size < 8 or size > _STARTUP_MAX:
                raise ProtocolViolation(f"invalid length of startup packet: {size}")
            if len(buf) < size:
                return None
            body = bytes(buf[4:size])
            del buf[:size]
            msg = _startup(body)
            return msg
        if len(buf) < 5:
            return None
        kind, size = _HDR.unpack_from(buf, 0)
        if size < 4:
            raise ProtocolViolation(f"invalid message length {size}")
        if size > self.max_message:
            raise ProtocolViolation(f"message of {size} bytes is over this server's limit of {self.max_message}")
        if len(buf) < size + 1:
            return None
        body = bytes(buf[5:size + 1])
        del buf[:size + 1]
        return _body(kind.decode("latin-1"), body)


# -- backend messages ----------------------------------------------------------------------------

def _msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _I32.pack(len(body) + 4) + body


def _cstr(s: str) -> bytes:
    return s.encode("utf-8").replace(b"\0", b"") + b"\0"


def auth_ok() -> bytes:
    return _msg(b"R", _I32.pack(0))


def auth_cleartext() -> bytes:
    return _msg(b"R", _I32.pack(3))


def auth_sasl(mechanisms: list[str]) -> bytes:
    return _msg(b"R", _I32.pack(10) + b"".join(_cstr(x) for x in mechanisms) + b"\0")


def auth_sasl_continue(data: bytes) -> bytes:
    return _msg(b"R", _I32.pack(11) + data)


def auth_sasl_final(data: bytes) -> bytes:
    return _msg(b"R", _I32.pack(12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return _msg(b"S", _cstr(name) + _cstr(value))


def backend_key_data(pid: int, secret: int) -> bytes:
    return _msg(b"K", _I32.pack(pid) + _I32.pack(secret))


def ready_for_query(status: str) -> bytes:
    """``status``: ``I`` idle, ``T`` in a transaction block, ``E`` in a failed block."""
    return _msg(b"Z", status.encode("ascii"))


def row_description(fields: list[tuple[str, int, int, int, int]]) -> bytes:
    """``fields``: ``(name, type oid, type size, type modifier, format)`` per column."""
    out = [_U16.pack(len(fields))]
    for name, oid, size, mod, fmt in fields:
        out.append(_cstr(name) + struct.pack("!iHIhih", 0, 0, oid, size, mod, fmt))
    return _msg(b"T", b"".join(out))


def data_row(values: list[bytes | None]) -> bytes:
    parts = [_U16.pack(len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(v)))
            parts.append(v)
    body = b"".join(parts)
    return b"D" + _I32.pack(len(body) + 4) + body


def command_complete(tag: str) -> bytes:
    return _msg(b"C", _cstr(tag))


def empty_query() -> bytes:
    return _msg(b"I")


def parse_complete() -> bytes:
    return _msg(b"1")


def bind_complete() -> bytes:
    return _msg(b"2")


def close_complete() -> bytes:
    return _msg(b"3")


def no_data() -> bytes:
    return _msg(b"n")


def portal_suspended() -> bytes:
    return _msg(b"s")


def parameter_description(oids: list[int]) -> bytes:
    return _msg(b"t", _U16.pack(len(oids)) + b"".join(struct.pack("!I", o) for o in oids))


def copy_in_response(columns: int, binary: bool = False) -> bytes:
    fmt = 1 if binary else 0
    return _msg(b"G", struct.pack("!bH", fmt, columns) + _U16.pack(fmt) * columns)


def copy_out_response(columns: int, binary: bool = False) -> bytes:
    fmt = 1 if binary else 0
    return _msg(b"H", struct.pack("!bH", fmt, columns) + _U16.pack(fmt) * columns)


def copy_data(data: bytes) -> bytes:
    return _msg(b"d", data)


def copy_done() -> bytes:
    return _msg(b"c")


def _fields(severity: str, code: str, message: str, detail: str | None, hint: str | None,
            position: int | None) -> bytes:
    parts = [b"S" + _cstr(severity), b"V" + _cstr(severity), b"C" + _cstr(code), b"M" + _cstr(message)]
    if detail:
        parts.append(b"D" + _cstr(detail))
    if hint:
        parts.append(b"H" + _cstr(hint))
    if position:
        parts.append(b"P" + _cstr(str(position)))
    return b"".join(parts) + b"\0"


def error_response(code: str, message: str, detail: str | None = None, hint: str | None = None,
                   position: int | None = None, severity: str = "ERROR") -> bytes:
    """``position``: 1-based character offset into the statement, as PostgreSQL reports it."""
    return _msg(b"E", _fields(severity, code, message, detail, hint, position))


def notice_response(message: str, code: str = "00000", severity: str = "NOTICE",
                    detail: str | None = None) -> bytes:
    return _msg(b"N", _fields(severity, code, message, detail, None, None))


def ssl_answer(accept: bool) -> bytes:
    """The one-byte answer to an SSLRequest / GSSENCRequest."""
    return b"S" if accept else b"N"


# -- frontend messages (used by tests and by the fuzzer to build valid input) --------------------

def frontend(msg) -> bytes:
    """The bytes a client sends for ``msg`` (the inverse of :class:`FrontendParser`)."""
    if isinstance(msg, m.Startup):
        body = _I32.pack(msg.version) + b"".join(_cstr(k) + _cstr(v) for k, v in msg.params.items()) + b"\0"
        return _I32.pack(len(body) + 4) + body
    if isinstance(msg, m.SSLRequest):
        return _I32.pack(8) + _I32.pack(m.SSL_REQUEST)
    if isinstance(msg, m.GSSENCRequest):
        return _I32.pack(8) + _I32.pack(m.GSSENC_REQUEST)
    if isinstance(msg, m.CancelRequest):
        return _I32.pack(16) + _I32.pack(m.CANCEL_REQUEST) + _I32.pack(msg.pid) + _I32.pack(msg.secret)
    if isinstance(msg, m.Query):
        return _msg(b"Q", _cstr(msg.sql))
    if isinstance(msg, m.Parse):
        return _msg(b"P", _cstr(msg.name) + _cstr(msg.sql) + _I16.pack(len(msg.param_oids))
                    + b"".join(struct.pack("!I", o) for o in msg.param_oids))
    if isinstance(msg, m.Bind):
        body = [_cstr(msg.portal), _cstr(msg.statement), _I16.pack(len(msg.param_formats))]
        body += [_I16.pack(f) for f in msg.param_formats]
        body.append(_I16.pack(len(msg.params)))
        for p in msg.params:
            body.append(b"\xff\xff\xff\xff" if p is None else _I32.pack(len(p)) + p)
        body.append(_I16.pack(len(msg.result_formats)))
        body += [_I16.pack(f) for f in msg.result_formats]
        return _msg(b"B", b"".join(body))
    if isinstance(msg, m.Describe):
        return _msg(b"D", msg.kind.encode() + _cstr(msg.name))
    if isinstance(msg, m.Execute):
        return _msg(b"E", _cstr(msg.portal) + _I32.pack(msg.max_rows))
    if isinstance(msg, m.Close):
        return _msg(b"C", msg.kind.encode() + _cstr(msg.name))
    if isinstance(msg, m.Sync):
        return _msg(b"S")
    if isinstance(msg, m.Flush):
        return _msg(b"H")
    if isinstance(msg, m.CopyData):
        return _msg(b"d", msg.data)
    if isinstance(msg, m.CopyDone):
        return _msg(b"c")
    if isinstance(msg, m.CopyFail):
        return _msg(b"f", _cstr(msg.message))
    if isinstance(msg, m.Terminate):
        return _msg(b"X")
    if isinstance(msg, m.PasswordData):
        return _msg(b"p", msg.data)
    raise TypeError(f"not a frontend message: {msg!r}")


def backend_messages(data: bytes) -> list[tuple[str, bytes]]:
    """Split backend bytes into ``(type, body)`` pairs (for tests)."""
    out = []
    pos = 0
    while pos + 5 <= len(data):
        kind, size = _HDR.unpack_from(data, pos)
        out.append((kind.decode("latin-1"), data[pos + 5:pos + 1 + size]))
        pos += size + 1
    return out
