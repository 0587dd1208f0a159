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

from .naive_sql import NaiveError, NaiveQuery

__all__ = ["NaiveError", "NaiveTimeout", "NaiveTooLarge", "NaiveView", "compile_view"]


class NaiveTimeout(NaiveError):
    """The per-run deadline (``view.deadline``, a ``time.perf_counter`` value) was passed."""


class NaiveTooLarge(NaiveError):
    """The materialized result exceeded ``view.max_rows`` distinct rows."""




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
        q = NaiveQuery(sql, self.schema, dialect)
        self.aliases, self.occurrences, self.out, self.columns = q.aliases, q.occurrences, q.out, q.columns
        self.unary, self.binary = q.unary, q.binary
        self.rels = {t: _Rel(q.eq_positions.get(t, ())) for t in self.schema}
        self._plans = {}
        self._result = {}
        self._total = 0
        self._ticks = 0

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
