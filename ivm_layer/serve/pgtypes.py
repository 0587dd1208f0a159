"""Column types on the wire: DuckDB types → PostgreSQL type OIDs, values → text and binary.

:func:`pg_type` maps a DuckDB column type (``BIGINT``, ``DECIMAL(12,2)``, ``TIMESTAMP WITH
TIME ZONE``, ``INTEGER[]`` …) to the PostgreSQL type a client sees: ``(oid, typlen,
typmod)``. Each OID has a text encoder (PostgreSQL's output format: ``t``/``f``, ``Infinity``,
``\\x…`` bytea, ``1 day 02:00:00`` intervals, ``{1,2}`` arrays) and, for the common types, a
binary encoder (PostgreSQL's send format: what asyncpg and JDBC ask for). Parameters arrive
the other way: :func:`decode_param` turns text or binary bytes of a given OID into the Python
value DuckDB binds; an unknown OID (0) stays text, so DuckDB coerces it where it is used, as
PostgreSQL does with ``unknown`` literals.

Types without a PostgreSQL counterpart (``STRUCT``, ``MAP``, ``UNION``, ``BIT``, enums …) are
sent as ``text`` in their DuckDB rendering. Cost: one dict lookup and one Python call per
value.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
import struct
import uuid
from collections.abc import Callable

from ..engine.temporal import is_infinite

BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 18, 19, 20, 21, 23, 25, 26
JSON, FLOAT4, FLOAT8, UNKNOWN, BPCHAR, VARCHAR = 114, 700, 701, 705, 1042, 1043
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, TIMETZ, NUMERIC, UUID, JSONB = \
    1082, 1083, 1114, 1184, 1186, 1266, 1700, 2950, 3802
REGCLASS, REGTYPE, REGPROC, XID, INT2VECTOR, OIDVECTOR, ANY = 2205, 2206, 24, 28, 22, 30, 2276

#: element OID → array OID
ARRAY_OF = {BOOL: 1000, BYTEA: 1001, CHAR: 1002, NAME: 1003, INT2: 1005, INT4: 1007, TEXT: 1009,
            VARCHAR: 1015, INT8: 1016, FLOAT4: 1021, FLOAT8: 1022, OID: 1028, DATE: 1182,
            TIME: 1183, TIMESTAMP: 1115, TIMESTAMPTZ: 1185, INTERVAL: 1187, NUMERIC: 1231,
            UUID: 2951, JSON: 199, JSONB: 3807, BPCHAR: 1014}
ELEMENT_OF = {a: e for e, a in ARRAY_OF.items()}

#: oid → (typname, typlen) as pg_type has them
TYPES = {BOOL: ("bool", 1), BYTEA: ("bytea", -1), CHAR: ("char", 1), NAME: ("name", 64),
         INT8: ("int8", 8), INT2: ("int2", 2), INT4: ("int4", 4), TEXT: ("text", -1),
         OID: ("oid", 4), JSON: ("json", -1), FLOAT4: ("float4", 4), FLOAT8: ("float8", 8),
         UNKNOWN: ("unknown", -2), BPCHAR: ("bpchar", -1), VARCHAR: ("varchar", -1),
         DATE: ("date", 4), TIME: ("time", 8), TIMESTAMP: ("timestamp", 8),
         TIMESTAMPTZ: ("timestamptz", 8), INTERVAL: ("interval", 16), TIMETZ: ("timetz", 12),
         NUMERIC: ("numeric", -1), UUID: ("uuid", 16), JSONB: ("jsonb", -1),
         REGCLASS: ("regclass", 4), REGTYPE: ("regtype", 4), REGPROC: ("regproc", 4),
         XID: ("xid", 4), INT2VECTOR: ("int2vector", -1), OIDVECTOR: ("oidvector", -1)}
for _e, _a in ARRAY_OF.items():
    TYPES[_a] = ("_" + TYPES[_e][0], -1)

#: PostgreSQL's SQL names (what format_type prints) per OID
SQL_NAMES = {BOOL: "boolean", INT2: "smallint", INT4: "integer", INT8: "bigint", FLOAT4: "real",
             FLOAT8: "double precision", VARCHAR: "character varying", BPCHAR: "character",
             TIMESTAMP: "timestamp without time zone", TIMESTAMPTZ: "timestamp with time zone",
             TIME: "time without time zone", TIMETZ: "time with time zone", NUMERIC: "numeric"}

_DUCK = {"BOOLEAN": BOOL, "BOOL": BOOL, "TINYINT": INT2, "SMALLINT": INT2, "INTEGER": INT4,
         "INT": INT4, "BIGINT": INT8, "UTINYINT": INT2, "USMALLINT": INT4, "UINTEGER": INT8,
         "UBIGINT": NUMERIC, "HUGEINT": NUMERIC, "UHUGEINT": NUMERIC, "VARINT": NUMERIC,
         "BIGNUM": NUMERIC, "FLOAT": FLOAT4, "REAL": FLOAT4, "DOUBLE": FLOAT8,
         "VARCHAR": VARCHAR, "TEXT": TEXT, "STRING": TEXT, "BLOB": BYTEA, "BYTEA": BYTEA,
         "DATE": DATE, "TIME": TIME, "TIMESTAMP": TIMESTAMP, "DATETIME": TIMESTAMP,
         "TIMESTAMP_S": TIMESTAMP, "TIMESTAMP_MS": TIMESTAMP, "TIMESTAMP_NS": TIMESTAMP,
         "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ, "TIMESTAMPTZ": TIMESTAMPTZ,
         "TIME WITH TIME ZONE": TIMETZ, "TIMETZ": TIMETZ, "INTERVAL": INTERVAL, "UUID": UUID,
         "JSON": JSON, "NULL": TEXT, '"NULL"': TEXT}
_DECIMAL = re.compile(r"(?:DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)", re.IGNORECASE)
_VARCHAR_N = re.compile(r"VARCHAR\s*\(\s*(\d+)\s*\)", re.IGNORECASE)


def pg_type(duck_type: str) -> tuple[int, int, int]:
    """``(oid, typlen, typmod)`` of a DuckDB column type."""
    t = duck_type.strip()
    if t.endswith("[]"):
        elem = pg_type(t[:-2])[0]
        return ARRAY_OF.get(elem, TEXT), -1, -1
    up = t.upper()
    oid = _DUCK.get(up)
    if oid is not None:
        return oid, TYPES[oid][1], -1
    if d := _DECIMAL.fullmatch(t):
        return NUMERIC, -1, ((int(d.group(1)) << 16) | int(d.group(2))) + 4
    if up in ("DECIMAL", "NUMERIC"):
        return NUMERIC, -1, -1
    if v := _VARCHAR_N.fullmatch(t):
        return VARCHAR, -1, int(v.group(1)) + 4
    return TEXT, -1, -1


def format_type(oid: int, typmod: int = -1) -> str:
    """PostgreSQL's ``format_type(oid, typmod)``."""
    if oid in ELEMENT_OF:
        return format_type(ELEMENT_OF[oid], typmod) + "[]"
    name = SQL_NAMES.get(oid) or TYPES.get(oid, ("text", -1))[0]
    if oid == NUMERIC and typmod >= 4:
        return f"numeric({(typmod - 4) >> 16},{(typmod - 4) & 0xFFFF})"
    if oid in (VARCHAR, BPCHAR) and typmod >= 4:
        return f"{name}({typmod - 4})"
    return name


