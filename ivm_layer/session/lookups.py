"""Reading parameterized views (paper 004) through SQL: ``SELECT … FROM v WHERE acc = 7``.

A parameterized view has inputs (``$acc``, ``$1``, ``?`` in its definition, or ``params=``)
and no contents of its own: it is read for given inputs. In a session each input is written as
an equality on the input's name in the ``WHERE`` clause of the query that reads the view
(``WHERE acc = 7``, ``WHERE p1 = ?`` for positional inputs, ``WHERE since = TIMESTAMP '…'`` for
a range input ``ts > $since``). :func:`plan_lookups` finds those conditions (only statements that
mention a parameterized view are parsed), removes them, and replaces each occurrence of the
view by a subquery over the rows ``view.lookup(**inputs)`` yields — an O(1) probe and
constant-delay enumeration for CQAP0 views — so the database evaluates the rest of the query as
written (DuckDB over the lookup registered as an Arrow reader, PostgreSQL over the rows sent as
arrays: :mod:`.postgres.lookups`). A read without every input is an error that names the
missing ones. :class:`LookupPlans` keeps the rewrite per statement text (the parse costs
milliseconds); the one-row lookup ``SELECT … FROM v WHERE input = ?`` never comes here after its
first run (:mod:`.pointreads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..errors import NotSupportedError, ProgrammingError, SQLError
from ..identifiers import normalize_tree
from ..io.duckdb.capture import quote

_LOCAL = {"duckdb": ("main", "temp"), "postgres": ("public", "pg_temp")}


@dataclass
class Lookup:
    """One occurrence of a parameterized view in a statement: register ``rows`` as ``name``."""

    view: str
    name: str
    inputs: dict


def _conjuncts(node):
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _input_of(cond, alias: str, params: list[str]):
    """``(input name, value expression)`` when ``cond`` is ``input = value`` for this view."""
    if not isinstance(cond, exp.EQ):
        return None
    for col, val in ((cond.this, cond.expression), (cond.expression, cond.this)):
        if isinstance(col, exp.Column) and col.name in params and \
                (not col.table or col.table == alias) and not list(val.find_all(exp.Column)):
            return col.name, val
    return None


def plan_lookups(text: str, views: dict, params, dialect: str = "duckdb") -> tuple[str, list[Lookup],
                                                                                list[exp.Expression]]:
    """Rewrite ``text`` for the parameterized views it reads. ``views``: name → state with
    ``view.params``, ``columns`` and ``types``. Returns the rewritten SQL, the lookups to
    register, and the input value expressions in the order they are written (evaluated by the
    caller, with the statement's parameters, in that order). Each occurrence of a view reads
    ``SELECT cols::types FROM "<lookup name>"``: DuckDB registers the lookup's rows under that
    name, PostgreSQL sessions put the rows in its place (:mod:`.postgres.lookups`)."""
    try:
        tree = normalize_tree(sqlglot.parse_one(text, read=dialect), dialect)
    except (SqlglotError, RecursionError) as e:
        raise SQLError(f"cannot read this query of a parameterized view: {e}") from None
    rank = {id(node): i for i, node in enumerate(tree.dfs())}  # textual order of the inputs
    lookups: list[Lookup] = []
    values: list[exp.Expression] = []
    for i, table in enumerate(list(tree.find_all(exp.Table))):
        name = table.name
        vs = views.get(name)
        if vs is None or table.args.get("db") and table.args["db"].name not in _LOCAL[dialect]:
            continue
        wanted = list(vs.view.params)
        alias = table.alias_or_name
        select = table.find_ancestor(exp.Select)
        where = select.args.get("where") if select is not None else None
        found: dict[str, exp.Expression] = {}
        kept = []
        for cond in _conjuncts(where.this) if where is not None else []:
            hit = _input_of(cond, alias, wanted)
            if hit is not None and hit[0] not in found:
                found[hit[0]] = hit[1]
            else:
                kept.append(cond)
        missing = [p for p in wanted if p not in found]
        if missing:
            raise SQLError(f"incremental view {name!r} is parameterized: give its input(s) "
                           f"{', '.join(missing)} in the WHERE clause of the query that reads it, "
                           f"e.g. SELECT … FROM {name} WHERE {missing[0]} = …", sqlstate="42P02")
        if where is not None:
            if kept:
                out = kept[0]
                for c in kept[1:]:
                    out = exp.and_(out, c)
                where.set("this", out)
            else:
                select.set("where", None)
        reg = f"_ivm_lookup_{name}_{i}"
        cols = ", ".join(f"{quote(c)}::{t} AS {quote(c)}" for c, t in zip(vs.columns, vs.types))
        sub = sqlglot.parse_one(f"(SELECT {cols} FROM {quote(reg)}) AS {quote(alias)}", read=dialect)
        table.replace(sub)
        ordered = sorted(wanted, key=lambda p: rank[id(found[p])])
        lookups.append(Lookup(name, reg, {p: len(values) + j for j, p in enumerate(ordered)}))
        values.extend(found[p] for p in ordered)
    if params is not None:
        marks = [n for n in tree.find_all(exp.Placeholder)]
        inside = {id(n) for v in values for n in v.find_all(exp.Placeholder)}
        if any(id(m) not in inside for m in marks):
            raise NotSupportedError("with a parameterized view, statement parameters may only give its inputs "
                                    "(WHERE acc = ?); write the other values into the query")
    return tree.sql(dialect=dialect), lookups, values


class LookupPlans:
    """:func:`plan_lookups` once per statement text (a session's own cache): the parse and the
    rewrite cost milliseconds, a read of the same text with other parameters reuses them.
    Returns ``(rewritten SQL, lookups, the input values' SQL texts, direct)``: ``direct`` is
    ``None`` unless every value is a placeholder or a plain literal, then how to take each from
    the parameters without asking the database (:func:`input_values`). An entry is used only
    while the views it was planned for are the same objects."""

    def __init__(self, dialect: str, size: int = 512):
        self.dialect = dialect
        self.size = size
        self._plans: dict[tuple, tuple[tuple, tuple]] = {}

    def plan(self, text: str, views: dict, params) -> tuple[str, list[Lookup], list[str], list | None]:
        names = tuple(sorted(views))
        key = (text, params is None, names)
        states = tuple((views[n], views[n].view) for n in names)
        got = self._plans.get(key)
        if got is not None and all(a is b and v is w for (a, v), (b, w) in zip(got[0], states)):
            return got[1]
        sql, lookups, values = plan_lookups(text, views, params, self.dialect)
        out = (sql, lookups, [v.sql(dialect=self.dialect) for v in values], _direct(values))
        if len(self._plans) >= self.size:
            self._plans.clear()
        self._plans[key] = (states, out)
        return out


def _placeholder_number(node: exp.Expression) -> int | None:
    """``0`` for ``?``, ``n`` for ``$n`` (DuckDB's Placeholder, PostgreSQL's Parameter), else None."""
    if isinstance(node, exp.Placeholder):
        name = node.this
        if name is None or str(name) == "":
            return 0
        return int(str(name)) if str(name).isdigit() else None
    if isinstance(node, exp.Parameter):
        name = node.this.name if isinstance(node.this, exp.Expression) else str(node.this)
        return int(name) if name.isdigit() else None
    return None


def _literal(node: exp.Expression):
    """A number, string or NULL literal's value (``-n`` too); ``_NOT`` for anything else."""
    neg = isinstance(node, exp.Neg)
    if neg:
        node = node.this
    if isinstance(node, exp.Null) and not neg:
        return None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return _NOT if neg else node.this
        try:
            value = int(node.this) if node.is_int else Decimal(node.this)
        except (ValueError, ArithmeticError):
            return _NOT
        return -value if neg else value
    return _NOT


_NOT = object()


def _direct(values: list[exp.Expression]) -> tuple[list[tuple], int] | None:
    """``([("$", n) | ("lit", value)], parameters taken)`` when every value is a placeholder
    (``?`` counted in order, or ``$n``, not both) or a number, string or NULL literal; else
    ``None`` (the database evaluates them)."""
    out: list[tuple] = []
    marks = numbered = 0
    for v in values:
        n = _placeholder_number(v)
        if n == 0:
            marks += 1
            out.append(("$", marks))
        elif n is not None:
            numbered = max(numbered, n)
            out.append(("$", n))
        else:
            value = _literal(v)
            if value is _NOT:
                return None
            out.append(("lit", value))
    if marks and numbered:
        return None
    return out, marks or numbered


def input_values(direct: tuple[list[tuple], int], params) -> tuple:
    """The values :func:`_direct` describes, taken from the statement's ``params`` (42P02 when
    the statement is given another number of parameters than it takes)."""
    specs, wanted = direct
    given = 0 if params is None else len(params)
    if isinstance(params, dict) or given != wanted:
        raise ProgrammingError(f"the statement takes {wanted} parameter(s), {given} were given", sqlstate="42P02")
    return tuple(params[v - 1] if kind == "$" else v for kind, v in specs)
