"""sqlglot scalar expressions → expression trees (:data:`ivm_layer.query.Expr`).

The trees are compiled to closures by :mod:`ivm_layer.engine.scalar`. Supported: columns,
constants, ``+ - * / // %``, comparisons, ``AND/OR/NOT``, ``IS [NOT] NULL``, ``BETWEEN``,
``[NOT] IN (…)``, ``[NOT] [I]LIKE`` with a constant pattern, ``CASE``, ``coalesce``,
``nullif``, ``CAST``/``::``, ``upper/lower/length/substr/||/concat/trim/ltrim/rtrim``,
``abs/round/floor/ceil``, ``extract``/``date_part``/``date_trunc`` and fixed intervals. A
function outside that set is an :class:`UnsupportedSQLError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..query import Expr
from .literals import NOT_CONST, constant, strip_parens, unsupported

NONDETERMINISTIC = frozenset({
    "now", "current_timestamp", "current_date", "current_time", "random", "rand", "uuid", "gen_random_uuid",
    "clock_timestamp", "statement_timestamp", "transaction_timestamp", "localtimestamp", "localtime", "today",
    "get_current_time", "timeofday", "setseed", "nextval", "currval"})
_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.IntDiv: "//", exp.Mod: "%"}
_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_SIMPLE = {exp.Upper: "upper", exp.Lower: "lower", exp.Length: "length", exp.Abs: "abs"}
_PARTS = {"year": "year", "years": "year", "y": "year", "month": "month", "months": "month", "mon": "month",
          "day": "day", "days": "day", "d": "day", "dayofmonth": "day", "hour": "hour", "hours": "hour",
          "h": "hour", "minute": "minute", "minutes": "minute", "m": "minute", "second": "second",
          "seconds": "second", "s": "second", "quarter": "quarter", "dow": "dow", "dayofweek": "dow",
          "isodow": "isodow", "doy": "doy", "dayofyear": "doy", "week": "week", "weeks": "week", "w": "week",
          "epoch": "epoch", "millisecond": "millisecond", "milliseconds": "millisecond", "ms": "millisecond",
          "microsecond": "microsecond", "microseconds": "microsecond", "us": "microsecond"}
_TRUNC_PARTS = {"year", "quarter", "month", "week", "day", "hour", "minute", "second"}
_CASTS = ("integer", "int", "bigint", "smallint", "tinyint", "hugeint", "double", "float", "real", "decimal",
          "numeric", "varchar", "text", "string", "date", "timestamp", "datetime", "boolean", "bool")


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    try:
        return node.sql_name().lower()
    except Exception:  # noqa: BLE001 - naming is best effort
        return type(node).__name__.lower()


class ScalarTranslator:
    """Translate expressions of one SELECT; ``column`` resolves a Column to its variable."""

    def __init__(self, column: Callable[[exp.Column], str], dialect: str = "duckdb") -> None:
        self.column = column
        self.dialect = dialect
        #: variables whose values must have this kind for the expression to make sense
        self.kinds: dict[str, str] = {}

    def condition(self, node: exp.Expression) -> Expr:
        return self.expr(node)

    def expr(self, node: exp.Expression) -> Expr:
        node = strip_parens(node)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise unsupported("* inside an expression", node)
            return ("var", self.column(node))
        const = constant(node, decimals=True)
        if const is not NOT_CONST:
            return ("const", const)
        if isinstance(node, exp.Neg):
            return ("neg", self._typed(node.this, "number"))
        op = _ARITH.get(type(node))
        if op is not None:
            return self._arith(op, node)
        op = _CMP.get(type(node))
        if op is not None:
            a, b = self.expr(node.this), self.expr(node.expression)
            self._kind_from_const(a, b)
            return (op, a, b)
        if isinstance(node, exp.And):
            return ("and", self.expr(node.this), self.expr(node.expression))
        if isinstance(node, exp.Or):
            return ("or", self.expr(node.this), self.expr(node.expression))
        if isinstance(node, exp.Not):
            return ("not", self.expr(node.this))
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise unsupported("IS with something other than NULL", node)
            out = ("isnull", self.expr(node.this))
            return ("not", out) if node.args.get("negate") else out  # PostgreSQL: IS NOT NULL
        if isinstance(node, exp.Between):
            v = self.expr(node.this)
            lo, hi = self.expr(node.args["low"]), self.expr(node.args["high"])
            self._kind_from_const(v, lo)
            return ("and", (">=", v, lo), ("<=", v, hi))
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise unsupported("IN (subquery)", node)
            v = self.expr(node.this)
            items = tuple(self.expr(x) for x in node.expressions)
            for it in items:
                self._kind_from_const(v, it)
            out: Expr = ("in", v, items)
            return ("not", out) if node.args.get("negate") else out
        if isinstance(node, (exp.Like, exp.ILike)):
            if node.args.get("escape") is not None:
                raise unsupported("LIKE … ESCAPE", node)
            pattern = constant(node.expression)
            if not isinstance(pattern, str):
                raise unsupported("LIKE pattern that is not a string constant", node)
            out = ("like", self._typed(node.this, "text"), pattern, isinstance(node, exp.ILike))
            return ("not", out) if node.args.get("negate") else out
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self._cast(node)
        return self._function(node)

    # -- pieces ---------------------------------------------------------------------------
    def _typed(self, node: exp.Expression, kind: str) -> Expr:
        e = self.expr(node)
        if e[0] == "var":
            self.kinds.setdefault(e[1], kind)
        return e

    def _kind_from_const(self, a: Expr, b: Expr) -> None:
        from ..engine.leaves import value_kind

        for x, y in ((a, b), (b, a)):
            if x[0] == "var" and y[0] == "const" and y[1] is not None:
                self.kinds.setdefault(x[1], value_kind(y[1]))

    def _arith(self, op: str, node: exp.Expression) -> Expr:
        a, b = self.expr(node.this), self.expr(node.expression)
        temporal = any(x[0] == "const" and hasattr(x[1], "days") or
                       x[0] == "const" and hasattr(x[1], "year") for x in (a, b))
        if not temporal:
            for x in (a, b):
                if x[0] == "var":
                    self.kinds.setdefault(x[1], "number")
        for x in (a, b):
            if x[0] == "const" and isinstance(x[1], str):
                raise unsupported(f"arithmetic ({op}) on a string constant", node)
        return (op, a, b)

    def _case(self, node: exp.Case) -> Expr:
        subject = node.this
        whens = []
        for branch in node.args.get("ifs") or []:
            cond = branch.this
            value = self.expr(branch.args["true"])
            if subject is not None:
                c: Expr = ("=", self.expr(subject), self.expr(cond))
            else:
                c = self.expr(cond)
            whens.append((c, value))
        default = node.args.get("default")
        return ("case", tuple(whens), self.expr(default) if default is not None else ("const", None))

    def _cast(self, node: exp.Expression) -> Expr:
        to = node.args.get("to")
        target = to.sql(dialect="duckdb").lower().replace(" ", "") if to is not None else ""
        base = target.split("(")[0]
        if base not in _CASTS:
            raise unsupported(f"CAST to {target or '?'} (supported: integer types, double, decimal, varchar, "
                              "date, timestamp, boolean)", node)
        return ("cast", self.expr(node.this), target)

    def _part(self, node: exp.Expression | None, whole: exp.Expression) -> str:
        if node is None:
            raise unsupported("date part", whole)
        text = node.name if isinstance(node, (exp.Var, exp.Literal, exp.Identifier, exp.Column)) else ""
        part = _PARTS.get(str(text).lower())
        if part is None:
            raise unsupported(f"date part {str(text)[:20]!r}", whole)
        return part

    def _function(self, node: exp.Expression) -> Expr:
        if isinstance(node, exp.Window) or node.find(exp.Window) is not None:
            raise unsupported("window function", node)
        if isinstance(node, exp.AggFunc):
            raise unsupported(f"aggregate {_function_name(node)}() here", node)
        if isinstance(node, (exp.Select, exp.Subquery, exp.Exists)):
            raise unsupported("subquery in an expression", node)
        name = _function_name(node)
        if name in NONDETERMINISTIC or isinstance(node, (exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime)):
            raise unsupported(f"non-deterministic function {name}() (its value changes without any update)", node)
        simple = _SIMPLE.get(type(node))
        if simple is not None:
            kind = "text" if simple in ("upper", "lower", "length") else "number"
            return ("fn", simple, (self._typed(node.this, kind),))
        if isinstance(node, exp.Coalesce):
            args = [node.this] + list(node.expressions)
            return ("fn", "coalesce", tuple(self.expr(a) for a in args))
        if isinstance(node, exp.Nullif):
            return ("fn", "nullif", (self.expr(node.this), self.expr(node.expression)))
        if isinstance(node, exp.DPipe):
            return ("fn", "concat_strict", (self.expr(node.this), self.expr(node.expression)))
        if isinstance(node, exp.Concat):
            return ("fn", "concat", tuple(self.expr(a) for a in node.expressions))
        if isinstance(node, exp.Substring):
            args = [self._typed(node.this, "text"), self._typed(node.args["start"], "number")]
            if node.args.get("length") is not None:
                args.append(self._typed(node.args["length"], "number"))
            return ("fn", "substr", tuple(args))
        if isinstance(node, exp.Trim):
            pos = str(node.args.get("position") or "").upper()
            fname = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(pos, "trim")
            if name in ("ltrim", "rtrim"):
                fname = name
            args = [self._typed(node.this, "text")]
            if node.args.get("expression") is not None:
                args.append(self.expr(node.args["expression"]))
            return ("fn", fname, tuple(args))
        if isinstance(node, exp.Round):
            args = [self._typed(node.this, "number")]
            if node.args.get("decimals") is not None:
                args.append(self.expr(node.args["decimals"]))
            return ("fn", "round", tuple(args))
        if isinstance(node, (exp.Floor, exp.Ceil)):
            if node.args.get("decimals") is not None or node.args.get("to") is not None:
                raise unsupported(f"{name}() with more than one argument", node)
            return ("fn", "floor" if isinstance(node, exp.Floor) else "ceil", (self._typed(node.this, "number"),))
        if isinstance(node, exp.Extract):
            return ("extract", self._part(node.this, node), self.expr(node.expression))
        if isinstance(node, (exp.Year, exp.Month, exp.Day)):
            return ("extract", type(node).__name__.lower(), self.expr(node.this))
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
            part = self._part(node.args.get("unit"), node)
            if part not in _TRUNC_PARTS:
                raise unsupported(f"date_trunc to {part!r}", node)
            return ("trunc", part, self.expr(node.this))
        if isinstance(node, exp.Anonymous) and name in ("date_part", "datepart") and len(node.expressions) == 2:
            return ("extract", self._part(node.expressions[0], node), self.expr(node.expressions[1]))
        if isinstance(node, exp.Anonymous) and name in ("substr", "substring") and len(node.expressions) in (2, 3):
            return ("fn", "substr", tuple(self.expr(a) for a in node.expressions))
        if isinstance(node, exp.Func):
            raise unsupported(f"function {name}() (supported: coalesce, nullif, CAST, upper, lower, length, "
                              "substr, ||, concat, trim, ltrim, rtrim, abs, round, floor, ceil, extract, "
                              "date_part, date_trunc)", node)
        raise unsupported(f"{type(node).__name__.lower()} expression", node)

