"""Exact DECIMAL arithmetic for aggregates.

Python's default decimal context keeps 28 significant digits, fewer than a DECIMAL(38, s)
column holds, so sums of such values lose integer digits. Aggregate updates run under
:data:`EXACT` (80 digits: a sum of 10^12 values of 38 digits still fits). ``numeric_avg``
is PostgreSQL's ``AVG(numeric)``: a numeric rounded like PostgreSQL's numeric division.
"""

from __future__ import annotations

import decimal
from decimal import ROUND_HALF_UP, Decimal

EXACT = decimal.Context(prec=80, rounding=ROUND_HALF_UP, Emax=999999, Emin=-999999)
_MIN_SIG_DIGITS = 16  # PostgreSQL's NUMERIC_MIN_SIG_DIGITS


def _weight_first(x: Decimal) -> tuple[int, int]:
    """PostgreSQL's base-10000 weight and first digit of a nonzero |x|."""
    x = abs(x)
    weight = x.adjusted() // 4
    first = int(EXACT.divide_int(x, Decimal(10000) ** weight)) if weight >= 0 else \
        int(EXACT.divide_int(x * Decimal(10000) ** (-weight), 1))
    return weight, first


def numeric_avg(total: Decimal, n: int) -> Decimal | None:
    """``AVG`` of numerics as PostgreSQL computes it: ``sum / count`` at the division's scale."""
    if not n:
        return None
    return numeric_div(Decimal(total), Decimal(n))


def _dscale(x: Decimal) -> int:
    return max(-x.as_tuple().exponent, 0)


def numeric_div(a: Decimal, b: Decimal) -> Decimal | None:
    """PostgreSQL's ``numeric / numeric``: at least 16 significant digits and at least the
    operands' display scales (``select_div_scale``), rounded half away from zero; NULL for /0."""
    if not b:
        return None
    if not a:
        scale = max(_MIN_SIG_DIGITS, _dscale(a), _dscale(b))
        return Decimal(0).quantize(Decimal(1).scaleb(-min(scale, 1000)))
    w1, f1 = _weight_first(a)
    w2, f2 = _weight_first(b)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    scale = max(_MIN_SIG_DIGITS - qweight * 4, _dscale(a), _dscale(b), 0)
    scale = min(scale, 1000)
    q = EXACT.divide(a, b)
    return q.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=EXACT)
