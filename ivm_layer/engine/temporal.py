"""``'infinity'`` and ``'-infinity'`` of DATE, TIMESTAMP and TIMESTAMPTZ inside the engine.

DuckDB and PostgreSQL have both infinities for these types, above (below) every finite value
and distinct from 9999-12-31 / 0001-01-01. Python's ``date``/``datetime`` have no such values
(DuckDB's Python client hands back ``date.max``/``datetime.max``, merging them with real
values), so the engine holds six singletons: :data:`DATE_INF`, :data:`DATE_NEG_INF`,
:data:`TS_INF`, :data:`TS_NEG_INF`, :data:`TSTZ_INF`, :data:`TSTZ_NEG_INF`. Each is an
instance of ``date`` / ``datetime`` (naive, or aware in UTC for TIMESTAMPTZ) so type checks
keep working, but compares above (below) every finite value of its type, equals only itself,
hashes apart from every finite value, pickles back to itself and prints as ``infinity`` /
``-infinity`` (what :func:`sql_text` gives the backend). Comparisons cost one extra Python call
only when an infinity is involved; finite values are untouched.

Entry: :func:`parse` turns the text of a temporal value (``'infinity'``, ISO text) into the
engine's value (O(1) per value); exit: :func:`sql_text` and :func:`arrow_int`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any


class _Infinite:
    """Comparison, hashing and text of an infinity (mixed in before ``date``/``datetime``)."""

    __slots__ = ()
    _sign = 0
    _kind = ""

    def __eq__(self, o: object) -> bool:
        return o is self or (isinstance(o, _Infinite) and o._sign == self._sign and o._kind == self._kind)

    def __ne__(self, o: object) -> bool:
        return not self.__eq__(o)

    def __hash__(self) -> int:
        return hash(("ivm_layer", "infinity", self._kind, self._sign))

    def _cmp(self, o: Any) -> int | None:
        """-1/0/1 of self against ``o``, None when ``o`` is not a value of a temporal type."""
        if self.__eq__(o):
            return 0
        if isinstance(o, _Infinite):
            return -1 if self._sign < o._sign else 1
        if isinstance(o, date):
            return self._sign
        return None

    def __lt__(self, o: Any):
        c = self._cmp(o)
        return NotImplemented if c is None else c < 0

    def __le__(self, o: Any):
        c = self._cmp(o)
        return NotImplemented if c is None else c <= 0

    def __gt__(self, o: Any):
        c = self._cmp(o)
        return NotImplemented if c is None else c > 0

    def __ge__(self, o: Any):
        c = self._cmp(o)
        return NotImplemented if c is None else c >= 0

    def __add__(self, o: Any):   # infinity ± an interval stays infinity (DuckDB, PostgreSQL)
        return self

    __radd__ = __add__

    def __sub__(self, o: Any):
        return self

    def __str__(self) -> str:
        return "infinity" if self._sign > 0 else "-infinity"

    def isoformat(self, *args: Any) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"{self._kind}({str(self)!r})"

    def __reduce__(self):
        return (infinity, (self._kind, self._sign))

    def __reduce_ex__(self, protocol: Any):
        return (infinity, (self._kind, self._sign))


class _DateInf(_Infinite, date):
    __slots__ = ()
    _kind = "DATE"

    def __new__(cls):
        return date.__new__(cls, *((9999, 12, 31) if cls._sign > 0 else (1, 1, 1)))


class _PosDate(_DateInf):
    __slots__ = ()
    _sign = 1


class _NegDate(_DateInf):
    __slots__ = ()
    _sign = -1


class _TsInf(_Infinite, datetime):
    __slots__ = ()
    _kind = "TIMESTAMP"
    _tz: Any = None

    def __new__(cls):
        if cls._sign > 0:
            return datetime.__new__(cls, 9999, 12, 31, 23, 59, 59, 999999, tzinfo=cls._tz)
        return datetime.__new__(cls, 1, 1, 1, tzinfo=cls._tz)


class _PosTs(_TsInf):
    __slots__ = ()
    _sign = 1


class _NegTs(_TsInf):
    __slots__ = ()
    _sign = -1


class _PosTsTz(_TsInf):
    __slots__ = ()
    _sign = 1
    _kind = "TIMESTAMPTZ"
    _tz = UTC


class _NegTsTz(_TsInf):
    __slots__ = ()
    _sign = -1
    _kind = "TIMESTAMPTZ"
    _tz = UTC


DATE_INF, DATE_NEG_INF = _PosDate(), _NegDate()
TS_INF, TS_NEG_INF = _PosTs(), _NegTs()
TSTZ_INF, TSTZ_NEG_INF = _PosTsTz(), _NegTsTz()

_BY_KEY = {(v._kind, v._sign): v for v in (DATE_INF, DATE_NEG_INF, TS_INF, TS_NEG_INF, TSTZ_INF, TSTZ_NEG_INF)}


def infinity(kind: str, sign: int) -> _Infinite:
    """The engine's infinity of ``kind`` (``DATE``, ``TIMESTAMP``, ``TIMESTAMPTZ``) and sign."""
    return _BY_KEY[(kind, 1 if sign > 0 else -1)]


def is_infinite(v: object) -> bool:
    return isinstance(v, _Infinite)


def kind_of(sql_type: str) -> str | None:
    """``DATE`` / ``TIMESTAMP`` / ``TIMESTAMPTZ`` for a backend type name that has infinities."""
    t = sql_type.strip().upper()
    if t == "DATE":
        return "DATE"
    if t in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"):
        return "TIMESTAMPTZ"
    if t in ("TIMESTAMP", "TIMESTAMP WITHOUT TIME ZONE", "DATETIME"):
        return "TIMESTAMP"
    return None


def parse(kind: str, text: str | None) -> Any:
    """The engine's value of a temporal value's text (``None`` stays ``None``)."""
    if text is None:
        return None
    if text == "infinity":
        return infinity(kind, 1)
    if text == "-infinity":
        return infinity(kind, -1)
    if kind == "DATE":
        return date.fromisoformat(text)
    v = datetime.fromisoformat(text)
    return v


def sql_text(v: Any) -> str | None:
    """The text the backend casts back to the same value (``None`` stays ``None``)."""
    if v is None:
        return None
    return str(v) if isinstance(v, _Infinite) else v.isoformat()


_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)
_EPOCH_TZ = datetime(1970, 1, 1, tzinfo=UTC)
#: how DuckDB (and Arrow's date32 / timestamp[us] as DuckDB exports them) stores the infinities
_DAYS_INF = 2**31 - 1
_MICROS_INF = 2**63 - 1


def arrow_int(v: Any, day: bool) -> int | None:
    """``v`` as the integer of Arrow's ``date32`` (``day``) or ``timestamp[us]``, with the
    infinities as DuckDB stores them (±(2**31-1) days, ±(2**63-1) µs)."""
    if v is None:
        return None
    if isinstance(v, _Infinite):
        return v._sign * (_DAYS_INF if day else _MICROS_INF)
    if day:
        return (v - _EPOCH_DATE).days
    d = v - (_EPOCH if v.tzinfo is None else _EPOCH_TZ)
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