# -- text output -------------------------------------------------------------------------------

def _float8_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    s = repr(v)
    return s.removesuffix(".0")


_F4 = struct.Struct("!f")


def _float4_text(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return _float8_text(v)
    want = _F4.pack(v)
    for digits in range(6, 10):
        s = f"{v:.{digits}g}"
        if _F4.pack(float(s)) == want:
            break
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{exp[0]}{exp[1:].lstrip('0').rjust(2, '0')}"
    return s


def _frac(us: int) -> str:
    return f".{us:06d}".rstrip("0") if us else ""


def _time_text(v) -> str:
    return f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}{_frac(v.microsecond)}"


def _offset_text(off: _dt.timedelta) -> str:
    secs = int(off.total_seconds())
    sign = "-" if secs < 0 else "+"
    secs = abs(secs)
    h, rem = divmod(secs, 3600)
    mi, s = divmod(rem, 60)
    out = f"{sign}{h:02d}"
    if mi or s:
        out += f":{mi:02d}"
    if s:
        out += f":{s:02d}"
    return out


def _year(d) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def _timestamp_text(v) -> str:
    if isinstance(v, _dt.datetime) and not is_infinite(v):
        out = f"{_year(v)} {_time_text(v)}"
        if v.tzinfo is not None:
            out += _offset_text(v.utcoffset())
        return out
    return str(v)   # DuckDB's infinity and other out-of-range values arrive as text


