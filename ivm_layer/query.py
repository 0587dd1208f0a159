"""The query model: generalized conjunctive queries (GCQs) over GMRs (paper 000 §2).

A GCQ is ``π_out(r1(x1) ⋈ … ⋈ rn(xn) | θ1 ∧ … ∧ θm)``. Equality joins are expressed by
shared variables; every other comparison is a :class:`Predicate`. Variables are plain
strings. An atom maps each column of its table to a variable, or to ``None`` when the
query never references that column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import IVMError
from .identifiers import catalog_key

#: Comparison operators supported in predicates, with the operator obtained by swapping sides.
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<>": "<>"}
#: Order comparisons: the only ones that join atoms, are indexed and reasoned about transitively.
ORDER_OPS = frozenset({"<", "<=", ">", ">=", "="})
#: Filters of one column against constants (``offset`` holds the constant(s) or pattern).
UNARY_OPS = frozenset({"in", "not in", "like", "not like", "ilike", "not ilike", "is null",
                       "is not null", "never", "expr"})


@dataclass(frozen=True)
class Condition:
    """A condition of any shape over one atom's variables (``Predicate.op == "expr"``): an
    expression tree (:mod:`ivm_layer.engine.scalar`) that must be TRUE; NULL inputs do not
    make a row inert (``coalesce(x, 0) > 1`` holds for a NULL ``x``)."""

    expr: tuple
    reads: frozenset
    text: str
    dialect: str = "duckdb"

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Atom:
    """One occurrence of a relation in the query (self-joins give several atoms)."""

    relation: str
    alias: str
    vars: tuple[str | None, ...]  # one entry per table column

    @property
    def varset(self) -> frozenset[str]:
        return frozenset(v for v in self.vars if v is not None)


@dataclass(frozen=True)
class Predicate:
    """``left op right + offset``; with ``right is None`` it is ``left op offset`` (a constant filter)."""

    left: str
    op: str
    right: str | None
    offset: Any = 0

    def __post_init__(self) -> None:
        # computed once: the planner asks for it in its inner loops (not a field: eq/hash unchanged)
        if self.right is not None:
            vs = frozenset((self.left, self.right))
        elif self.op == "expr":
            vs = self.offset.reads
        else:
            vs = frozenset((self.left,))
        object.__setattr__(self, "_vars", vs)

    @property
    def vars(self) -> frozenset[str]:
        return self._vars

    def flipped(self) -> Predicate:
        """The same predicate written with the sides swapped: ``right op' left - offset``."""
        if self.right is None:
            raise ValueError("a constant filter has no right-hand variable")
        off = self.offset
        return Predicate(self.right, FLIP[self.op], self.left, (-off) if off else 0)

    def oriented(self, left: str) -> Predicate:
        """This predicate written with ``left`` on the left-hand side."""
        return self if self.left == left else self.flipped()

    def __str__(self) -> str:
        if self.op in ("is null", "is not null"):
            return f"{self.left} {self.op.upper()}"
        if self.op == "never":
            return f"{self.left} compared with NULL (never true)"
        if self.op == "expr":
            return self.offset.text
        if self.op in UNARY_OPS:
            return f"{self.left} {self.op.upper()} {self.offset!r}"
        if self.right is None:
            return f"{self.left} {self.op} {self.offset!r}"
        off = self.offset
        if not off:
            return f"{self.left} {self.op} {self.right}"
        sign = "-" if _is_negative(off) else "+"
        return f"{self.left} {self.op} {self.right} {sign} {abs(off)}"


def _is_negative(value: Any) -> bool:
    try:
        return value < 0
    except TypeError:
        try:
            return value < type(value)()
        except Exception:  # noqa: BLE001 - unknown offset type: print as is
            return False


