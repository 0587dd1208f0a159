"""SQL constants → Python values, refusing what cannot be represented (never a raw exception).

Numbers: integers as ``int`` (at most :data:`MAX_DIGITS` digits), other numerals as
``Decimal`` (``decimals=True``, DuckDB's DECIMAL literals) or ``float``; fixed-length
``INTERVAL``s as ``timedelta``; ``DATE '…'`` / ``TIMESTAMP '…'`` as date/datetime.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from ..errors import SQLError, UnsupportedSQLError

NOT_CONST = object()
#: DuckDB's DECIMAL holds 38 digits, HUGEINT 39; anything longer is not a number DuckDB reads.
MAX_DIGITS = 40

_INTERVAL_UNITS = {
    "microsecond": "microseconds", "microseconds": "microseconds", "us": "microseconds",
    "millisecond": "milliseconds", "milliseconds": "milliseconds", "ms": "milliseconds",
    "second": "seconds", "seconds": "seconds", "sec": "seconds", "secs": "seconds", "s": "seconds",
    "minute": "minutes", "minutes": "minutes", "min": "minutes", "mins": "minutes", "m": "minutes",
    "hour": "hours", "hours": "hours", "h": "hours", "hr": "hours", "hrs": "hours",
    "day": "days", "days": "days", "d": "days",
    "week": "weeks", "weeks": "weeks", "w": "weeks",
}


def position(node: exp.Expression | None) -> str:
    """' at line L, column C' of the first token under ``node``, when sqlglot recorded it."""
    if node is None:
        return ""
    for sub in node.walk():
        meta = getattr(sub, "meta", None) or {}
        if "line" in meta and "col" in meta:
            return f" at line {meta['line']}, column {meta['col']}"
    return ""


def user_text(node: exp.Expression | None, limit: int = 80) -> str:
    """The SQL of ``node`` as the user would recognise it (no added NULLS LAST, no colours)."""
    if node is None:
        return ""
    try:
        text = node.sql(dialect="duckdb")
    except Exception:  # noqa: BLE001 - printing is best effort
        return ""
    text = text.replace(" NULLS LAST", "").replace(" NULLS FIRST", "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unsupported(what: str, node: exp.Expression | None) -> UnsupportedSQLError:
    text = user_text(node)
    snippet = f" ({text})" if text else ""
    return UnsupportedSQLError(f"unsupported in incremental views: {what}{snippet}{position(node)}")


def strip_parens(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def number(text: str, node: exp.Expression, decimals: bool = False) -> Any:
    """A numeric literal, or SQLError when it has more digits than any SQL number type."""
    digits = sum(ch.isdigit() for ch in text)
    if digits > MAX_DIGITS:
        raise SQLError(f"numeric literal with {digits} digits is out of range{position(node)}")
    try:
        return int(text)
    except ValueError:
        pass
    try:
        d = Decimal(text)
    except (InvalidOperation, ValueError):
        raise SQLError(f"invalid numeric literal {text[:40]!r}{position(node)}") from None
    if not d.is_finite() or abs(d.adjusted()) > 308:
        raise SQLError(f"numeric literal {text[:40]!r} is out of range{position(node)}")
    if decimals and "e" not in text.lower():
        return d
    if d == d.to_integral_value() and "e" not in text.lower():
        return int(d)
    return float(d)


def interval(node: exp.Interval) -> datetime.timedelta:
    """``INTERVAL '1 hour'`` / ``INTERVAL 2 MINUTE`` as a timedelta (fixed-length units only)."""
    text = node.this.name if node.this is not None else ""
    unit = node.args.get("unit")
    parts = text.split()
    if unit is not None:
        unit_name = unit.name.lower()
        amount_text = text
    elif len(parts) == 2:
        amount_text, unit_name = parts[0], parts[1].lower()
    else:
        raise unsupported("interval literal (use e.g. INTERVAL '1 hour')", node)
    key = _INTERVAL_UNITS.get(unit_name)
    if key is None:
        raise unsupported(f"interval unit {unit_name!r} (months and years have no fixed length)", node)
    try:
        amount = float(amount_text)
    except ValueError:
        raise unsupported("interval literal (use e.g. INTERVAL '1 hour')", node) from None
    try:
        if not math.isfinite(amount):
            raise OverflowError
        return datetime.timedelta(**{key: amount})
    except OverflowError:
        raise SQLError(f"interval {text[:40]!r} is out of range{position(node)}") from None


def constant(node: exp.Expression, decimals: bool = False) -> Any:
    """The Python value of a constant expression, or :data:`NOT_CONST`."""
    node = strip_parens(node)
    if isinstance(node, exp.Interval):
        return interval(node)
    if isinstance(node, exp.Neg):
        inner = constant(node.this, decimals)
        if inner is NOT_CONST or inner is None or isinstance(inner, (str, bool, datetime.date)):
            return NOT_CONST
        return -inner
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return number(node.this, node, decimals)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return typed_literal(node)  # DATE '2026-01-01', TIMESTAMP '…'
    return NOT_CONST


def typed_literal(node: exp.Cast) -> Any:
    """``DATE '…'`` / ``TIMESTAMP '…'`` as a date/datetime; other casts are not constants."""
    text = node.this.this.strip()
    kind = node.to.this
    try:
        if kind == exp.DataType.Type.DATE:
            return datetime.date.fromisoformat(text)
        if kind in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME):
            return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise SQLError(f"invalid {kind.value} literal {text[:40]!r}{position(node)}") from None
    return NOT_CONST
