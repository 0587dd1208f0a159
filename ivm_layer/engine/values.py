"""SQL value semantics for the engine (DuckDB / PostgreSQL), applied where values enter it.

* **NaN** equals itself and sorts above every number (DuckDB, PostgreSQL). Every NaN that
  enters the engine (a float or a ``Decimal`` NaN in a row, a NaN constant in a predicate)
  is replaced by the single object :data:`NAN`, a ``float`` that compares, hashes and sorts
  that way. Rows keep working as dict keys: a freshly decoded NaN finds a stored NaN row.
  It is the only NaN of the layer: the change-stream decoders (``pgoutput``) and the
  checkpoints return it too (:func:`canonical_float`).
* **−0.0 = 0.0** and mixed ``int``/``float``/``Decimal`` comparisons are Python's (exact).
* **Offsets**: a float offset (``r.a < s.c + 0.5``) is a SQL numeric literal: added to an
  ``int`` or a ``Decimal`` it adds the exact decimal ``Decimal('0.5')`` (as DuckDB's
  ``DECIMAL`` literal does), added to a float it adds the float.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

_NAN_HASH = hash(("ivm_layer", "NaN"))


class SqlNaN(float):
    """NaN with SQL semantics: equal to itself, greater than every number; arithmetic on it
    stays :data:`NAN`."""

    __slots__ = ()

    def __new__(cls) -> "SqlNaN":
        return super().__new__(cls, "nan")

    def __eq__(self, o: object) -> bool:
        if o is self:
            return True
        return isinstance(o, (float, Decimal)) and o != o

    def __ne__(self, o: object) -> bool:
        return not self.__eq__(o)

    def __hash__(self) -> int:
        return _NAN_HASH

    def __lt__(self, o: Any) -> bool:
        if isinstance(o, (int, float, Decimal)):
            return False
        return NotImplemented

    def __le__(self, o: Any) -> bool:
        if isinstance(o, (int, float, Decimal)):
            return self.__eq__(o)
        return NotImplemented

    def __gt__(self, o: Any) -> bool:
        if isinstance(o, (int, float, Decimal)):
            return not self.__eq__(o)
        return NotImplemented

    def __ge__(self, o: Any) -> bool:
        if isinstance(o, (int, float, Decimal)):
            return True
        return NotImplemented

    def _nan(self, o: Any = None) -> "SqlNaN":
        return NAN

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _nan
    __truediv__ = __rtruediv__ = __neg__ = __pos__ = __abs__ = _nan

    def __repr__(self) -> str:
        return "nan"

    def __reduce__(self):
        return (_nan_object, ())


def _nan_object() -> SqlNaN:
    return NAN


NAN = SqlNaN()


def canonical_float(v: float) -> float:
    """``v``, or :data:`NAN` when ``v`` is a NaN (the decoders of change streams and
    checkpoints call it, so a row holding NaN matches the engine's stored row)."""
    return NAN if v != v else v


def canonical(v: Any) -> Any:
    """``v`` with a NaN replaced by :data:`NAN`."""
    t = type(v)
    if (t is float or t is Decimal) and v != v:
        return NAN
    return v


def canonical_row(row: tuple) -> tuple:
    """``row`` with every NaN replaced by :data:`NAN` (the same tuple when it has none)."""
    for v in row:
        t = type(v)
        if (t is float or t is Decimal) and v != v and v is not NAN:
            return tuple([canonical(x) for x in row])
    return row


def typed_offset(c: Any) -> bool:
    """Does adding ``c`` need :func:`offset_adder` (a non-integral float or Decimal)?"""
    return type(c) is float or type(c) is Decimal


def offset_adder(c: Any) -> Callable[[Any], Any]:
    """``f(v) = v + c`` under SQL literal semantics (see the module docstring)."""
    if type(c) is float:
        cd = Decimal(repr(c)) if c == c and c not in (float("inf"), float("-inf")) else c
        cf = c

        def add(v):
            return v + (cf if type(v) is float else cd) if type(v) is not SqlNaN else NAN
        return add
    if type(c) is Decimal:
        cf = float(c)

        def add_dec(v):
            return v + (cf if type(v) is float else c)
        return add_dec
    return lambda v: v + c