@dataclass
class GCQ:
    """A generalized conjunctive query with a bag (multiset) semantics.

    ``output`` lists one variable per output column (a variable may appear more than
    once); ``columns`` are the output column names.
    """

    atoms: list[Atom]
    predicates: list[Predicate]
    output: list[str]
    columns: list[str]
    schema: dict[str, list[str]] = field(default_factory=dict)
    distinct: bool = False  # SELECT DISTINCT: set semantics on top of the bag
    #: GROUP BY / aggregates on top of the join (then ``output`` are the group-by variables)
    aggregate: AggregateSpec | None = None
    #: computed columns / residual filters on top of the join (then ``output`` are the variables
    #: they read, and ``distinct`` applies to the projected rows)
    projection: ProjectionSpec | None = None

    @property
    def out(self) -> frozenset[str]:
        return frozenset(self.output)

    @property
    def variables(self) -> frozenset[str]:
        out: set[str] = set()
        for a in self.atoms:
            out |= a.varset
        return frozenset(out)

    def validate(self) -> None:
        """Check the internal consistency of the query (variables used exist in some atom)."""
        allv = self.variables
        for v in self.output:
            if v not in allv:
                raise IVMError(f"output variable {v!r} occurs in no atom")
        for p in self.predicates:
            missing = p.vars - allv
            if missing:
                raise IVMError(f"predicate {p} uses unknown variables {sorted(missing)}")

    def __str__(self) -> str:
        body = " ⋈ ".join(
            f"{a.relation}({', '.join(v or '_' for v in a.vars)})" for a in self.atoms
        )
        preds = " ∧ ".join(str(p) for p in self.predicates)
        outs = ", ".join(self.output)
        return f"π[{outs}]({body}{' | ' + preds if preds else ''})"


def normalize_schema(schema: dict, dialect: str = "duckdb") -> dict[str, list[str]]:
    """Accept ``{table: [cols]}`` or ``{table: {col: type}}`` and return ``{table: [cols]}``, names
    as the backend's catalog holds them made keys (:func:`ivm_layer.identifiers.catalog_key`)."""
    if not isinstance(schema, dict) or not schema:
        raise IVMError("schema must be a non-empty dict {table: [columns]} or {table: {column: type}}")
    out: dict[str, list[str]] = {}
    for table, cols in schema.items():
        if isinstance(cols, dict):
            names = list(cols.keys())
        elif isinstance(cols, (list, tuple)):
            names = list(cols)
        else:
            raise IVMError(f"schema of table {table!r} must be a list of column names or a dict of column types")
        if not names:
            raise IVMError(f"table {table!r} has no columns")
        lowered = [catalog_key(str(c), dialect) for c in names]
        if len(set(lowered)) != len(lowered):
            raise IVMError(f"table {table!r} has duplicate column names")
        out[catalog_key(str(table), dialect)] = lowered
    return out


def schema_types(schema: dict, dialect: str = "duckdb") -> dict[str, dict[str, str]]:
    """Column types from a ``{table: {col: type}}`` schema (empty dicts when only names were given)."""
    out: dict[str, dict[str, str]] = {}
    for table, cols in schema.items():
        if isinstance(cols, dict):
            out[catalog_key(str(table), dialect)] = {catalog_key(str(c), dialect): str(t) for c, t in cols.items()}
        else:
            out[catalog_key(str(table), dialect)] = {}
    return out


# -- aggregates ---------------------------------------------------------------------------
#: Scalar expressions of aggregate arguments and HAVING are small trees of tuples:
#: ``("var", v)``, ``("const", value)``, ``("agg", i)`` / ``("grp", i)`` (the i-th
#: aggregate's result / group-by value, HAVING only), ``("neg", e)``, ``(op, left, right)`` for op in + - * / and the comparisons, and
#: ``("and"|"or", e1, e2)``, ``("not", e)``, ``("isnull", e)``.
Expr = tuple

AGG_FUNCS = frozenset({"count", "sum", "avg", "min", "max"})


def expr_vars(e: Expr) -> frozenset[str]:
    """Variables an expression reads."""
    return tree_vars(e)


