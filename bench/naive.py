"""A naive first-order IVM baseline, written for the benchmark only.

It materializes the *full* view result as a dict ``out_row -> multiplicity`` and, on each
single-tuple update, computes the delta by joining the new tuple against the other atoms with
nested loops: hash indexes on equality-join attributes, full scans otherwise (inequalities are
checked tuple by tuple).  This is what textbook (first-order) IVM does, and what IEDyn avoids:
memory is Omega(|Q(db)|) and an update costs Omega(|delta Q|).

It implements the subset of the engine's view API the benchmark needs
(``insert``, ``delete``, ``apply``, ``diff``, ``rows``, ``__len__``, ``explain``) for the SQL
subset the benchmark uses: ``SELECT cols|* FROM t1 [a1], t2 [a2], ... WHERE c1 AND c2 ...``
where each conjunct is ``x op y``, ``x op y + c`` / ``x op y - c`` or ``x op const``
(op in =, <, <=, >, >=, <>).
"""

from __future__ import annotations

import operator
import time
from collections import defaultdict

import sqlglot
from sqlglot import exp

__all__ = ["NaiveError", "NaiveTimeout", "NaiveTooLarge", "NaiveView", "compile_view"]


class NaiveError(Exception):
    """Unsupported SQL or bad update."""


class NaiveTimeout(NaiveError):
    """The per-run deadline (``view.deadline``, a ``time.perf_counter`` value) was passed."""


class NaiveTooLarge(NaiveError):
    """The materialized result exceeded ``view.max_rows`` distinct rows."""


_OPS = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
}


class _Rel:
    """A GMR (row -> multiplicity) plus hash indexes on some column positions."""

    __slots__ = ("rows", "indexes")

    def __init__(self, index_positions):
        self.rows = {}
        self.indexes = {p: defaultdict(dict) for p in index_positions}

    def add(self, row, k):
        new = self.rows.get(row, 0) + k
        if new < 0:
            raise NaiveError(f"multiplicity of {row!r} would become negative")
        if new == 0:
            del self.rows[row]
            for p, idx in self.indexes.items():
                bucket = idx[row[p]]
                del bucket[row]
                if not bucket:
                    del idx[row[p]]
        else:
            self.rows[row] = new
            for p, idx in self.indexes.items():
                idx[row[p]][row] = new