def _timestamptz_text(v) -> str:
    if isinstance(v, _dt.datetime) and not is_infinite(v):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.UTC)
        return _timestamp_text(v.astimezone(_dt.UTC))
    return str(v)


def _interval_text(v) -> str:
    if not isinstance(v, _dt.timedelta):
        return str(v)
    if v < _dt.timedelta(0):
        neg = -v
        if neg.days == 0:
            return "-" + _interval_text(neg)
    days, secs, us = v.days, v.seconds, v.microseconds
    parts = []
    if days:
        parts.append(f"{days} day" + ("s" if abs(days) != 1 else ""))
    if secs or us or not days:
        h, rem = divmod(secs, 3600)
        mi, s = divmod(rem, 60)
        parts.append(f"{h:02d}:{mi:02d}:{s:02d}{_frac(us)}")
    return " ".join(parts)


def _numeric_text(v) -> str:
    if isinstance(v, decimal.Decimal):
        if v.is_nan():
            return "NaN"
        if v.is_infinite():
            return "Infinity" if v > 0 else "-Infinity"
        return format(v, "f")
    return str(v)


def _bool_text(v) -> str:
    return "t" if v else "f"


def _bytea_text(v) -> str:
    return "\\x" + bytes(v).hex()


def _text(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _bytea_text(v)
    if isinstance(v, bool):
        return _bool_text(v)
    if isinstance(v, float):
        return _float8_text(v)
    if isinstance(v, _dt.datetime):
        return _timestamp_text(v)
    if isinstance(v, _dt.date):
        return _year(v)
    if isinstance(v, _dt.time):
        return _time_text(v)
    if isinstance(v, _dt.timedelta):
        return _interval_text(v)
    if isinstance(v, decimal.Decimal):
        return _numeric_text(v)
    if isinstance(v, (list, tuple)):
        return _array_text(v, _text)
    return str(v)


_NEEDS_QUOTE = re.compile(r'[{},"\\\s]|^$|^null$', re.IGNORECASE)


def _array_text(values, elem: Callable) -> str:
    out = []
    for x in values:
        if x is None:
            out.append("NULL")
        elif isinstance(x, (list, tuple)):
            out.append(_array_text(x, elem))
        else:
            s = elem(x)
            if _NEEDS_QUOTE.search(s):
                s = '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out.append(s)
    return "{" + ",".join(out) + "}"


_TEXT_OUT: dict[int, Callable] = {
    BOOL: _bool_text, INT2: str, INT4: str, INT8: str, OID: str, FLOAT4: _float4_text,
    FLOAT8: _float8_text, NUMERIC: _numeric_text, BYTEA: _bytea_text, DATE: lambda v: _year(v)
    if isinstance(v, _dt.date) and not is_infinite(v) else str(v), TIME: _time_text, TIMESTAMP: _timestamp_text,
    TIMESTAMPTZ: _timestamptz_text, INTERVAL: _interval_text, UUID: str, TEXT: _text,
    VARCHAR: _text, BPCHAR: _text, NAME: _text, JSON: _text, JSONB: _text, CHAR: _text,
}


def text_encoder(oid: int) -> Callable[[object], bytes]:
    """``value → bytes`` in PostgreSQL's text output format for type ``oid``."""
    if oid in ELEMENT_OF:
        elem = _TEXT_OUT.get(ELEMENT_OF[oid], _text)
        return lambda v: _array_text(v, elem).encode() if isinstance(v, (list, tuple)) else _text(v).encode()
    f = _TEXT_OUT.get(oid, _text)
    if f is str:
        return lambda v: str(v).encode()
    return lambda v: f(v).encode("utf-8")


# -- binary output -----------------------------------------------------------------------------

_EPOCH_DATE = _dt.date(2000, 1, 1)
_EPOCH = _dt.datetime(2000, 1, 1)
_EPOCH_TZ = _dt.datetime(2000, 1, 1, tzinfo=_dt.UTC)
_NBASE = 10000


def _numeric_send(v) -> bytes:
    d = decimal.Decimal(v)
    if d.is_nan():
        return struct.pack("!hhHH", 0, 0, 0xC000, 0)
    if d.is_infinite():
        return struct.pack("!hhHH", 0, 0, 0xD000 if d > 0 else 0xF000, 0)
    sign, digits, exp = d.as_tuple()
    dscale = max(0, -exp)
    s = "".join(map(str, digits))
    if exp > 0:
        s += "0" * exp
        int_part, frac_part = s, ""
    else:
        cut = len(s) + exp
        int_part = s[:cut] if cut > 0 else ""
        frac_part = ("0" * -cut + s) if cut < 0 else s[cut:]
    int_part = int_part.lstrip("0")
    pad_i = (-len(int_part)) % 4
    int_part = "0" * pad_i + int_part
    pad_f = (-len(frac_part)) % 4
    frac_part = frac_part + "0" * pad_f
    groups = [int(int_part[i:i + 4]) for i in range(0, len(int_part), 4)] + \
             [int(frac_part[i:i + 4]) for i in range(0, len(frac_part), 4)]
    weight = len(int_part) // 4 - 1
    while groups and groups[0] == 0:       # leading zero groups (0.001 → weight -1)
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHH{len(groups)}H", len(groups), weight, 0x4000 if sign else 0, dscale, *groups)


def _date_send(v) -> bytes:
    if is_infinite(v):   # PostgreSQL's DATEVAL_NOEND / DATEVAL_NOBEGIN
        return struct.pack("!i", 2**31 - 1 if v > _EPOCH_DATE else -(2**31))
    return struct.pack("!i", (v - _EPOCH_DATE).days)


def _us(td: _dt.timedelta) -> int:
    return (td.days * 86400 + td.seconds) * 1_000_000 + td.microseconds


def _timestamp_send(v) -> bytes:
    if is_infinite(v):   # PostgreSQL's DT_NOEND / DT_NOBEGIN
        return _infinite_ts(v)
    if v.tzinfo is not None:
        v = v.astimezone(_dt.UTC).replace(tzinfo=None)
    return struct.pack("!q", _us(v - _EPOCH))


def _infinite_ts(v) -> bytes:
    return struct.pack("!q", 2**63 - 1 if str(v) == "infinity" else -(2**63))


def _timestamptz_send(v) -> bytes:
    if is_infinite(v):
        return _infinite_ts(v)
    if v.tzinfo is None:
        v = v.replace(tzinfo=_dt.UTC)
    return struct.pack("!q", _us(v - _EPOCH_TZ))


def _time_send(v) -> bytes:
    return struct.pack("!q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond)


def _interval_send(v) -> bytes:
    return struct.pack("!qii", v.seconds * 1_000_000 + v.microseconds, v.days, 0)


_BIN_OUT: dict[int, Callable[[object], bytes]] = {
    BOOL: lambda v: b"\x01" if v else b"\x00",
    INT2: struct.Struct("!h").pack, INT4: struct.Struct("!i").pack, INT8: struct.Struct("!q").pack,
    OID: struct.Struct("!I").pack, FLOAT4: struct.Struct("!f").pack, FLOAT8: struct.Struct("!d").pack,
    NUMERIC: _numeric_send, TEXT: lambda v: _text(v).encode(), VARCHAR: lambda v: _text(v).encode(),
    BPCHAR: lambda v: _text(v).encode(), NAME: lambda v: _text(v).encode(),
    JSON: lambda v: _text(v).encode(), JSONB: lambda v: b"\x01" + _text(v).encode(),
    BYTEA: bytes, DATE: _date_send, TIME: _time_send, TIMESTAMP: _timestamp_send,
    TIMESTAMPTZ: _timestamptz_send, INTERVAL: _interval_send,
    UUID: lambda v: (v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))).bytes,
}


