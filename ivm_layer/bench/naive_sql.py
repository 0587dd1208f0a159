"""The SQL the naive baseline (:mod:`ivm_layer.bench.naive`) takes, parsed with sqlglot:
``SELECT cols|* FROM t1 [a1], t2 [a2], ... WHERE c1 AND c2 ...`` where each conjunct is
``x op y``, ``x op y + c`` / ``x op y - c`` or ``x op const`` (op in =, <, <=, >, >=, <>).
"""

from __future__ import annotations

import operator
from collections import defaultdict

import sqlglot
from sqlglot import exp


class NaiveError(Exception):
    """Unsupported SQL or bad update."""


OPS = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
}


class NaiveQuery:
    """A parsed query: its aliases, output columns, and predicates split into per-alias
    filters (``unary``) and join predicates (``binary``), each ``(op, (alias, pos),
    (alias, pos) | None, constant)`` meaning ``left op right + constant``."""

    def __init__(self, sql, schema, dialect="duckdb"):
        self.schema = schema
        try:
            tree = sqlglot.parse_one(sql, read=dialect)
        except sqlglot.errors.ParseError as e:  # pragma: no cover - bad input
            raise NaiveError(str(e)) from e
        if not isinstance(tree, exp.Select):
            raise NaiveError("only SELECT is supported")
        tables = []
        frm = tree.args.get("from") or tree.args.get("from_")
        if frm is not None:
            tables.append(frm.this)
        for j in tree.args.get("joins") or []:
            if j.args.get("on") or j.args.get("using"):
                raise NaiveError("only comma joins are supported")
            tables.append(j.this)
        self.aliases = []  # [(alias, table)]
        for t in tables:
            if not isinstance(t, exp.Table):
                raise NaiveError("only base tables in FROM")
            name = t.name.lower()
            if name not in self.schema:
                raise NaiveError(f"unknown table {name}")
            alias = (t.alias or t.name).lower()
            if any(a == alias for a, _ in self.aliases):
                raise NaiveError(f"duplicate alias {alias}")
            self.aliases.append((alias, name))
        self.alias_idx = {a: i for i, (a, _) in enumerate(self.aliases)}
        self.occurrences = defaultdict(list)  # table -> [alias index]
        for i, (_, t) in enumerate(self.aliases):
            self.occurrences[t].append(i)

        # output columns
        self.out = []  # [(alias index, column position)]
        self.columns = []
        for e in tree.expressions:
            if isinstance(e, exp.Star):
                for i, (_, t) in enumerate(self.aliases):
                    for p, c in enumerate(self.schema[t]):
                        self.out.append((i, p))
                        self.columns.append(c)
            elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
                i = self.alias_idx[e.table.lower()]
                for p, c in enumerate(self.schema[self.aliases[i][1]]):
                    self.out.append((i, p))
                    self.columns.append(c)
            else:
                col = e.this if isinstance(e, exp.Alias) else e
                if not isinstance(col, exp.Column):
                    raise NaiveError(f"unsupported select item {e.sql()}")
                self.out.append(self._resolve(col))
                self.columns.append(e.alias_or_name.lower())

        # predicates: (op, left (alias, pos) , right (alias, pos) or None, const)
        #   binary:  left.val  op  right.val + const
        #   unary:   left.val  op  const
        self.preds = []
        where = tree.args.get("where")
        if where is not None:
            for c in self._conjuncts(where.this):
                self.preds.append(self._pred(c))
        self.eq_positions = defaultdict(set)  # table -> column positions used by equi-joins
        for op, l, r, _c in self.preds:
            if op is operator.eq and r is not None and l[0] != r[0]:
                self.eq_positions[self.aliases[l[0]][1]].add(l[1])
                self.eq_positions[self.aliases[r[0]][1]].add(r[1])
        # unary filters per alias, binary predicates
        self.unary = defaultdict(list)
        self.binary = []
        for p in self.preds:
            if p[2] is None:
                self.unary[p[1][0]].append(p)
            elif p[1][0] == p[2][0]:
                self.unary[p[1][0]].append(p)
            else:
                self.binary.append(p)

    def _conjuncts(self, e):
        if isinstance(e, exp.Paren):
            return self._conjuncts(e.this)
        if isinstance(e, exp.And):
            return self._conjuncts(e.this) + self._conjuncts(e.expression)
        return [e]

    def _resolve(self, col):
        name = col.name.lower()
        if col.table:
            a = col.table.lower()
            if a not in self.alias_idx:
                raise NaiveError(f"unknown alias {a}")
            i = self.alias_idx[a]
            cols = self.schema[self.aliases[i][1]]
            if name not in cols:
                raise NaiveError(f"unknown column {a}.{name}")
            return (i, cols.index(name))
        hits = [(i, self.schema[t].index(name)) for i, (_, t) in enumerate(self.aliases)
                if name in self.schema[t]]
        if len(hits) != 1:
            raise NaiveError(f"column {name} is {'ambiguous' if hits else 'unknown'}")
        return hits[0]

    @staticmethod
    def _const(e):
        neg = False
        while isinstance(e, (exp.Neg, exp.Paren)):
            if isinstance(e, exp.Neg):
                neg = not neg
            e = e.this
        if not isinstance(e, exp.Literal):
            raise NaiveError(f"unsupported expression {e.sql()}")
        if e.is_string:
            v = e.this
        else:
            v = float(e.this) if any(ch in e.this for ch in ".eE") else int(e.this)
        return -v if neg else v

    def _side(self, e):
        """-> (column or None, constant offset)"""
        if isinstance(e, exp.Paren):
            return self._side(e.this)
        if isinstance(e, exp.Column):
            return self._resolve(e), 0
        if isinstance(e, (exp.Add, exp.Sub)):
            sign = 1 if isinstance(e, exp.Add) else -1
            if isinstance(e.this, exp.Column):
                return self._resolve(e.this), sign * self._const(e.expression)
            if isinstance(e.expression, exp.Column) and sign == 1:
                return self._resolve(e.expression), self._const(e.this)
        return None, self._const(e)

    def _pred(self, e):
        op = OPS.get(type(e))
        if op is None:
            raise NaiveError(f"unsupported predicate {e.sql()}")
        lc, lo = self._side(e.this)
        rc, ro = self._side(e.expression)
        flip = {operator.lt: operator.gt, operator.le: operator.ge, operator.gt: operator.lt,
                operator.ge: operator.le, operator.eq: operator.eq, operator.ne: operator.ne}
        if lc is None and rc is None:
            raise NaiveError(f"constant predicate {e.sql()}")
        if lc is None:
            lc, lo, rc, ro, op = rc, ro, lc, lo, flip[op]
        # lc + lo  op  rc + ro   ==>   lc  op  rc + (ro - lo)
        return (op, lc, rc, ro - lo)
