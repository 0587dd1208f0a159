"""FROM clauses with outer joins anywhere: chains and mixes of LEFT / RIGHT / FULL and inner joins
over any number of tables, parenthesized joins, ``USING`` / ``NATURAL`` → a :class:`JoinQuery`.

The FROM clause is read as a tree (sqlglot gives a left-deep list of joins, a parenthesized join
is a ``Subquery`` over a ``Table`` with joins). Each maximal subtree of inner joins becomes one
input — an ordinary select–project–join definition of the columns the query reads, with the
WHERE conjuncts that only read tables no outer join can NULL — and every other join becomes a
:class:`JoinTree` node maintained by :class:`ivm_layer.engine.outerjoin.JoinView`. The SELECT
list and the remaining WHERE conditions are a projection on top.

ON conditions of an outer join: equalities between an expression of one side and one of the
other (the join keys), and conditions on one side's columns; a condition between the two sides
that is not an equality is refused (it would need a nested loop per change). A ``USING`` column
is one column: the left one after an inner or LEFT join, the right one after a RIGHT join,
``coalesce(left, right)`` after a FULL join; ``SELECT *`` lists it once (where the left side has
it in DuckDB, first in PostgreSQL).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..engine.scalar import compile_condition
from ..errors import SQLError
from ..query import JoinQuery, JoinTree, ProjectionSpec, tree_vars
from .literals import position, strip_parens, unsupported, user_text
from .scalar import ScalarTranslator
from .shapes import conjuncts, is_paren_join, subquery_kind

_KINDS = {"": "inner", "INNER": "inner", "CROSS": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}


@dataclass
class Leaf:
    alias: str
    table: str
    node: exp.Expression


@dataclass
class Node:
    kind: str  # inner | left | right | full
    left: "Leaf | Node"
    right: "Leaf | Node"
    join: exp.Join
    using: list[str] = field(default_factory=list)

    @property
    def on(self) -> exp.Expression | None:
        return self.join.args.get("on")


# -- reading the FROM clause ------------------------------------------------------------------
def read_from(select: exp.Select, tables: dict[str, list[str]]) -> Leaf | Node:
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise SQLError("an incremental view needs a FROM clause")
    return _fold(_item(from_.this, tables), select.args.get("joins") or [], tables)


def _fold(tree: Leaf | Node, joins: list[exp.Join], tables) -> Leaf | Node:
    for j in joins:
        side = (j.side or "").upper()
        kind = (j.kind or "").upper()
        if kind not in ("", "INNER", "CROSS", "OUTER"):
            raise unsupported(f"{kind} JOIN", j)
        method = str(j.args.get("method") or "").upper()
        if method and method != "NATURAL":
            raise unsupported(f"{method} JOIN", j)
        if j.args.get("on") is not None and (j.args.get("using") or method):
            raise SQLError(f"a join has both ON and USING/NATURAL{position(j)}")
        right = _item(j.this, tables)
        node = Node(_KINDS[side] if side else _KINDS["" if kind == "OUTER" else kind], tree, right, j)
        if method == "NATURAL":
            left_names = {n for n, _ in visible(tree, tables, "duckdb")}
            node.using = [c for c, _ in visible(right, tables, "duckdb") if c in left_names]
        else:
            node.using = [i.name for i in j.args.get("using") or []]
        tree = node
    return tree


def _item(item: exp.Expression, tables) -> Leaf | Node:
    if is_paren_join(item):
        if item.alias:
            raise unsupported("an alias on a parenthesized join (name the tables inside it instead)", item)
        inner = item.this
        base = inner.copy()
        base.set("joins", None)
        return _fold(_item(base, tables), inner.args.get("joins") or [], tables)
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Table):
        return _item(item.this, tables)  # (t)
    if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier):
        raise unsupported("FROM item in a join tree that is not a table or a parenthesized join "
                          "(name the subquery as a view of its own)", item)
    name = item.name
    if name not in tables:
        raise SQLError(f"unknown table {item.name!r}{position(item)}; known: {', '.join(sorted(tables))}", sqlstate="42P01")
    return Leaf(item.alias or item.name, name, item)


def leaves(tree: Leaf | Node) -> list[Leaf]:
    if isinstance(tree, Leaf):
        return [tree]
    return leaves(tree.left) + leaves(tree.right)


def inner_only(tree: Leaf | Node) -> bool:
    return isinstance(tree, Leaf) or (tree.kind == "inner" and inner_only(tree.left) and inner_only(tree.right))


def visible(tree: Leaf | Node, tables, dialect: str) -> list[tuple[str, tuple]]:
    """The columns ``SELECT *`` lists for ``tree``: (name, expression tree)."""
    if isinstance(tree, Leaf):
        return [(c, ("var", f"{tree.alias}.{c}")) for c in tables[tree.table]]
    left, right = visible(tree.left, tables, dialect), visible(tree.right, tables, dialect)
    if not tree.using:
        return left + right
    merged = {}
    for u in tree.using:
        lx = [e for n, e in left if n == u]
        rx = [e for n, e in right if n == u]
        if len(lx) != 1 or len(rx) != 1:
            side = "left" if len(lx) != 1 else "right"
            raise SQLError(f"USING column {u!r} must exist exactly once on each side of the join "
                           f"({'missing' if not (lx if side == 'left' else rx) else 'ambiguous'} on the "
                           f"{side}){position(tree.join)}")
        merged[u] = (lx[0] if tree.kind in ("inner", "left") else rx[0] if tree.kind == "right"
                     else ("fn", "coalesce", (lx[0], rx[0])))
    rest_right = [(n, e) for n, e in right if n not in merged]
    if dialect == "postgres":
        return [(u, merged[u]) for u in tree.using] + [(n, e) for n, e in left if n not in merged] + rest_right
    return [(n, merged[n]) if n in merged else (n, e) for n, e in left] + rest_right


# -- the translation ---------------------------------------------------------------------------
class JoinTreeTranslator:
    """One SELECT over a join tree → :class:`JoinQuery` (see the module docstring)."""

    def __init__(self, select: exp.Select, tables: dict[str, list[str]], dialect: str, translate):
        self.select = select
        self.tables = tables
        self.dialect = dialect
        self.translate = translate
        self.tree = read_from(select, tables)
        self.aliases: dict[str, str] = {}
        for leaf in leaves(self.tree):
            if leaf.alias in self.aliases:
                raise SQLError(f"duplicate table alias {leaf.alias!r}{position(leaf.node)}: give each "
                               "occurrence its own alias")
            self.aliases[leaf.alias] = leaf.table
        self.nullable: set[str] = set()
        self._mark_nullable(self.tree)
        self.used: set[str] = set()  # variables the query reads ("alias.column")

    def _mark_nullable(self, tree) -> None:
        if isinstance(tree, Leaf):
            return
        if tree.kind in ("left", "full"):
            self.nullable |= {x.alias for x in leaves(tree.right)}
        if tree.kind in ("right", "full"):
            self.nullable |= {x.alias for x in leaves(tree.left)}
        self._mark_nullable(tree.left)
        self._mark_nullable(tree.right)

    # -- column resolution --------------------------------------------------------------------
    def _resolver(self, scope: list[tuple[str, tuple]], aliases: set[str]):
        return resolver(scope, aliases, self.aliases, self.tables)

    def _expr(self, node: exp.Expression, resolve) -> tuple:
        """``node`` as an expression tree; a column resolving to a USING merge is substituted."""
        subst: dict[str, tuple] = {}

        def column(col: exp.Column) -> str:
            e = resolve(col)
            if e[0] == "var":
                return e[1]
            key = f"\0merged{len(subst)}"
            subst[key] = e
            return key

        tree = ScalarTranslator(column, self.dialect).expr(node)
        if subst:
            tree = _substitute(tree, subst)
        self.used |= tree_vars(tree)
        return tree

    # -- the query ----------------------------------------------------------------------------
    def run(self) -> JoinQuery:
        sel = self.select
        top = visible(self.tree, self.tables, self.dialect)
        resolve = self._resolver(top, set(self.aliases))
        exprs, columns = [], []
        for item in sel.expressions:
            name = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Star):
                for n, e in top:
                    exprs.append(e)
                    columns.append(n)
                    self.used |= tree_vars(e)
                continue
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                a = node.table
                if a not in self.aliases:
                    raise SQLError(f"unknown table or alias {node.table!r}{position(node)}", sqlstate="42P01")
                for c in self.tables[self.aliases[a]]:
                    exprs.append(("var", f"{a}.{c}"))
                    columns.append(c)
                    self.used.add(f"{a}.{c}")
                continue
            if node.find(exp.Window) is not None:
                raise unsupported("window function over a join tree with outer joins (name the join as a "
                                  "view of its own)", node)
            exprs.append(self._expr(node, resolve))
            columns.append(name or (node.name if isinstance(node, exp.Column) else user_text(node, 200)))
        if not exprs:
            raise SQLError("empty SELECT list")
        pushed: dict[int, list[exp.Expression]] = {}
        residual, texts = [], []
        where = sel.args.get("where")
        groups = self._groups(self.tree)
        for cond in conjuncts(where.this) if where is not None else []:
            if subquery_kind(cond) is not None or cond.find(exp.Exists, exp.Subquery) is not None:
                raise unsupported("subquery condition in the WHERE of a join tree with outer joins (name "
                                  "the join as a view of its own)", cond)
            tree = self._expr(cond, resolve)
            target = self._push_target(cond, tree, groups)
            if target is not None:
                pushed.setdefault(target, []).append(_qualified(cond, resolve))
                continue
            residual.append(tree)
            texts.append(user_text(cond, 120))
        ons = self._on_conditions(self.tree)  # reads ON columns before the inputs are cut
        jt = self._node(self.tree, groups, pushed, ons)
        if not isinstance(jt, JoinTree):
            raise AssertionError("an outer-join tree has at least one outer join")
        spec = ProjectionSpec(exprs, columns, residual, texts, distinct=sel.args.get("distinct") is not None,
                              dialect=self.dialect)
        return JoinQuery(jt, spec, dict(self.aliases))

    # -- inputs -------------------------------------------------------------------------------
    def _groups(self, tree) -> list:
        """The maximal inner-join subtrees (each becomes one input)."""
        if inner_only(tree):
            return [tree]
        return self._groups(tree.left) + self._groups(tree.right)

    def _push_target(self, cond: exp.Expression, tree: tuple, groups: list) -> int | None:
        """The input a WHERE conjunct can move into: it reads only tables of that input that no
        outer join NULLs, through plain columns."""
        reads = {v.split(".")[0] for v in tree_vars(tree)}
        if not reads or reads & self.nullable:
            return None
        for i, g in enumerate(groups):
            if reads <= {x.alias for x in leaves(g)}:
                return i
        return None

    def _on_conditions(self, tree) -> dict[int, tuple]:
        """Per outer-join-tree node (by id): (keys, left cond, right cond, residual, text)."""
        out: dict[int, tuple] = {}
        if isinstance(tree, Leaf) or inner_only(tree):
            return out
        out.update(self._on_conditions(tree.left))
        out.update(self._on_conditions(tree.right))
        out[id(tree)] = self._split_on(tree)
        return out

    def _split_on(self, node: Node):
        lscope = visible(node.left, self.tables, self.dialect)
        rscope = visible(node.right, self.tables, self.dialect)
        la = {x.alias for x in leaves(node.left)}
        ra = {x.alias for x in leaves(node.right)}
        resolve = self._resolver(lscope + rscope, la | ra)
        lkeys, rkeys, lconds, rconds, resid = [], [], [], [], []
        for u in node.using:
            lkeys.append(next(e for n, e in lscope if n == u))
            rkeys.append(next(e for n, e in rscope if n == u))
            self.used |= tree_vars(lkeys[-1]) | tree_vars(rkeys[-1])
        on = node.on
        if on is None and not node.using and node.kind != "inner":
            raise SQLError(f"{node.kind.upper()} JOIN needs an ON or USING condition{position(node.join)}")
        never = False
        for c in conjuncts(on) if on is not None else []:
            if c.find(exp.Exists, exp.Subquery) is not None:
                raise unsupported("subquery in a join condition", c)
            tree = self._expr(c, resolve)
            owners = {v.split(".")[0] for v in tree_vars(tree)}
            if not owners:
                if compile_condition(tree, {}, self.dialect)(()) is not True:
                    never = True
                continue
            if owners <= la:
                lconds.append(tree)
                continue
            if owners <= ra:
                rconds.append(tree)
                continue
            cs = strip_parens(c)
            if isinstance(cs, exp.EQ):
                a, b = self._expr(cs.this, resolve), self._expr(cs.expression, resolve)
                oa = {v.split(".")[0] for v in tree_vars(a)}
                ob = {v.split(".")[0] for v in tree_vars(b)}
                if oa and ob and oa <= la and ob <= ra:
                    lkeys.append(a)
                    rkeys.append(b)
                    continue
                if oa and ob and oa <= ra and ob <= la:
                    lkeys.append(b)
                    rkeys.append(a)
                    continue
            if node.kind == "inner":
                resid.append(tree)
                continue
            raise unsupported(f"{node.kind.upper()} JOIN condition between the two sides that is not an "
                              "equality (write left_expression = right_expression; a condition on one side "
                              "alone is fine)", c)
        if never:
            lconds.append(("const", False))
            rconds.append(("const", False))
        text = user_text(on, 120) if on is not None else f"USING ({', '.join(node.using)})"
        return lkeys, rkeys, _and(lconds), _and(rconds), _and(resid), text

    def _node(self, tree, groups: list, pushed: dict[int, list], ons: dict[int, tuple]):
        """``tree`` as a JoinTree node, or, for an input, (definition, variables)."""
        for i, g in enumerate(groups):
            if g is tree:
                return self._input(g, pushed.get(i, []))
        left = self._node(tree.left, groups, pushed, ons)
        right = self._node(tree.right, groups, pushed, ons)
        lkeys, rkeys, lcond, rcond, resid, text = ons[id(tree)]
        lvars = left.vars if isinstance(left, JoinTree) else left[1]
        rvars = right.vars if isinstance(right, JoinTree) else right[1]
        return JoinTree(tree.kind, left if isinstance(left, JoinTree) else left[0],
                        right if isinstance(right, JoinTree) else right[0], lvars, rvars, lkeys, rkeys,
                        lcond, rcond, resid, text, self.dialect)

    def _input(self, group, conds: list[exp.Expression]):
        """An inner-join subtree as a select–project–join definition of the variables the query
        reads (at least one column, so that its rows are counted)."""
        members = leaves(group)
        vars_ = [f"{x.alias}.{c}" for x in members for c in self.tables[x.table] if f"{x.alias}.{c}" in self.used]
        if not vars_:
            first = members[0]
            vars_ = [f"{first.alias}.{self.tables[first.table][0]}"]
        sub = exp.select(*[exp.alias_(exp.column(v.split(".", 1)[1], v.split(".", 1)[0]), f"c{i}", quoted=True)
                           for i, v in enumerate(vars_)])
        sub.from_(members[0].node.copy(), copy=False)
        wheres = list(conds)
        if isinstance(group, Node):
            for m in members[1:]:
                sub.join(m.node.copy(), copy=False)  # a comma (cross) join; the ON conditions go to WHERE
            wheres = inner_conditions(group, self.tables, self.dialect, self.aliases) + wheres
        if wheres:
            sub.where(exp.and_(*wheres), copy=False)
        return self.translate(sub, self.tables, self.dialect), vars_



def resolver(scope: list[tuple[str, tuple]], aliases: set[str], alias_tables: dict[str, str], tables):
    """Column → expression tree in a scope: ``alias.column`` for a table in ``aliases``, an
    unqualified name by the scope's ``SELECT *`` columns (a merged USING column is one)."""
    def resolve(col: exp.Column) -> tuple:
        name = col.name
        if col.args.get("db") or col.args.get("catalog"):
            raise unsupported("schema-qualified column", col)
        if col.table:
            q = col.table
            if q not in aliases:
                raise SQLError(f"unknown table or alias {col.table!r}{position(col)}", sqlstate="42P01")
            if name not in tables[alias_tables[q]]:
                raise SQLError(f"table {alias_tables[q]!r} (alias {q!r}) has no column {col.name!r}"
                               f"{position(col)}")
            return ("var", f"{q}.{name}")
        hits = [e for n, e in scope if n == name]
        if not hits:
            raise SQLError(f"unknown column {col.name!r}{position(col)}", sqlstate="42703")
        if len(hits) > 1:
            owners = sorted({v.split(".")[0] for e in hits for v in tree_vars(e)})
            raise SQLError(f"column {col.name!r} is ambiguous{position(col)}: qualify it with one of "
                           f"{', '.join(owners)}")
        return hits[0]
    return resolve


