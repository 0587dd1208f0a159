"""SQL aggregation (``GROUP BY``, ``COUNT/SUM/AVG/MIN/MAX``, ``HAVING``) → :class:`AggregateSpec`.

The join below the aggregation is translated by :mod:`.translate` as usual; this module
reads the SELECT list, GROUP BY and HAVING and describes the aggregation over the join's
variables. Aggregate arguments are scalar expressions (``l.price * (1 - l.discount)``);
HAVING is a condition over aggregates, group-by columns and constants.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..errors import SQLError, UnsupportedSQLError
from ..query import Aggregate, AggregateSpec, Expr
from .literals import number
from .scalar import ScalarTranslator

_AGG_TYPES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}
_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def is_aggregate_query(select: exp.Select) -> bool:
    """True if the SELECT groups or aggregates (GROUP BY, HAVING, or an aggregate call)."""
    if select.args.get("group") is not None or select.args.get("having") is not None:
        return True
    return any(a.find_ancestor(exp.Select) is select  # not an aggregate of a subquery
               for e in select.expressions for a in e.find_all(exp.AggFunc))


class AggregateTranslator:
    """Builds the :class:`AggregateSpec` of one SELECT; columns are resolved by the join
    translator (``column``: Column → its variable, after the WHERE equalities were merged;
    ``unsupported``: error factory)."""

    def __init__(self, select: exp.Select, column: Callable[[exp.Column], str],
                 unsupported: Callable[[str, exp.Expression | None], UnsupportedSQLError],
                 dialect: str = "duckdb") -> None:
        self.select = select
        self.dialect = dialect
        self.column = column
        self.unsupported = unsupported
        self.group_keys: list[str] = []
        self.aggregates: list[Aggregate] = []
        self.aliases: dict[str, Expr] = {}  # SELECT aliases HAVING may name

    # -- entry point ----------------------------------------------------------------------
    def run(self) -> tuple[list[str], AggregateSpec]:
        """Return the group-by variables and the spec."""
        sel = self.select
        group = sel.args.get("group")
        items: list[tuple[str, int]] = []
        columns: list[str] = []
        select_nodes = []
        for item in sel.expressions:
            name = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
                raise self.unsupported("* in the SELECT list of an aggregate query (name the group-by columns)", node)
            if isinstance(node, exp.Window) or node.find(exp.Window) is not None:
                raise self.unsupported("window function", node)
            select_nodes.append((name, node))
        if group is not None:
            for key in group.args:
                if key not in ("expressions", "all") and group.args.get(key):
                    raise self.unsupported(f"GROUP BY {key.upper()}", group)
            if group.args.get("all"):
                for _, node in select_nodes:
                    if isinstance(node, exp.Column):
                        self._add_group(self.column(node))
                    elif node.find(exp.AggFunc) is None:
                        raise self.unsupported("GROUP BY ALL with a computed SELECT item", node)
            for g in group.expressions:
                g0 = g
                while isinstance(g, exp.Paren):
                    g = g.this
                if isinstance(g, exp.Literal) and not g.is_string:
                    idx = int(g.this)
                    if not 1 <= idx <= len(select_nodes):
                        raise SQLError(f"GROUP BY position {idx} is not in the SELECT list")
                    g = select_nodes[idx - 1][1]
                if not isinstance(g, exp.Column):
                    raise self.unsupported("GROUP BY item that is not a column (group by the column itself)", g0)
                self._add_group(self.column(g))
        for name, node in select_nodes:
            if isinstance(node, exp.Column):
                key = self.column(node)
                if key not in self.group_keys:
                    raise SQLError(f"column {node.sql()!r} must appear in GROUP BY or be used in an "
                                   f"aggregate function{_where(node)}")
                items.append(("group", self.group_keys.index(key)))
                columns.append(name or node.name)
                continue
            if isinstance(node, exp.AggFunc):
                items.append(("agg", self._aggregate(node)))
                columns.append(name or _default_name(node))
                continue
            if node.find(exp.AggFunc) is not None:
                raise self.unsupported("SELECT item computed from aggregates (select the aggregates and "
                                       "combine them outside the view)", node)
            raise self.unsupported("SELECT item that is neither a group-by column nor an aggregate", node)
        self.aliases = {}
        for (name, _node), item, col in zip(select_nodes, items, columns):
            if name is not None:
                self.aliases[name] = ("agg", item[1]) if item[0] == "agg" else ("grp", item[1])
        having_node = sel.args.get("having")
        having = self._condition(having_node.this) if having_node is not None else None
        return self.group_keys, AggregateSpec(group_vars=list(self.group_keys), aggregates=self.aggregates,
                                              items=items, columns=columns, having=having,
                                              grouped=group is not None)

    def _add_group(self, key: str) -> None:
        if key not in self.group_keys:
            self.group_keys.append(key)

    # -- aggregates -----------------------------------------------------------------------
    def _aggregate(self, node: exp.Expression) -> int:
        func = _AGG_TYPES.get(type(node))
        if func is None:
            if isinstance(node, exp.GroupConcat):  # sqlglot keeps no trace of the spelling used
                raise UnsupportedSQLError("unsupported in incremental views: aggregate function "
                                          "string_agg() (also spelled group_concat, listagg) (supported: "
                                          "COUNT, SUM, AVG, MIN, MAX)")
            raise self.unsupported(f"aggregate function {node.sql_name().lower()}() (supported: COUNT, SUM, "
                                   "AVG, MIN, MAX)", node)
        for key, value in node.args.items():
            if key not in ("this", "big_int") and value not in (None, False, []):
                raise self.unsupported(f"{key.upper()} in an aggregate call", node)
        arg = node.this
        distinct = False
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise self.unsupported(f"{func.upper()}(DISTINCT …) with several arguments", node)
            distinct = True
            arg = arg.expressions[0]
        if isinstance(arg, exp.Star):
            if func != "count" or distinct:
                raise self.unsupported(f"{func.upper()}(*)", node)
            agg = Aggregate("count", None)
        else:
            if arg is None:
                raise SQLError(f"{func.upper()}() needs an argument")
            if arg.find(exp.AggFunc) is not None:
                raise self.unsupported("nested aggregate", node)
            if func in ("min", "max"):
                distinct = False  # same result
            agg = Aggregate(func, self._scalar(arg), distinct)
        if agg not in self.aggregates:
            self.aggregates.append(agg)
        return self.aggregates.index(agg)

    def _scalar(self, node: exp.Expression, having: bool = False) -> Expr:
        """An aggregate argument (or a HAVING operand, which may read aggregates and groups)."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise self.unsupported("star in an expression", node)
            try:
                key = self.column(node)
            except SQLError:
                alias = node.name if having and not node.table else None
                if alias in self.aliases:  # HAVING revenue > 10, revenue a SELECT alias
                    return self.aliases[alias]
                raise
            if having:
                if key not in self.group_keys:
                    raise SQLError(f"column {node.sql()!r} in HAVING must be a group-by column or be "
                                   "used in an aggregate")
                return ("grp", self.group_keys.index(key))
            return ("var", key)
        if having and isinstance(node, exp.AggFunc):
            return ("agg", self._aggregate(node))
        if isinstance(node, exp.Literal):
            return ("const", node.this if node.is_string else number(node.this, node, decimals=True))
        if isinstance(node, exp.Null):
            return ("const", None)
        if isinstance(node, exp.Boolean):
            return ("const", bool(node.this))
        if isinstance(node, exp.Neg):
            return ("neg", self._scalar(node.this, having))
        op = _ARITH.get(type(node))
        if op is not None:
            return (op, self._scalar(node.this, having), self._scalar(node.expression, having))
        if isinstance(node, exp.Window):
            raise self.unsupported("window function", node)
        if having:
            raise self.unsupported("HAVING operand (only aggregates, group-by columns, constants and "
                                   "+ - * / over them)", node)
        if node.find(exp.AggFunc) is not None:
            raise self.unsupported("nested aggregate", node)
        # CASE, coalesce, CAST, string and date functions…: the scalar expression compiler
        return ScalarTranslator(self.column, self.dialect).expr(node)

    def _condition(self, node: exp.Expression) -> Expr:
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            return ("and", self._condition(node.this), self._condition(node.expression))
        if isinstance(node, exp.Or):
            return ("or", self._condition(node.this), self._condition(node.expression))
        if isinstance(node, exp.Not):
            return ("not", self._condition(node.this))
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            out = ("isnull", self._scalar(node.this, True))
            return ("not", out) if node.args.get("negate") else out  # PostgreSQL: IS NOT NULL
        if isinstance(node, exp.Between):
            v = self._scalar(node.this, True)
            return ("and", (">=", v, self._scalar(node.args["low"], True)),
                    ("<=", v, self._scalar(node.args["high"], True)))
        op = _CMP.get(type(node))
        if op is None:
            raise self.unsupported("HAVING condition (only comparisons, BETWEEN, IS NULL, AND/OR/NOT)", node)
        return (op, self._scalar(node.this, True), self._scalar(node.expression, True))


def _default_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Star):
        return "count_star()"
    return node.sql(dialect="duckdb").lower()


def _where(node: exp.Expression) -> str:
    meta = getattr(node, "meta", None) or {}
    return f" at line {meta['line']}, column {meta['col']}" if "line" in meta else ""