def expr_str(e: Expr) -> str:
    """Readable form of an expression (EXPLAIN, errors)."""
    tag = e[0]
    if tag == "var":
        return e[1]
    if tag == "const":
        return repr(e[1])
    if tag == "agg":
        return f"agg#{e[1]}"
    if tag == "grp":
        return f"group#{e[1]}"
    if tag == "neg":
        return f"-({expr_str(e[1])})"
    if tag == "not":
        return f"NOT ({expr_str(e[1])})"
    if tag == "isnull":
        return f"({expr_str(e[1])}) IS NULL"
    if len(e) == 3 and all(isinstance(x, tuple) and x and isinstance(x[0], str) for x in e[1:]):
        return f"({expr_str(e[1])} {tag.upper()} {expr_str(e[2])})"
    if tag == "fn":
        return f"{e[1]}({', '.join(expr_str(a) for a in e[2])})"
    if tag == "case":
        whens = " ".join(f"WHEN {expr_str(c)} THEN {expr_str(v)}" for c, v in e[1])
        return f"CASE {whens} ELSE {expr_str(e[2])} END"
    args = (expr_str(a) if isinstance(a, tuple) and a and isinstance(a[0], str) else repr(a) for a in e[1:])
    return f"{tag}({', '.join(args)})"


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call: ``func([DISTINCT] arg)``; ``arg is None`` is ``COUNT(*)``."""

    func: str
    arg: Expr | None
    distinct: bool = False

    def __str__(self) -> str:
        inner = "*" if self.arg is None else ("DISTINCT " if self.distinct else "") + expr_str(self.arg)
        return f"{self.func.upper()}({inner})"


@dataclass
class AggregateSpec:
    """The aggregation on top of a GCQ whose output variables are the group-by variables.

    ``items`` gives the view's columns in SELECT order: ``("group", i)`` (the i-th group-by
    variable) or ``("agg", j)`` (``aggregates[j]``). ``aggregates`` also holds those only
    HAVING reads. ``grouped`` is False for a global aggregate (one row even over no input).
    """

    group_vars: list[str]
    aggregates: list[Aggregate]
    items: list[tuple[str, int]]
    columns: list[str]
    having: Expr | None = None
    grouped: bool = True
    dialect: str = "duckdb"  # AVG(numeric) is a float in DuckDB, a numeric in PostgreSQL


# -- computed columns ---------------------------------------------------------------------
@dataclass
class ProjectionSpec:
    """Output rows computed from the join's output variables: ``exprs[i]`` gives column
    ``columns[i]``; only rows where every ``residual`` condition is TRUE are kept (conditions
    between tables that are not ``column ± constant``). Expression trees use the tags of
    :mod:`ivm_layer.engine.scalar`; ``texts`` are the user's SQL of the residual conditions."""

    exprs: list[tuple]
    columns: list[str]
    residual: list[tuple] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    distinct: bool = False
    dialect: str = "duckdb"


def tree_vars(e: Any) -> frozenset[str]:
    """Variables an expression tree of :mod:`ivm_layer.engine.scalar` reads."""
    if isinstance(e, tuple):
        if len(e) == 2 and e[0] == "var" and isinstance(e[1], str):
            return frozenset((e[1],))
        out: frozenset[str] = frozenset()
        for x in e:
            out |= tree_vars(x)
        return out
    return frozenset()


def tree_rename(e: Any, f) -> Any:
    """The expression tree with every variable ``v`` replaced by ``f(v)``."""
    if isinstance(e, tuple):
        if len(e) == 2 and e[0] == "var" and isinstance(e[1], str):
            return ("var", f(e[1]))
        if len(e) == 2 and e[0] == "const":
            return e
        return tuple(tree_rename(x, f) for x in e)
    return e


@dataclass
class SetOperation:
    """``left UNION|EXCEPT|INTERSECT [ALL] right``: ``branches`` are GCQs or SetOperations with
    the same number of columns; ``columns`` are the first branch's names."""

    kind: str  # "union" | "except" | "intersect"
    all: bool
    branches: list
    columns: list[str]


