"""Coarse result types of view columns, for the type a set operation gives its columns.

DuckDB unifies the branches of ``UNION`` / ``EXCEPT`` / ``INTERSECT`` column by column: an
integer or DECIMAL column meeting a DOUBLE becomes DOUBLE, anything meeting a VARCHAR becomes
VARCHAR. The engine holds Python values, so a branch whose column has the narrower type gets a
``CAST`` on that column (:func:`unify_branches`). Types are coarse: ``int``, ``decimal``,
``float``, ``text``, ``bool``, ``date``, ``timestamp``; ``None`` when unknown (a schema without
types, NULL constants) — then nothing is cast.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

from ..query import GCQ, ProjectionSpec, SetOperation

_BASE = {"int": "int", "integer": "int", "bigint": "int", "smallint": "int", "tinyint": "int", "hugeint": "int",
         "int2": "int", "int4": "int", "int8": "int", "serial": "int", "bigserial": "int", "ubigint": "int",
         "uinteger": "int", "decimal": "decimal", "numeric": "decimal", "double": "float", "float": "float",
         "real": "float", "float4": "float", "float8": "float", "double precision": "float", "varchar": "text",
         "text": "text", "string": "text", "char": "text", "bpchar": "text", "character varying": "text",
         "boolean": "bool", "bool": "bool", "date": "date", "timestamp": "timestamp", "datetime": "timestamp",
         "timestamp without time zone": "timestamp"}
_CAST_TO = {"float": "double", "text": "varchar"}


def coarse(sql_type: str | None) -> str | None:
    if not sql_type:
        return None
    return _BASE.get(sql_type.lower().split("(")[0].strip())


def value_kind(v: Any) -> str | None:
    """The type family of a Python value as the SQL front end names it (``int``, ``decimal``,
    ``float``, ``text``, ``bool``, ``date``, ``timestamp``; None for NULL or anything else)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, Decimal):
        return "decimal"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "text"
    if isinstance(v, datetime.datetime):
        return "timestamp"
    if isinstance(v, datetime.date):
        return "date"
    return None


def unify(ts: list[str | None]) -> str | None:
    """The common type DuckDB gives values of these types (None if unknown)."""
    known = {t for t in ts if t is not None}
    if len(known) <= 1:
        return next(iter(known), None)
    if "text" in known:
        return "text"
    if known <= {"int", "decimal", "float"}:
        return "float" if "float" in known else "decimal"
    if known <= {"date", "timestamp"}:
        return "timestamp"
    return None


def expr_type(e: tuple, var: dict[str, str | None], dialect: str = "duckdb") -> str | None:
    tag = e[0]
    if tag == "var":
        return var.get(e[1])
    if tag == "const":
        return value_kind(e[1])
    if tag in ("=", "<>", "<", "<=", ">", ">=", "and", "or", "not", "isnull", "in", "like"):
        return "bool"
    if tag == "neg":
        return expr_type(e[1], var, dialect)
    if tag in ("+", "-", "*", "/", "//", "%"):
        a, b = expr_type(e[1], var, dialect), expr_type(e[2], var, dialect)
        if tag == "/" and dialect != "postgres":
            return "float"
        if tag == "//":
            return "int" if a == b == "int" else unify([a, b])
        if "date" in (a, b) or "timestamp" in (a, b):
            return "int" if a == b == "date" and tag == "-" else "timestamp"
        return unify([a, b]) if a and b else None
    if tag == "case":
        return unify([expr_type(v, var, dialect) for _c, v in e[1]] + [expr_type(e[2], var, dialect)])
    if tag == "cast":
        return coarse(e[2])
    if tag == "extract":
        return "float" if e[1] == "epoch" else "int"
    if tag == "trunc":
        return "timestamp"
    if tag == "fn":
        name, args = e[1], e[2]
        if name in ("upper", "lower", "trim", "ltrim", "rtrim", "substr", "concat", "concat_strict"):
            return "text"
        if name == "length":
            return "int"
        first = expr_type(args[0], var, dialect) if args else None
        if name in ("floor", "ceil"):
            return "decimal" if first == "decimal" else "float" if first else None
        if name in ("abs", "round", "nullif"):
            return first
        if name == "coalesce":
            return unify([expr_type(a, var, dialect) for a in args])
    return None