class NaiveView:
    def __init__(self, sql, schema, dialect="duckdb"):
        self.schema = {t.lower(): [c.lower() for c in cols] for t, cols in schema.items()}
        self.deadline = None  # perf_counter value; NaiveTimeout when passed
        self.max_rows = None  # NaiveTooLarge when the materialized view gets bigger
        self._parse(sql, dialect)
        self._result = {}
        self._total = 0
        self._ticks = 0

    # ------------------------------------------------------------------ SQL
    def _parse(self, sql, dialect):
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
        self.rels = {t: _Rel(self.eq_positions.get(t, ())) for t in self.schema}
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
        self._plans = {}

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
        op = _OPS.get(type(e))
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

    # ------------------------------------------------------------- join plan
    def _plan(self, start):
        """Join order starting at alias ``start``: list of steps
        (alias, ('index', pos, (bound alias, pos)) | ('scan',), [predicates checked here])."""
        if start in self._plans:
            return self._plans[start]
        n = len(self.aliases)
        bound = {start}
        steps = []
        pending = list(self.binary)
        first_checks = [p for p in pending if p[1][0] in bound and p[2][0] in bound]
        while len(bound) < n:
            choice = None
            for i in range(n):
                if i in bound:
                    continue
                for p in pending:
                    op, l, r, c = p
                    if op is operator.eq and c == 0:
                        if l[0] == i and r[0] in bound:
                            choice = (i, ("index", l[1], r))
                        elif r[0] == i and l[0] in bound:
                            choice = (i, ("index", r[1], l))
                    if choice:
                        break
                if choice:
                    break
            if choice is None:  # prefer an alias sharing an inequality with the bound ones
                for i in range(n):
                    if i not in bound and any(
                        (p[1][0] == i and p[2][0] in bound) or (p[2][0] == i and p[1][0] in bound)
                        for p in pending):
                        choice = (i, ("scan",))
                        break
            if choice is None:
                choice = (next(i for i in range(n) if i not in bound), ("scan",))
            i, access = choice
            bound.add(i)
            checks = [p for p in pending if p[1][0] in bound and p[2][0] in bound]
            pending = [p for p in pending if p not in checks]
            steps.append((i, access, checks))
        plan = (first_checks, steps)
        self._plans[start] = plan
        return plan

    # ---------------------------------------------------------------- update
    def _tick(self):
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise NaiveTimeout("deadline passed")

    def _delta(self, table, row, k):
        """Apply ``row`` (mult k) to ``table`` and return the view delta {out_row: dk}."""
        occ = self.occurrences.get(table)
        rel = self.rels[table]
        if k > 0:
            # stored state = new; occurrences before oi see new, after oi see old = new - k
            rel.add(row, k)
            adjust = -k
        else:
            # stored state = old; occurrences before oi see old, after oi see new = old + k
            if self.rels[table].rows.get(row, 0) < -k:
                raise NaiveError(f"delete of missing row {row!r} from {table}")
            adjust = k
        delta = defaultdict(int)
        for oi in occ or ():
            if not all(op(row[l[1]], (c if r is None else row[r[1]] + c))
                       for op, l, r, c in self.unary.get(oi, ())):
                continue
            first_checks, steps = self._plan(oi)
            binding = [None] * len(self.aliases)
            binding[oi] = row
            if not all(op(binding[l[0]][l[1]], binding[r[0]][r[1]] + c)
                       for op, l, r, c in first_checks):
                continue
            self._extend(steps, 0, binding, k, oi, table, row, adjust, delta)
        if k < 0:
            rel.add(row, k)
        return delta

    def _extend(self, steps, depth, binding, mult, oi, table, row, adjust, delta):
        if depth == len(steps):
            out = tuple(binding[a][p] for a, p in self.out)
            delta[out] += mult
            self._ticks += 1
            if not self._ticks & 4095:
                self._tick()
            return
        alias, access, checks = steps[depth]
        t = self.aliases[alias][1]
        rel = self.rels[t]
        if access[0] == "index":
            _, pos, (ba, bp) = access
            cand = rel.indexes[pos].get(binding[ba][bp])
            if not cand:
                return
        else:
            cand = rel.rows
        unary = self.unary.get(alias, ())
        same = t == table
        for r2, m in cand.items():
            if same and alias > oi and r2 == row:
                m += adjust  # the other state for later occurrences
                if m == 0:
                    continue
            ok = True
            for op, l, r, c in unary:
                if not op(r2[l[1]], c if r is None else r2[r[1]] + c):
                    ok = False
                    break
            if not ok:
                continue
            binding[alias] = r2
            for op, l, r, c in checks:
                if not op(binding[l[0]][l[1]], binding[r[0]][r[1]] + c):
                    ok = False
                    break
            if ok:
                self._extend(steps, depth + 1, binding, mult * m, oi, table, row, adjust, delta)
            self._ticks += 1
            if not self._ticks & 4095:
                self._tick()
        binding[alias] = None

    def _merge(self, delta):
        res = self._result
        for out, dk in delta.items():
            if not dk:
                continue
            new = res.get(out, 0) + dk
            if new:
                res[out] = new
            else:
                del res[out]
            self._total += dk
        if self.max_rows is not None and len(res) > self.max_rows:
            raise NaiveTooLarge(f"materialized view exceeds {self.max_rows} rows")

    def _check_table(self, table, row):
        t = table.lower()
        if t not in self.schema:
            raise NaiveError(f"unknown table {table}")
        if len(row) != len(self.schema[t]):
            raise NaiveError(f"row {row!r} does not match schema of {table}")
        return t

    def insert(self, table, row):
        t = self._check_table(table, row)
        self._merge(self._delta(t, tuple(row), 1))

    def delete(self, table, row):
        t = self._check_table(table, row)
        row = tuple(row)
        if row not in self.rels[t].rows:
            raise NaiveError(f"delete of missing row {row!r} from {table}")
        self._merge(self._delta(t, row, -1))

    def diff(self, changes):
        total = defaultdict(int)
        for table, items in changes.items():
            for row, k in items:
                t = self._check_table(table, row)
                d = self._delta(t, tuple(row), k)
                self._merge(d)
                for out, dk in d.items():
                    total[out] += dk
        return [(o, dk) for o, dk in total.items() if dk]

    def apply(self, changes):
        self.diff(changes)

    def rows(self):
        return iter(self._result.items())

    def __iter__(self):
        for row, k in self._result.items():
            for _ in range(k):
                yield row

    def __len__(self):
        return self._total

    def explain(self):
        return ("naive first-order IVM: materialized result dict, delta by nested loops "
                f"({len(self._result)} distinct rows materialized)")


def compile_view(sql, schema, dialect="duckdb"):
    return NaiveView(sql, schema, dialect)
