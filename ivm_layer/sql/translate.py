"""Translate the select–from–where subset of SQL into a :class:`~ivm_layer.query.GCQ`.

Supported: ``SELECT`` of columns, ``t.*`` or ``*`` (with column aliases); ``FROM`` lists and
``[INNER|CROSS] JOIN … ON / USING``; table aliases including self-joins; ``WHERE``/``ON``
conjunctions of ``=, <, <=, >, >=`` and ``BETWEEN`` between columns, ``column ± constant``
(numbers, or fixed-length ``INTERVAL``s for timestamps) and constants; leaf filters
``<>``, ``[NOT] IN (…)``, ``[NOT] [I]LIKE``, ``IS [NOT] NULL`` on one table's columns.
Equalities between columns become shared variables (union–find); every other comparison
becomes a :class:`~ivm_layer.query.Predicate`. ``GROUP BY``/aggregates/``HAVING`` on top of
the join are read by :mod:`.aggregates` into ``GCQ.aggregate`` (the GCQ's output variables
are then the group-by variables). Anything else raises
:class:`~ivm_layer.errors.UnsupportedSQLError` naming the construct and its position.
"""

from __future__ import annotations

from sqlglot import exp

from ..engine.scalar import compile_condition
from ..errors import SQLError, UnsupportedSQLError
from ..query import (
    GCQ,
    UNARY_OPS,
    Atom,
    Condition,
    Predicate,
    ProjectionSpec,
    normalize_schema,
    tree_rename,
    tree_vars,
)
from .aggregates import AggregateTranslator, is_aggregate_query
from .comparisons import ComparisonReader, Side, offset_sub
from .literals import position as _position
from .literals import strip_parens as _strip_parens
from .literals import unsupported as _unsupported
from .literals import user_text
from .parse import has_nested_from, inline_nested, parse_select
from .scalar import ScalarTranslator

_ALLOWED_SELECT_ARGS = {"expressions", "from_", "from", "joins", "where", "kind", "hint", "distinct"}
_ALLOWED_AGGREGATE_ARGS = _ALLOWED_SELECT_ARGS | {"group", "having"}
_CLAUSE_NAMES = {"with": "WITH", "with_": "WITH", "order": "ORDER BY", "limit": "LIMIT", "offset": "OFFSET",
                 "qualify": "QUALIFY", "windows": "WINDOW", "sample": "USING SAMPLE", "group": "GROUP BY",
                 "having": "HAVING", "laterals": "LATERAL", "pivots": "PIVOT", "settings": "SETTINGS",
                 "prewhere": "PREWHERE", "connect": "CONNECT BY", "match": "MATCH_RECOGNIZE",
                 "into": "INTO", "locks": "FOR UPDATE", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY",
                 "sort": "SORT BY", "options": "OPTION"}


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # Keep the lexicographically smaller name as representative: stable variable names.
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


def translate_select(sql: str, schema: dict, dialect: str = "duckdb") -> GCQ:
    """Translate a select–from–where query into a GCQ over ``schema``."""
    tables = normalize_schema(schema, dialect)
    select = parse_select(sql, dialect)
    if not isinstance(select, exp.Select):
        raise _unsupported("UNION / INTERSECT / EXCEPT here", select)
    return translate_tree(select, tables, dialect)


def translate_tree(select: exp.Select, tables: dict[str, list[str]], dialect: str = "duckdb") -> GCQ:
    """Translate a parsed SELECT (WITH items and FROM subqueries are inlined first)."""
    if has_nested_from(select):
        select = inline_nested(select, tables, dialect)
    try:
        return _Translator(select, tables, dialect).run()
    except RecursionError:
        raise SQLError("the definition is nested too deeply") from None
    except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError, IndexError) as e:
        # a shape the translator does not expect: refuse it rather than crash
        raise UnsupportedSQLError(f"unsupported in incremental views: this definition could not be "
                                  f"translated ({type(e).__name__}: {str(e)[:120]})") from None

#: Clauses on a FROM table that change which rows it gives: none can be maintained from its changes.
_TABLE_CLAUSES = {
    "sample": "TABLESAMPLE (a sample of the table cannot be maintained incrementally)",
    "only": "ONLY (table inheritance)",
    "hints": "table hints",
    "version": "time travel (a table as of a time or version)",
    "joins": "joins inside a table reference",
    "laterals": "LATERAL",
    "pivots": "PIVOT / UNPIVOT",
    "when": "a table condition",
    "changes": "CHANGES",
    "partition": "PARTITION selection",
}


