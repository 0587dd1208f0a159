"""``UNION [ALL]`` / ``EXCEPT [ALL]`` / ``INTERSECT [ALL]`` → a :class:`SetOperation` of GCQs.

Each branch is an ordinary view definition (translated by :mod:`.translate`); the engine
keeps, per output row, its multiplicity in each branch (:mod:`ivm_layer.engine.union`).
A ``WITH`` in front of the set operation is given to every branch.
"""

from __future__ import annotations

from sqlglot import exp

from ..errors import SQLError, UnsupportedSQLError
from ..query import GCQ, SemiJoin, SetOperation, normalize_schema, schema_types
from .literals import position, unsupported
from .parse import parse_select
from .subqueries import definition_columns, translate_select_tree
from .types import unify_branches, widen_mixed_branches

_KINDS = {exp.Union: "union", exp.Except: "except", exp.Intersect: "intersect"}
_ALLOWED = {"this", "expression", "distinct", "with", "with_", "by_name", "side", "kind", "on"}


def translate_definition(sql: str, schema: dict, dialect: str = "duckdb") -> GCQ | SetOperation | SemiJoin:
    """A view definition: a GCQ, or a set operation over GCQs."""
    tables = normalize_schema(schema, dialect)
    tree = parse_select(sql, dialect)
    types = schema_types(schema, dialect)
    try:
        if isinstance(tree, exp.Select):
            d = translate_select_tree(tree, tables, dialect)
        else:
            d = _setop(tree, tables, dialect, None, types)
        widen_mixed_branches(d, types)  # DuckDB: CASE/coalesce over INTEGER and DOUBLE is DOUBLE
        return d
    except RecursionError:
        raise SQLError("the definition is nested too deeply") from None
    except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError, IndexError) as e:
        # a shape the rewriting does not expect: refuse it rather than crash
        raise UnsupportedSQLError(f"unsupported in incremental views: this definition could not be "
                                  f"translated ({type(e).__name__}: {str(e)[:120]})") from None


def _setop(node: exp.Expression, tables: dict[str, list[str]], dialect: str, with_: exp.Expression | None,
           types: dict[str, dict[str, str]]):
    if isinstance(node, exp.Subquery):
        node = node.this
    if isinstance(node, exp.Select):
        if with_ is not None and not (node.args.get("with") or node.args.get("with_")):
            node = node.copy()
            node.set("with_" if "with_" in node.arg_types else "with", with_.copy())
        return translate_select_tree(node, tables, dialect)
    kind = _KINDS.get(type(node))
    if kind is None:
        raise unsupported(f"{type(node).__name__.lower()} as a branch of a set operation", node)
    for key, value in node.args.items():
        if value in (None, [], False) or key in ("this", "expression", "distinct", "with", "with_"):
            continue
        if key in ("order", "limit", "offset"):
            raise unsupported("ORDER BY / LIMIT on a set operation inside an incremental view (order or limit "
                              "when you read it)", value if isinstance(value, exp.Expression) else node)
        raise unsupported(f"{key.upper()} on a set operation", node)
    own_with = node.args.get("with") or node.args.get("with_")
    if own_with is not None:
        if own_with.args.get("recursive"):
            raise unsupported("WITH RECURSIVE (recursive queries are not maintained incrementally)", own_with)
        with_ = own_with
    left = _setop(node.this, tables, dialect, with_, types)
    right = _setop(node.expression, tables, dialect, with_, types)
    lw, rw = _width(left), _width(right)
    if lw != rw:
        raise SQLError(f"{kind.upper()} branches have {lw} and {rw} columns; they must have the same number"
                       f"{position(node)}")
    unify_branches([left, right], types)  # DuckDB's column types: INTEGER ∪ DOUBLE is DOUBLE, …
    distinct = bool(node.args.get("distinct", True))
    return SetOperation(kind, not distinct, [left, right], _columns(left))


def _width(d) -> int:
    return len(definition_columns(d))


def _columns(d) -> list[str]:
    return definition_columns(d)