def _array_send(elem_oid: int, enc: Callable) -> Callable[[object], bytes]:
    def send(values) -> bytes:
        values = list(values)
        has_null = any(x is None for x in values)
        out = [struct.pack("!iiIii", 1 if values else 0, int(has_null), elem_oid, len(values), 1)
               if values else struct.pack("!iiI", 0, 0, elem_oid)]
        for x in values:
            if x is None:
                out.append(b"\xff\xff\xff\xff")
            else:
                b = enc(x)
                out.append(struct.pack("!i", len(b)) + b)
        return b"".join(out)
    return send


def binary_encoder(oid: int) -> Callable[[object], bytes] | None:
    """``value → bytes`` in PostgreSQL's binary send format, or ``None`` (send text)."""
    if oid in ELEMENT_OF:
        elem = ELEMENT_OF[oid]
        enc = _BIN_OUT.get(elem)
        return _array_send(elem, enc) if enc is not None else None
    return _BIN_OUT.get(oid)


def has_binary(oid: int) -> bool:
    return binary_encoder(oid) is not None


# -- parameters in -----------------------------------------------------------------------------

_TRUE = {"t", "true", "1", "on", "yes", "y"}


def _ts_in(s: str) -> _dt.datetime:
    s = s.strip()
    if s.endswith(("+00", "-00")) or re.search(r"[+-]\d\d$", s):
        s += ":00"
    return _dt.datetime.fromisoformat(s)


