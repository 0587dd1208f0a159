"""Scalar expressions compiled once to closures over tuples, with SQL NULL semantics.

The tree format is the one :mod:`ivm_layer.sql.scalar` builds (see :data:`ivm_layer.query.Expr`):
``("var", v)``, ``("const", c)``, ``("neg", e)``, arithmetic ``(op, a, b)`` for
``+ - * / // %``, comparisons ``(op, a, b)`` for ``= <> < <= > >=``, ``("and"|"or", a, b)``,
``("not", e)``, ``("isnull", e)``, ``("in", e, items)``, ``("like", e, pattern, icase)``,
``("case", whens, else)``, ``("fn", name, args)``, ``("cast", e, type)``,
``("extract", part, e)``, ``("trunc", part, e)``.

Result types follow DuckDB (``dialect="postgres"``: PostgreSQL's integer division):
``/`` is a float division (``x/0`` is ±inf, NaN for 0/0, as in DuckDB); ``%`` keeps the
dividend's sign; mixing a float with a DECIMAL gives a float; ``round`` rounds halves away
from zero; a date plus an interval is a timestamp. A value the database would reject at run
time (``CAST('x' AS INTEGER)``, ``x % 0``) evaluates to NULL here: the commit phase of an
update cannot fail.
"""

from __future__ import annotations

import datetime
import decimal
import math
import operator
import re
from collections.abc import Callable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from .exact import numeric_div

Fn = Callable[[tuple], Any]

_CMP = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
        ">=": operator.ge}
#: Extra precision for DECIMAL arithmetic: DuckDB's DECIMAL holds 38 digits.
_CTX = decimal.Context(prec=80, rounding=ROUND_HALF_UP, Emax=999999, Emin=-999999)
_INT_TYPES = frozenset({"integer", "int", "bigint", "smallint", "tinyint", "hugeint", "int4", "int8", "int2",
                        "ubigint", "uinteger", "usmallint", "utinyint", "long", "short"})
_FLOAT_TYPES = frozenset({"double", "float", "real", "float4", "float8", "double precision"})
_TEXT_TYPES = frozenset({"varchar", "text", "string", "char", "bpchar", "character varying", "character"})