def inner_conditions(tree, tables, dialect: str, alias_tables: dict[str, str]) -> list[exp.Expression]:
    """The ON / USING conditions of an inner-join (sub)tree, every column qualified."""
    if isinstance(tree, Leaf):
        return []
    out = inner_conditions(tree.left, tables, dialect, alias_tables) + \
        inner_conditions(tree.right, tables, dialect, alias_tables)
    lscope = visible(tree.left, tables, dialect)
    rscope = visible(tree.right, tables, dialect)
    resolve = resolver(lscope + rscope, {x.alias for x in leaves(tree)}, alias_tables, tables)
    for u in tree.using:
        lv = next(e for n, e in lscope if n == u)[1]
        rv = next(e for n, e in rscope if n == u)[1]
        out.append(exp.EQ(this=_col(lv), expression=_col(rv)))
    if tree.on is not None:
        for c in conjuncts(tree.on):
            out.append(_qualified(c, resolve))
    return out


def flatten_inner(select: exp.Select, tables: dict[str, list[str]], dialect: str) -> exp.Select:
    """A SELECT whose FROM is a tree of inner joins (parenthesized) as a flat FROM list with the
    join conditions in WHERE; ``*`` and unqualified columns are written out, so that USING
    columns keep their meaning."""
    tree = read_from(select, tables)
    members = leaves(tree)
    alias_tables = {x.alias: x.table for x in members}
    top = visible(tree, tables, dialect)
    resolve = resolver(top, set(alias_tables), alias_tables, tables)
    out = select.copy()
    items = []
    for item in out.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star):
            items += [exp.alias_(_col(e[1]), n, quoted=True) for n, e in top]
            continue
        items.append(item)
    out.set("expressions", items)
    for key in ("expressions", "where", "group", "having", "qualify", "order"):
        value = out.args.get(key)
        for node in value if isinstance(value, list) else [value] if value is not None else []:
            for col in list(node.find_all(exp.Column)):
                if col.table or isinstance(col.this, exp.Star):
                    continue
                try:
                    e = resolve(col)
                except SQLError:
                    continue  # a SELECT alias (GROUP BY / ORDER BY / HAVING): left as written
                if e[0] == "var":
                    col.replace(_col(e[1]))
    from_key = "from_" if out.args.get("from_") is not None else "from"
    out.set(from_key, exp.From(this=members[0].node.copy()))
    out.set("joins", [exp.Join(this=m.node.copy()) for m in members[1:]] or None)
    conds = inner_conditions(tree, tables, dialect, alias_tables)
    where = out.args.get("where")
    if where is not None:
        conds.append(where.this)
    out.set("where", exp.Where(this=exp.and_(*conds)) if conds else None)
    return out


def _col(var: str) -> exp.Column:
    alias, name = var.split(".", 1)
    return exp.column(name, alias)


def _qualified(cond: exp.Expression, resolve) -> exp.Expression:
    """``cond`` with every column written ``alias.column`` (columns resolved in its scope)."""
    cond = cond.copy()
    for col in list(cond.find_all(exp.Column)):
        if isinstance(col.this, exp.Star):
            continue
        e = resolve(col)
        if e[0] != "var":  # a merged USING column of an inner join is its left column
            raise unsupported("this condition on a merged USING column", cond)
        col.replace(_col(e[1]))
    return cond


def _and(conds: list[tuple]) -> tuple | None:
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = ("and", out, c)
    return out


def _substitute(tree, subst: dict[str, tuple]):
    if isinstance(tree, tuple):
        if len(tree) == 2 and tree[0] == "var" and tree[1] in subst:
            return subst[tree[1]]
        return tuple(_substitute(x, subst) for x in tree)
    return tree


def join_tree(select: exp.Select, tables: dict[str, list[str]], dialect: str, translate) -> JoinQuery:
    """A SELECT whose FROM is a join tree with outer joins → :class:`JoinQuery`."""
    return JoinTreeTranslator(select, tables, dialect, translate).run()