class _Translator(ComparisonReader):
    def __init__(self, select: exp.Select, tables: dict[str, list[str]], dialect: str = "duckdb") -> None:
        self.select = select
        self.tables = tables
        self.dialect = dialect
        self.scalar = ScalarTranslator(self._column, dialect)
        self.expr_conditions: list[tuple[tuple, exp.Expression]] = []  # conditions of any shape
        self.merged: set[str] = set()  # "alias.col" a USING / NATURAL join merged into an earlier column
        #: the columns ``SELECT *`` lists, in the dialect's order: (name, "alias.col")
        self.star: list[tuple[str, str]] = []
        self.aliases: dict[str, str] = {}  # alias -> table
        self.alias_order: list[str] = []
        self.uf = _UnionFind()
        self.referenced: set[str] = set()  # "alias.col"
        self.comparisons: list[tuple[Side, str, Side, exp.Expression]] = []

    # -- FROM ---------------------------------------------------------------------------
    def run(self) -> GCQ:
        sel = self.select
        aggregating = is_aggregate_query(sel)
        allowed = _ALLOWED_AGGREGATE_ARGS if aggregating else _ALLOWED_SELECT_ARGS
        for key, value in sel.args.items():
            if value in (None, [], False):
                continue
            if key not in allowed:
                node = value if isinstance(value, exp.Expression) else None
                clause = _CLAUSE_NAMES.get(key, key.upper())
                if key in ("order", "limit", "offset"):
                    raise _unsupported(f"{clause} inside an incremental view (a view is an unordered bag: "
                                       "order or limit when you read it)", node)
                raise _unsupported(f"{clause} clause", node)
        if sel.args.get("kind"):
            raise _unsupported(f"SELECT {sel.args['kind']}", sel)
        distinct = sel.args.get("distinct")
        if distinct is not None and distinct.args.get("on") is not None:
            raise _unsupported("DISTINCT ON", distinct)
        from_ = sel.args.get("from_") or sel.args.get("from")
        if from_ is None:
            raise SQLError("an incremental view needs a FROM clause")
        self._add_table(from_.this)
        self._star_join([])
        conditions: list[exp.Expression] = []
        for join in sel.args.get("joins") or []:
            side = (join.side or "").upper()
            kind = (join.kind or "").upper()
            if side:
                raise _unsupported(f"{side} OUTER JOIN", join)
            if kind not in ("", "INNER", "CROSS"):
                raise _unsupported(f"{kind} JOIN", join)
            method = str(join.args.get("method") or "").upper()
            if method and method != "NATURAL":
                raise _unsupported(f"{method} JOIN", join)
            self._add_table(join.this)
            using = [ident.name for ident in join.args.get("using") or []]
            if method == "NATURAL":
                right = self.tables[self.aliases[self.alias_order[-1]]]
                left = {c for a in self.alias_order[:-1] for c in self.tables[self.aliases[a]]
                        if f"{a}.{c}" not in self.merged}
                using = [c for c in right if c in left]
            for name in using:
                self._add_using(name, join)
            self._star_join(using)
            if join.args.get("on") is not None:
                conditions.append(join.args["on"])
        where = sel.args.get("where")
        if where is not None:
            conditions.append(where.this)
        for cond in conditions:
            agg = next((a for a in cond.find_all(exp.AggFunc) if a.find_ancestor(exp.Select) is sel), None)
            if agg is not None:
                raise _unsupported("aggregate in WHERE/ON (filter aggregates with HAVING)", agg)
            for conj in _conjuncts(cond):
                self._add_condition(conj)
        if aggregating:
            find = self.uf.find
            group_vars, spec = AggregateTranslator(sel, lambda c: find(self._column(c)), _unsupported,
                                                   self.dialect).run()
            gcq = self._build([(v, ("var", v)) for v in group_vars])
            if gcq.projection is not None:
                raise _unsupported("condition between tables that is not column ± constant, in a GROUP BY "
                                   "view", self.expr_conditions[0][1])
            spec.dialect = self.dialect
            gcq.aggregate = spec
        else:
            gcq = self._build(self._outputs())
        gcq.distinct = distinct is not None
        if gcq.projection is not None:
            gcq.projection.distinct, gcq.distinct = gcq.distinct, False
        return gcq

    def _add_table(self, node: exp.Expression) -> None:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            raise _unsupported("FROM item that is not a plain table (subqueries, functions)", node)
        for key, what in _TABLE_CLAUSES.items():
            if node.args.get(key):
                raise _unsupported(what, node)
        alias = node.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            raise _unsupported("column aliases on a FROM table (name the columns in the SELECT list)", node)
        if node.args.get("db") or node.args.get("catalog"):
            name = ".".join(part.name for part in node.parts)
        else:
            name = node.name
        if name not in self.tables:
            raise SQLError(f"unknown table {node.name!r}{_position(node)}; known: {', '.join(sorted(self.tables))}", sqlstate="42P01")
        alias = node.alias or node.name
        if alias in self.aliases:
            raise SQLError(f"duplicate table alias {alias!r}{_position(node)}: give each occurrence its own alias")
        self.aliases[alias] = name
        self.alias_order.append(alias)

    def _star_join(self, using: list[str]) -> None:
        """The ``SELECT *`` columns after joining the last FROM item (``using``: its USING /
        NATURAL columns). DuckDB keeps a USING column where the left side has it; PostgreSQL
        lists the USING columns first, then the other columns of both sides."""
        right = self.alias_order[-1]
        new = [(c, f"{right}.{c}") for c in self.tables[self.aliases[right]] if c not in using]
        if using and self.dialect == "postgres":
            merged = [next(x for x in self.star if x[0] == u) for u in using]
            self.star = merged + [x for x in self.star if x[0] not in using] + new
        else:
            self.star += new

    def _add_using(self, name: str, join: exp.Join) -> None:
        """``JOIN t USING (c)``: t.c equals the c of the single earlier FROM item that has it."""
        right = self.alias_order[-1]
        earlier = [a for a in self.alias_order[:-1] if name in self.tables[self.aliases[a]]
                   and f"{a}.{name}" not in self.merged]
        if name not in self.tables[self.aliases[right]] or not earlier:
            raise SQLError(f"USING column {name!r} must exist on both sides of the join{_position(join)}")
        if len(earlier) > 1:
            raise SQLError(f"USING column {name!r} is ambiguous on the left side ({', '.join(earlier)}){_position(join)}")
        for a in (earlier[0], right):
            self.referenced.add(f"{a}.{name}")
        self.uf.union(f"{earlier[0]}.{name}", f"{right}.{name}")
        self.merged.add(f"{right}.{name}")

    # -- columns ------------------------------------------------------------------------
    def _column(self, col: exp.Column) -> str:
        name = col.name
        qual = col.table if col.table else None
        if col.args.get("db") or col.args.get("catalog"):
            raise _unsupported("schema-qualified column", col)
        if qual is not None:
            if qual not in self.aliases:
                raise SQLError(f"unknown table or alias {col.table!r}{_position(col)}", sqlstate="42P01")
            if name not in self.tables[self.aliases[qual]]:
                raise SQLError(f"table {self.aliases[qual]!r} (alias {qual!r}) has no column {col.name!r}{_position(col)}")
            key = f"{qual}.{name}"
        else:
            # a USING / NATURAL column is one column: the merged copies are not candidates
            owners = [a for a in self.alias_order if name in self.tables[self.aliases[a]]
                      and f"{a}.{name}" not in self.merged]
            if not owners:
                raise SQLError(f"unknown column {col.name!r}{_position(col)}", sqlstate="42703")
            if len(owners) > 1:
                raise SQLError(f"column {col.name!r} is ambiguous{_position(col)}: qualify it with one of {', '.join(owners)}")
            key = f"{owners[0]}.{name}"
        self.referenced.add(key)
        self.uf.find(key)
        return key

    # -- WHERE / ON ---------------------------------------------------------------------
    def _add_condition(self, node: exp.Expression) -> None:
        """A conjunct: ``column ± constant`` comparisons and the simple filters feed the indexes;
        anything else becomes a condition of any shape (a leaf filter when one table's columns
        decide it, else a residual filter on the join's output)."""
        mark = len(self.comparisons)
        try:
            self._add_comparison(node)
            return
        except UnsupportedSQLError:
            del self.comparisons[mark:]
        self.expr_conditions.append((self.scalar.condition(node), node))

    # -- SELECT -------------------------------------------------------------------------
    def _outputs(self) -> list[tuple[str, tuple]]:
        """(name, expression) per output column; plain columns are ``("var", key)``."""
        outs: list[tuple[str, tuple]] = []
        for item in self.select.expressions:
            name = None
            node = item
            if isinstance(item, exp.Alias):
                name = item.alias
                node = item.this
            if isinstance(node, exp.Star):
                for c, key in self.star:
                    alias = key.split(".", 1)[0]
                    outs.append((c, ("var", self._column(exp.column(c, alias)))))
                continue
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                alias = node.table
                if alias not in self.aliases:
                    raise SQLError(f"unknown table or alias {node.table!r}{_position(node)}", sqlstate="42P01")
                for c in self.tables[self.aliases[alias]]:
                    outs.append((c, ("var", self._column(exp.column(c, alias)))))
                continue
            if isinstance(node, exp.Column):
                outs.append((name or node.name, ("var", self._column(node))))
                continue
            if isinstance(node, exp.Window) or node.find(exp.Window) is not None:
                raise _unsupported("window function", node)
            if isinstance(node, exp.AggFunc) or node.find(exp.AggFunc) is not None:
                raise _unsupported("aggregate function mixed with plain columns", node)
            outs.append((name or user_text(node, 200), self.scalar.expr(node)))
        if not outs:
            raise SQLError("empty SELECT list")
        return outs

    # -- build the GCQ ------------------------------------------------------------------
    def _build(self, outputs: list[tuple[str, tuple]]) -> GCQ:
        find = self.uf.find
        # Conditions without columns (WHERE 1 IN (1, 2)) are decided now: TRUE ones vanish, the
        # others make the view empty (a "never" filter on one column).
        never = False
        kept = []
        for cond, node in self.expr_conditions:
            if tree_vars(cond):
                kept.append((cond, node))
            elif compile_condition(cond, {}, self.dialect)(()) is not True:
                never = True
        self.expr_conditions = kept
        first = self.alias_order[0]
        first_key = f"{first}.{self.tables[self.aliases[first]][0]}"
        if not self.referenced or never:  # SELECT 1 FROM t: still one row per join result
            self._column(exp.column(self.tables[self.aliases[first]][0], first))
        for cond, _node in self.expr_conditions:
            for v in tree_vars(cond):
                find(v)
        atoms = []
        for alias in self.alias_order:
            table = self.aliases[alias]
            vars_ = tuple(
                find(f"{alias}.{c}") if f"{alias}.{c}" in self.referenced else None
                for c in self.tables[table]
            )
            atoms.append(Atom(table, alias, vars_))
        preds: list[Predicate] = []
        for left, op, right, _node in self.comparisons:
            if op in UNARY_OPS:
                preds.append(Predicate(find(left.column), op, None, right.offset))
            elif right.column is None:
                preds.append(Predicate(find(left.column), op, None, offset_sub(right.offset, left.offset)))
            else:
                offset = offset_sub(right.offset, left.offset)
                preds.append(Predicate(find(left.column), op, find(right.column), offset))
        if never:
            preds.append(Predicate(find(first_key), "never", None, None))
        residual, texts = [], []
        for cond, node in self.expr_conditions:
            cond = tree_rename(cond, find)
            reads = tree_vars(cond)
            text = user_text(node, 120)
            if reads and any(reads <= a.varset for a in atoms):
                preds.append(Predicate(min(reads), "expr", None, Condition(cond, reads, text, self.dialect)))
            else:
                residual.append(cond)
                texts.append(text)
        exprs = [tree_rename(e, find) for _, e in outputs]
        columns = [name for name, _ in outputs]
        projection = None
        if residual or any(e[0] != "var" for e in exprs):
            needed = list(dict.fromkeys(v for e in exprs + residual for v in sorted(tree_vars(e))))
            if not needed:  # only constants: the join's multiplicity still matters
                needed = [next(v for a in atoms for v in a.vars if v is not None)]
            projection = ProjectionSpec(exprs, columns, residual, texts, dialect=self.dialect)
            output, out_columns = needed, list(needed)
        else:
            output, out_columns = [e[1] for e in exprs], columns
        gcq = GCQ(
            atoms=atoms,
            predicates=preds,
            output=output,
            columns=out_columns,
            schema={t: list(cols) for t, cols in self.tables.items()},
        )
        gcq.projection = projection
        gcq.validate()
        return gcq


def _conjuncts(node: exp.Expression):
    node = _strip_parens(node)
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