def _bytea_in(s: str) -> bytes:
    if s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    return s.encode("latin-1").decode("unicode_escape").encode("latin-1")


_TEXT_IN: dict[int, Callable[[str], object]] = {
    BOOL: lambda s: s.strip().lower() in _TRUE, INT2: int, INT4: int, INT8: int, OID: int,
    FLOAT4: float, FLOAT8: float, NUMERIC: decimal.Decimal, DATE: _dt.date.fromisoformat,
    TIMESTAMP: _ts_in, TIMESTAMPTZ: _ts_in, TIME: _dt.time.fromisoformat, UUID: uuid.UUID,
    BYTEA: _bytea_in,
}


def _numeric_recv(b: bytes) -> decimal.Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHH", b)
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    if sign in (0xD000, 0xF000):
        return decimal.Decimal("Infinity" if sign == 0xD000 else "-Infinity")
    digits = struct.unpack_from(f"!{ndigits}H", b, 8)
    value = 0
    for d in digits:
        value = value * _NBASE + d
    exp = (weight - ndigits + 1) * 4
    out = decimal.Decimal(value).scaleb(exp)
    out = out.quantize(decimal.Decimal(1).scaleb(-dscale)) if dscale or exp < 0 else out
    return -out if sign == 0x4000 else out


_BIN_IN: dict[int, Callable[[bytes], object]] = {
    BOOL: lambda b: b != b"\x00", INT2: lambda b: struct.unpack("!h", b)[0],
    INT4: lambda b: struct.unpack("!i", b)[0], INT8: lambda b: struct.unpack("!q", b)[0],
    OID: lambda b: struct.unpack("!I", b)[0], FLOAT4: lambda b: struct.unpack("!f", b)[0],
    FLOAT8: lambda b: struct.unpack("!d", b)[0], NUMERIC: _numeric_recv, BYTEA: bytes,
    DATE: lambda b: _EPOCH_DATE + _dt.timedelta(days=struct.unpack("!i", b)[0]),
    TIMESTAMP: lambda b: _EPOCH + _dt.timedelta(microseconds=struct.unpack("!q", b)[0]),
    TIMESTAMPTZ: lambda b: _EPOCH_TZ + _dt.timedelta(microseconds=struct.unpack("!q", b)[0]),
    TIME: lambda b: (_dt.datetime.min + _dt.timedelta(microseconds=struct.unpack("!q", b)[0])).time(),
    INTERVAL: lambda b: _interval_recv(*struct.unpack("!qii", b)),
    UUID: lambda b: uuid.UUID(bytes=bytes(b)),
    JSONB: lambda b: bytes(b[1:]).decode(),
}


def _interval_recv(us: int, days: int, months: int) -> _dt.timedelta:
    return _dt.timedelta(days=days + 30 * months, microseconds=us)


class ParamError(ValueError):
    """A parameter's bytes are not a value of its declared type (SQLSTATE 22P02)."""