def _var_types(gcq: GCQ, types: dict[str, dict[str, str]]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for a in gcq.atoms:
        cols = gcq.schema.get(a.relation, [])
        for c, v in zip(cols, a.vars):
            if v is not None and v not in out:
                out[v] = coarse(types.get(a.relation, {}).get(c))
    return out


def column_types(d: Any, types: dict[str, dict[str, str]]) -> list[str | None] | None:
    """Coarse types of a plain, computed or set-operation definition's columns, else None."""
    if isinstance(d, SetOperation):
        per = [column_types(b, types) for b in d.branches]
        if any(p is None for p in per):
            return None
        return [unify([p[i] for p in per]) for i in range(len(per[0]))]
    if not isinstance(d, GCQ) or d.aggregate is not None:
        return None
    var = _var_types(d, types)
    if d.projection is not None:
        return [expr_type(e, var, d.projection.dialect) for e in d.projection.exprs]
    return [var.get(v) for v in d.output]


def cast_column(d: Any, i: int, to: str) -> None:
    """Make column ``i`` of a plain, computed or set-operation definition a ``CAST(… AS to)``."""
    if isinstance(d, SetOperation):
        for b in d.branches:
            cast_column(b, i, to)
        return
    if d.projection is None:
        needed = list(dict.fromkeys(d.output))
        d.projection = ProjectionSpec([("var", v) for v in d.output], list(d.columns), distinct=d.distinct)
        d.output, d.columns, d.distinct = needed, list(needed), False
    d.projection.exprs[i] = ("cast", d.projection.exprs[i], to)


def unify_branches(branches: list, types: dict[str, dict[str, str]]) -> None:
    """Cast the columns of branches whose type is narrower than the set operation's."""
    per = [column_types(b, types) for b in branches]
    if any(p is None for p in per):
        return
    for i in range(len(per[0])):
        target = unify([p[i] for p in per])
        if target not in _CAST_TO or any(p[i] is None for p in per):
            continue
        for b, p in zip(branches, per):
            if p[i] != target:
                cast_column(b, i, _CAST_TO[target])


def _widen(e: Any, var: dict[str, str | None], dialect: str) -> Any:
    """``e`` with the values of CASE branches / coalesce arguments cast to DOUBLE where DuckDB's
    common type of them is DOUBLE (an INTEGER or DECIMAL branch then yields a float)."""
    if not isinstance(e, tuple) or not e or not isinstance(e[0], str) or e[0] == "const":
        return e
    tag = e[0]
    if tag == "var":
        return e
    if tag == "case":
        whens = tuple((_widen(c, var, dialect), _widen(v, var, dialect)) for c, v in e[1])
        other = _widen(e[2], var, dialect)
        values = [v for _c, v in whens] + [other]
        if unify([expr_type(v, var, dialect) for v in values]) == "float":
            whens = tuple((c, _to_float(v, var, dialect)) for c, v in whens)
            other = _to_float(other, var, dialect)
        return ("case", whens, other)
    if tag == "fn" and e[1] == "coalesce":
        args = tuple(_widen(a, var, dialect) for a in e[2])
        if unify([expr_type(a, var, dialect) for a in args]) == "float":
            args = tuple(_to_float(a, var, dialect) for a in args)
        return ("fn", "coalesce", args)
    return tuple(_widen(x, var, dialect) if isinstance(x, tuple) else x for x in e)


def _to_float(e: tuple, var, dialect: str) -> tuple:
    return e if expr_type(e, var, dialect) in ("float", None) else ("cast", e, "double")


def widen_mixed_branches(d: Any, types: dict[str, dict[str, str]]) -> None:
    """Apply :func:`_widen` to the computed columns of every definition under ``d``."""
    if isinstance(d, GCQ):
        if d.projection is not None:
            var = _var_types(d, types)
            d.projection.exprs = [_widen(e, var, d.projection.dialect) for e in d.projection.exprs]
        return
    for sub in getattr(d, "branches", None) or []:
        widen_mixed_branches(sub, types)
    for attr in ("left", "right", "outer", "inner"):
        if hasattr(d, attr):
            widen_mixed_branches(getattr(d, attr), types)
    for _rel, sub in getattr(d, "nested", None) or []:
        widen_mixed_branches(sub, types)