def like_regex(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """SQL LIKE pattern (``%`` any run, ``_`` one character) as a compiled regex."""
    out = [".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern]
    return re.compile("".join(out), re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _coerce(a: Any, b: Any) -> tuple[Any, Any]:
    """Bring two numbers to a common Python type (float wins over DECIMAL, as in DuckDB)."""
    ta, tb = type(a), type(b)
    if ta is tb:
        return a, b
    if ta is float or tb is float:
        return float(a), float(b)
    return a, b


def _as_timestamp(d: Any) -> Any:
    if type(d) is datetime.date:
        return datetime.datetime.combine(d, datetime.time())
    return d


def _add(a: Any, b: Any) -> Any:
    if isinstance(b, datetime.timedelta) and isinstance(a, datetime.date):
        return _as_timestamp(a) + b
    if isinstance(a, datetime.timedelta) and isinstance(b, datetime.date):
        return _as_timestamp(b) + a
    a, b = _coerce(a, b)
    return a + b


def _sub(a: Any, b: Any) -> Any:
    if isinstance(b, datetime.timedelta) and isinstance(a, datetime.date):
        return _as_timestamp(a) - b
    if type(a) is datetime.date and type(b) is datetime.date:
        return (a - b).days  # DuckDB: date - date is a BIGINT number of days
    a, b = _coerce(a, b)
    return a - b


def _mul(a: Any, b: Any) -> Any:
    a, b = _coerce(a, b)
    return a * b


def _div_float(a: Any, b: Any) -> Any:
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _div_pg(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return None if b == 0 else _int_div(a, b)
    a, b = _coerce(a, b)
    if not b:
        return None
    if type(a) is float:
        return a / b
    return numeric_div(Decimal(a), Decimal(b))


def _int_div(a: Any, b: Any) -> Any:
    """Integer division truncating toward zero (DuckDB's ``//``, PostgreSQL's int ``/``)."""
    if not b:
        return None
    if type(a) is int and type(b) is int:
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    a, b = _coerce(a, b)
    if type(a) is float:
        return float(math.trunc(a / b))
    return _CTX.divide_int(Decimal(a), Decimal(b))


def _mod(a: Any, b: Any) -> Any:
    if not b:
        return None
    if type(a) is int and type(b) is int:
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    a, b = _coerce(a, b)
    if type(a) is float:
        return math.fmod(a, b)
    return _CTX.remainder(Decimal(a), Decimal(b))


_ARITH: dict[str, Callable[[Any, Any], Any]] = {"+": _add, "-": _sub, "*": _mul, "/": _div_float,
                                                "//": _int_div, "%": _mod}


def _round_half_away(x: Any, digits: int = 0) -> Any:
    if type(x) is int:
        if digits >= 0:
            return x
        q = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=_CTX)
        return int(q)
    if type(x) is float:
        if math.isnan(x) or math.isinf(x):
            return x
        q = Decimal(repr(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=_CTX)
        return float(q)
    return x.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=_CTX)


def _round_pg(x: Any, digits: int = 0) -> Any:
    """PostgreSQL's round: a double rounds halves to even (rint), a numeric away from zero."""
    if type(x) is float and digits == 0:
        return float(round(x)) if math.isfinite(x) else x
    return _round_half_away(x, digits)


def _floor(x: Any) -> Any:
    if type(x) is int:
        return float(x)  # DuckDB: floor/ceil of an integer is a DOUBLE
    if type(x) is float:
        return float(math.floor(x)) if math.isfinite(x) else x
    return x.to_integral_value(rounding=decimal.ROUND_FLOOR)


def _ceil(x: Any) -> Any:
    if type(x) is int:
        return float(x)
    if type(x) is float:
        return float(math.ceil(x)) if math.isfinite(x) else x
    return x.to_integral_value(rounding=decimal.ROUND_CEILING)


def _substr(s: str, offset: int, length: int | None = None) -> str:
    """DuckDB's ``substring(s, offset[, length])`` (1-based; 0 starts before the string;
    negative offsets count from the end; a negative length goes backwards)."""
    n = len(s)
    if length is None:
        length = n + abs(offset) + 1
    if length == 0:
        return ""
    if offset > 0:
        start = min(n, offset - 1)
    elif offset < 0:
        start = max(n + offset, 0)
    else:
        start = 0
        length -= 1
        if length <= 0:
            return ""
    if length > 0:
        end = min(n, start + length)
    else:
        end, start = start, max(0, start + length)
    return s[start:end]


def to_text(v: Any) -> str:
    """A value as DuckDB casts it to VARCHAR."""
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is float:
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, datetime.timedelta):
        return str(v)
    return str(v)


def _concat_strict(a: Any, b: Any) -> str:
    return to_text(a) + to_text(b)


def _concat(*args: Any) -> Any:
    return "".join(to_text(a) for a in args if a is not None)


def _date_trunc(part: str, v: Any) -> Any:
    ts = _as_timestamp(v)
    if part == "microseconds":
        return ts
    if part == "milliseconds":
        return ts.replace(microsecond=ts.microsecond // 1000 * 1000)
    if part == "second":
        return ts.replace(microsecond=0)
    if part == "minute":
        return ts.replace(second=0, microsecond=0)
    if part == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    day = ts.replace(hour=0, minute=0, second=0, microsecond=0)
    if part == "day":
        return day
    if part == "week":  # ISO weeks start on Monday
        return day - datetime.timedelta(days=day.weekday())
    if part == "month":
        return day.replace(day=1)
    if part == "quarter":
        return day.replace(day=1, month=(day.month - 1) // 3 * 3 + 1)
    if part == "year":
        return day.replace(day=1, month=1)
    raise ValueError(part)


def _extract(part: str, v: Any) -> Any:
    if part == "epoch":
        ts = _as_timestamp(v)
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=datetime.UTC)
        return ts.timestamp()
    if part in ("year", "month", "day"):
        return getattr(v, part)
    if part == "quarter":
        return (v.month - 1) // 3 + 1
    if part == "dow":
        return v.isoweekday() % 7
    if part == "isodow":
        return v.isoweekday()
    if part == "doy":
        return v.timetuple().tm_yday
    if part == "week":
        return v.isocalendar()[1]
    ts = _as_timestamp(v)
    if part == "hour":
        return ts.hour
    if part == "minute":
        return ts.minute
    if part == "second":
        return ts.second
    if part == "millisecond":
        return ts.second * 1000 + ts.microsecond // 1000
    if part == "microsecond":
        return ts.second * 1_000_000 + ts.microsecond
    raise ValueError(part)


def cast_value(v: Any, target: str) -> Any:
    """``CAST(v AS target)`` for a non-NULL ``v`` (``target`` lower-case, e.g. ``decimal(12,2)``)."""
    base = target.split("(")[0].strip()
    if base in _INT_TYPES:
        if type(v) is str:
            return int(v.strip())
        if type(v) is float:
            return round(v)  # DuckDB: double -> integer rounds halves to even
        if isinstance(v, Decimal):
            return int(v.quantize(Decimal(1), rounding=ROUND_HALF_UP, context=_CTX))
        return int(v)
    if base in _FLOAT_TYPES:
        return float(v)
    if base in ("decimal", "numeric"):
        scale = 3
        if "(" in target:
            args = target[target.index("(") + 1:target.rindex(")")].split(",")
            scale = int(args[1]) if len(args) > 1 else 0
        d = Decimal(repr(v)) if type(v) is float else Decimal(v.strip() if type(v) is str else v)
        return d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_CTX)
    if base in _TEXT_TYPES:
        return to_text(v)
    if base == "date":
        if isinstance(v, datetime.datetime):
            return v.date()
        if isinstance(v, datetime.date):
            return v
        return datetime.date.fromisoformat(str(v).strip())
    if base in ("timestamp", "datetime"):
        if isinstance(v, datetime.datetime):
            return v
        if isinstance(v, datetime.date):
            return _as_timestamp(v)
        return datetime.datetime.fromisoformat(str(v).strip())
    if base in ("boolean", "bool"):
        if type(v) is str:
            s = v.strip().lower()
            if s in ("true", "t", "1", "yes", "y"):
                return True
            if s in ("false", "f", "0", "no", "n"):
                return False
            raise ValueError(v)
        return bool(v)
    raise ValueError(target)


#: Scalar functions: name -> (callable over non-NULL arguments, accepted argument counts).
FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "upper": (str.upper, (1,)), "lower": (str.lower, (1,)), "length": (len, (1,)),
    "substr": (_substr, (2, 3)), "trim": (lambda s, c=None: s.strip(c), (1, 2)),
    "ltrim": (lambda s, c=None: s.lstrip(c), (1, 2)), "rtrim": (lambda s, c=None: s.rstrip(c), (1, 2)),
    "concat_strict": (_concat_strict, (2,)), "abs": (abs, (1,)), "round": (_round_half_away, (1, 2)),
    "round_pg": (_round_pg, (1, 2)), "floor": (_floor, (1,)), "ceil": (_ceil, (1,)),
}
#: Functions that see NULL arguments themselves (all others are NULL when any argument is).
NULL_AWARE = frozenset({"coalesce", "nullif", "concat"})
SUPPORTED_FUNCTIONS = frozenset(FUNCTIONS) | NULL_AWARE


def _safe(f: Fn) -> Fn:
    """Run ``f``; a value the database would reject at run time evaluates to NULL."""
    def safe(t: tuple) -> Any:
        try:
            return f(t)
        except (TypeError, ValueError, ArithmeticError, OverflowError, AttributeError):
            return None
    return safe


def compile_scalar(e: tuple, pos: Mapping[str, int], dialect: str = "duckdb") -> Fn:
    """A closure ``f(t)`` evaluating ``e`` over tuple ``t`` (variables at ``pos``); NULL is None,
    conditions are three-valued (True / False / None)."""
    return _safe(_compile(e, pos, dialect))


def compile_condition(e: tuple, pos: Mapping[str, int], dialect: str = "duckdb") -> Callable[[tuple], bool]:
    """A closure that is True exactly where the condition ``e`` is TRUE (not FALSE, not NULL)."""
    f = compile_scalar(e, pos, dialect)
    return lambda t: f(t) is True


def _compile(e: tuple, pos: Mapping[str, int], dialect: str) -> Fn:
    tag = e[0]
    if tag == "var":
        i = pos[e[1]]
        return lambda t: t[i]
    if tag == "const":
        c = e[1]
        return lambda t: c
    sub = [_compile(x, pos, dialect) if isinstance(x, tuple) and x and isinstance(x[0], str) and x[0] in _TAGS
           else x for x in e[1:]]
    if tag == "neg":
        f = sub[0]
        return lambda t: None if (v := f(t)) is None else -v
    if tag in _ARITH:
        fn = _div_pg if (tag == "/" and dialect == "postgres") else _ARITH[tag]
        fa, fb = sub
        def arith(t):
            a = fa(t)
            if a is None:
                return None
            b = fb(t)
            return None if b is None else fn(a, b)
        return arith
    if tag in _CMP:
        cmp = _CMP[tag]
        fa, fb = sub
        def compare(t):
            a = fa(t)
            if a is None:
                return None
            b = fb(t)
            if b is None:
                return None
            a, b = _coerce(a, b) if type(a) is not type(b) else (a, b)
            return cmp(a, b)
        return compare
    if tag == "and":
        fa, fb = sub
        def and_(t):
            a = fa(t)
            if a is False:
                return False
            b = fb(t)
            if b is False:
                return False
            return None if a is None or b is None else True
        return and_
    if tag == "or":
        fa, fb = sub
        def or_(t):
            a = fa(t)
            if a is True:
                return True
            b = fb(t)
            if b is True:
                return True
            return None if a is None or b is None else False
        return or_
    if tag == "not":
        f = sub[0]
        return lambda t: None if (v := f(t)) is None else not v
    if tag == "isnull":
        f = sub[0]
        return lambda t: f(t) is None
    if tag == "in":
        f = sub[0]
        items = [_compile(x, pos, dialect) for x in e[2]]
        def in_(t):
            v = f(t)
            if v is None:
                return None
            unknown = False
            for g in items:
                w = g(t)
                if w is None:
                    unknown = True
                elif v == w:
                    return True
            return None if unknown else False
        return in_
    if tag == "like":
        f = sub[0]
        full = like_regex(e[2], e[3]).fullmatch
        return lambda t: None if (v := f(t)) is None else full(v) is not None
    if tag == "case":
        whens = [(_compile(c, pos, dialect), _compile(v, pos, dialect)) for c, v in e[1]]
        other = _compile(e[2], pos, dialect)
        def case(t):
            for c, v in whens:
                if c(t) is True:
                    return v(t)
            return other(t)
        return case
    if tag == "cast":
        f, target = sub[0], e[2]
        return lambda t: None if (v := f(t)) is None else cast_value(v, target)
    if tag in ("extract", "trunc"):
        part, f = e[1], _compile(e[2], pos, dialect)
        op = _extract if tag == "extract" else _date_trunc
        return lambda t: None if (v := f(t)) is None else op(part, v)
    if tag == "fn":
        name = e[1]
        if name == "round" and dialect == "postgres":
            name = "round_pg"
        return _compile_fn(name, [_compile(x, pos, dialect) for x in e[2]])
    raise ValueError(f"unknown expression node {tag!r}")


def _compile_fn(name: str, args: list[Fn]) -> Fn:
    if name == "coalesce":
        def coalesce(t):
            for g in args:
                v = g(t)
                if v is not None:
                    return v
            return None
        return coalesce
    if name == "nullif":
        fa, fb = args
        def nullif(t):
            a = fa(t)
            if a is None:
                return None
            b = fb(t)
            return None if b is not None and a == b else a
        return nullif
    if name == "concat":
        return lambda t: _concat(*(g(t) for g in args))
    fn = FUNCTIONS[name][0]
    if len(args) == 1:
        g = args[0]
        return lambda t: None if (v := g(t)) is None else fn(v)

    def call(t):
        vals = [g(t) for g in args]
        if any(v is None for v in vals):
            return None
        return fn(*vals)
    return call


_TAGS = frozenset({"var", "const", "neg", "not", "isnull", "and", "or", "in", "like", "case", "fn", "cast",
                   "extract", "trunc"}) | frozenset(_ARITH) | frozenset(_CMP)
#: Tags only this module compiles (the aggregate argument compiler hands them over).
SCALAR_TAGS = frozenset({"in", "like", "case", "fn", "cast", "extract", "trunc", "//", "%"})