@dataclass
class SemiJoin:
    """Rows of ``left`` kept by a subquery condition on their key (``[NOT] EXISTS``, ``[NOT] IN``).

    ``left`` outputs the visible columns followed by the key columns; ``right`` outputs the
    key columns the subquery produces. ``mode`` is ``"exists"``, ``"not exists"``, ``"in"`` or
    ``"not in"`` (SQL's NULL rules: ``x NOT IN (…)`` is never true when the subquery yields a
    NULL, and always true when it yields nothing)."""

    mode: str
    left: Any
    right: Any
    nkeys: int
    columns: list[str]
    distinct: bool = False
    text: str = ""


@dataclass
class Derived:
    """An outer query over nested views: ``nested`` pairs a derived relation name with the
    definition whose change stream feeds it; ``outer`` reads those relations like tables."""

    nested: list
    outer: Any


@dataclass
class JoinTree:
    """One join of a join tree with outer joins: ``left <kind> JOIN right``. ``left`` / ``right``
    are definitions (the rows of one table or of an inner join, their columns the variables
    ``left_vars`` / ``right_vars``, ``"alias.column"``) or further :class:`JoinTree` nodes. The ON
    condition is split into key expressions (``left_keys[i] = right_keys[i]``), a condition on
    each side's own columns (a row failing it never matches) and, for inner joins only, a
    ``residual`` condition on the joined row. Expression trees as in :class:`ProjectionSpec`."""

    kind: str  # "inner" | "left" | "right" | "full"
    left: Any
    right: Any
    left_vars: list[str]
    right_vars: list[str]
    left_keys: list[tuple] = field(default_factory=list)
    right_keys: list[tuple] = field(default_factory=list)
    left_cond: tuple | None = None
    right_cond: tuple | None = None
    residual: tuple | None = None
    text: str = ""
    dialect: str = "duckdb"

    @property
    def vars(self) -> list[str]:
        return list(self.left_vars) + list(self.right_vars)


@dataclass
class JoinQuery:
    """A SELECT over a join tree with outer joins: ``projection`` reads the tree's variables
    (its ``residual`` holds the WHERE conditions that could not move into an input)."""

    tree: JoinTree
    projection: ProjectionSpec
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> table (types, EXPLAIN)


# -- window functions -----------------------------------------------------------------------
RANKING = ("row_number", "rank", "dense_rank")


@dataclass(frozen=True)
class WindowFunc:
    """One window function of a level: ``func`` over the input position ``arg`` (None for
    ``COUNT(*)`` and the ranking functions); ``frame`` is ``"rows"``, ``"range"`` or
    ``"partition"``; ``offset`` / ``default`` are LAG's and LEAD's."""

    func: str
    arg: int | None = None
    frame: str = "range"
    offset: int = 1
    default: Any = None
    text: str = ""


@dataclass(frozen=True)
class WindowSpec:
    """``OVER (PARTITION BY partition ORDER BY order)`` (positions of the input row; order items
    are ``(position, descending, nulls_first)``), its functions, and an optional Top-N filter
    ``cap = (function index, lo, hi)``: only rows whose ranking value is in ``[lo, hi]``."""

    partition: tuple[int, ...]
    order: tuple[tuple[int, bool, bool], ...]
    funcs: tuple[WindowFunc, ...]
    cap: tuple[int, int, float] | None = None
    text: str = ""


@dataclass
class WindowQuery:
    """A SELECT with window functions: ``inner`` (any definition) gives the rows and the
    expressions the windows read; ``levels`` (one per distinct OVER clause) each append their
    functions' values to the row; ``names`` names every position of the resulting row (the inner
    columns, then each level's functions); ``projection`` reads those names (the SELECT list, the
    filters that stay on top). A level's ``cap`` is a Top-N filter on one of its ranking values."""

    inner: Any
    levels: list
    names: list[str]
    projection: ProjectionSpec