def decode_param(oid: int, fmt: int, raw: bytes | None):
    """The Python value of one Bind parameter (``fmt`` 0 text, 1 binary)."""
    if raw is None:
        return None
    try:
        if fmt == 0:
            s = raw.decode("utf-8")
            f = _TEXT_IN.get(oid)
            if f is None and oid in ELEMENT_OF:
                return _array_text_in(s, _TEXT_IN.get(ELEMENT_OF[oid], str))
            return f(s) if f is not None else s
        f = _BIN_IN.get(oid)
        if f is not None:
            return f(raw)
        if oid in ELEMENT_OF and (ef := _BIN_IN.get(ELEMENT_OF[oid])) is not None:
            return _array_recv(raw, ef)
        if oid in (TEXT, VARCHAR, BPCHAR, NAME, JSON, UNKNOWN, 0):
            return raw.decode("utf-8")
    except (ValueError, struct.error, decimal.InvalidOperation, UnicodeDecodeError, OverflowError) as e:
        raise ParamError(f"invalid input for parameter of type {TYPES.get(oid, ('oid ' + str(oid),))[0]}: "
                         f"{e}") from None
    raise ParamError(f"binary format of type {TYPES.get(oid, ('oid ' + str(oid),))[0]} is not supported "
                     "for parameters; send it as text")


def _array_text_in(s: str, elem: Callable[[str], object]) -> list:
    """PostgreSQL's array text ``{1,NULL,"a b",{2,3}}`` → a (nested) list."""
    pos = 0

    def parse() -> list:
        nonlocal pos
        if s[pos] != "{":
            raise ValueError(f"malformed array literal: {s!r}")
        pos += 1
        out: list = []
        if s[pos] == "}":
            pos += 1
            return out
        while True:
            if s[pos] == "{":
                out.append(parse())
            elif s[pos] == '"':
                pos += 1
                buf = []
                while s[pos] != '"':
                    if s[pos] == "\\":
                        pos += 1
                    buf.append(s[pos])
                    pos += 1
                pos += 1
                out.append(elem("".join(buf)))
            else:
                end = pos
                while s[end] not in ",}":
                    end += 1
                tok = s[pos:end].strip()
                out.append(None if tok.upper() == "NULL" else elem(tok))
                pos = end
            if s[pos] == ",":
                pos += 1
                continue
            if s[pos] == "}":
                pos += 1
                return out
            raise ValueError(f"malformed array literal: {s!r}")
    try:
        return parse()
    except IndexError:
        raise ValueError(f"malformed array literal: {s!r}") from None


def _array_recv(b: bytes, elem: Callable) -> list:
    ndim, _flags, _oid = struct.unpack_from("!iiI", b)
    if ndim == 0:
        return []
    if ndim != 1:
        raise ValueError("only one-dimensional arrays are supported")
    n, _lb = struct.unpack_from("!ii", b, 12)
    pos = 20
    out = []
    for _ in range(n):
        size = struct.unpack_from("!i", b, pos)[0]
        pos += 4
        if size < 0:
            out.append(None)
        else:
            out.append(elem(b[pos:pos + size]))
            pos += size
    return out


def sql_type(oid: int) -> str | None:
    """The DuckDB type to cast a parameter of ``oid`` to (``None``: leave it untyped)."""
    return {BOOL: "BOOLEAN", INT2: "SMALLINT", INT4: "INTEGER", INT8: "BIGINT", FLOAT4: "FLOAT",
            FLOAT8: "DOUBLE", NUMERIC: "DECIMAL(38,10)", DATE: "DATE", TIME: "TIME",
            TIMESTAMP: "TIMESTAMP", TIMESTAMPTZ: "TIMESTAMPTZ", INTERVAL: "INTERVAL", UUID: "UUID",
            BYTEA: "BLOB", TEXT: "VARCHAR", VARCHAR: "VARCHAR"}.get(oid)


def coerce(value, duck_type: str | None):
    """A value as the engine keys it: text from the wire (an untyped parameter, a string
    literal) read as a value of ``duck_type``; anything else unchanged."""
    if not isinstance(value, str) or duck_type is None:
        return value
    oid = pg_type(duck_type)[0]
    if oid in (TEXT, VARCHAR, BPCHAR, NAME, JSON):
        return value
    try:
        return decode_param(oid, 0, value.encode())
    except ParamError as e:
        from .sqlstate import ServeError

        raise ServeError("22P02", str(e)) from None
