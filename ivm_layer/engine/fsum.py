"""Exact sums of doubles under insertions and retractions: what a maintained ``SUM``/``AVG`` over
a DOUBLE column accumulates, so that it equals recomputing the aggregate over the rows left.

Float addition is not associative, so a running float sum that is added to and subtracted from
drifts: insert ``1e20`` and ``0.1``, delete ``1e20``, and the float sum says ``0.0`` where
``SELECT sum(x)`` over the one row left says ``0.1``; a NaN that is deleted leaves ``NaN - NaN =
NaN`` behind for good. :class:`FloatSum` keeps instead

- the exact sum of the finite values, as one Python integer in units of 2⁻¹⁰⁷⁴ (every finite
  double is an integer multiple of the smallest subnormal), and
- how many NaN, +inf and -inf values are in the sum, so that they retract exactly too.

Its value (:meth:`FloatSum.value`) is NaN if a NaN (or both infinities) is in, else ±inf if one
infinity is, else the exact sum rounded once to the nearest double (Python's ``int / int`` is
correctly rounded; a sum beyond the double range is ±inf, as a float sum overflows). Cost: an
addition is one big-integer addition of ~1,100 bits (≈ 0.1 µs), only for DOUBLE arguments; ints
and decimals are summed exactly as they are.

>>> s = FloatSum.of(1e20) + FloatSum.of(0.1)
>>> s.value()
1e+20
>>> (s - FloatSum.of(1e20)).value()
0.1
>>> (FloatSum.of(float("nan")) + FloatSum.of(1.5) - FloatSum.of(float("nan"))).value()
1.5
"""

from __future__ import annotations

import math
from typing import Any

_SHIFT = 1074
_ONE = 1 << _SHIFT


class FloatSum:
    """An exact, retractable sum of doubles (see the module docstring). Supports ``+``/``-``
    with another :class:`FloatSum`, an ``int`` or a ``float``, ``*`` by an ``int``
    (a multiplicity), negation, truth (non-zero) and equality."""

    __slots__ = ("n", "nan", "pinf", "ninf")

    def __init__(self, n: int = 0, nan: int = 0, pinf: int = 0, ninf: int = 0) -> None:
        self.n = n          # the finite values' sum, in units of 2**-1074
        self.nan = nan      # how many NaN values are in the sum (with multiplicity)
        self.pinf = pinf    # ... +inf values
        self.ninf = ninf    # ... -inf values

    @staticmethod
    def of(x: float) -> FloatSum:
        """The sum holding the one double ``x``."""
        if math.isnan(x):  # also the engine's canonical NaN, which equals itself
            return FloatSum(0, 1)
        if math.isinf(x):
            return FloatSum(0, 0, 1, 0) if x > 0 else FloatSum(0, 0, 0, 1)
        num, den = x.as_integer_ratio()
        return FloatSum(num << (_SHIFT - den.bit_length() + 1))

    def value(self) -> float:
        """The sum as SQL returns it: NaN, ±inf, or the exact sum rounded once."""
        if self.nan or (self.pinf and self.ninf):
            return math.nan
        if self.pinf:
            return math.inf
        if self.ninf:
            return -math.inf
        return _ratio(self.n, _ONE)

    def mean(self, count: int) -> float:
        """``value() / count``, rounded once (AVG)."""
        if self.nan or self.pinf or self.ninf:
            return self.value()
        return _ratio(self.n, _ONE * count)

    # -- arithmetic --------------------------------------------------------------------------
    def __add__(self, o: Any) -> FloatSum:
        if type(o) is not FloatSum:
            o = _lift(o)
        return FloatSum(self.n + o.n, self.nan + o.nan, self.pinf + o.pinf, self.ninf + o.ninf)

    __radd__ = __add__

    def __sub__(self, o: Any) -> FloatSum:
        if type(o) is not FloatSum:
            o = _lift(o)
        return FloatSum(self.n - o.n, self.nan - o.nan, self.pinf - o.pinf, self.ninf - o.ninf)

    def __rsub__(self, o: Any) -> FloatSum:
        return _lift(o) - self

    def __neg__(self) -> FloatSum:
        return FloatSum(-self.n, -self.nan, -self.pinf, -self.ninf)

    def __mul__(self, k: Any) -> FloatSum:
        if type(k) is not int:
            if isinstance(k, int):  # bool, int subclasses
                k = int(k)
            else:
                return NotImplemented
        return FloatSum(self.n * k, self.nan * k, self.pinf * k, self.ninf * k)

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return bool(self.n or self.nan or self.pinf or self.ninf)

    def __eq__(self, o: object) -> bool:
        if type(o) is not FloatSum:
            if not isinstance(o, (int, float)):
                return NotImplemented
            o = _lift(o)
        return (self.n, self.nan, self.pinf, self.ninf) == (o.n, o.nan, o.pinf, o.ninf)

    __hash__ = None  # type: ignore[assignment]

    def __float__(self) -> float:
        return self.value()

    def __repr__(self) -> str:
        return f"FloatSum({self.value()!r})"


def _lift(x: Any) -> FloatSum:
    if isinstance(x, float):  # the engine's canonical NaN is a float subclass
        return FloatSum.of(x)
    if isinstance(x, int):
        return FloatSum(int(x) << _SHIFT)
    raise TypeError(f"cannot add {type(x).__name__} to an exact sum of doubles")


def _ratio(num: int, den: int) -> float:
    try:
        return num / den  # correctly rounded
    except OverflowError:
        return math.inf if num > 0 else -math.inf


def exact(x: Any) -> Any:
    """``x`` ready to be summed exactly: a double becomes a :class:`FloatSum`; ints and decimals
    are exact already."""
    return FloatSum.of(x) if isinstance(x, float) else x


def plain(x: Any) -> Any:
    """A sum as SQL returns it (the inverse of :func:`exact`)."""
    return x.value() if type(x) is FloatSum else x
