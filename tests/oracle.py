"""Reference implementations used by the differential tests.

* ``DuckDBOracle``  -- keeps real DuckDB tables holding the current bags
  (duplicates as repeated rows) and recomputes the view with
  ``SELECT <cols AS c0..cn>, COUNT(*) FROM .. WHERE .. GROUP BY ALL``.
  Its SQL is built from the structured ``querygen.Query``, never by parsing the
  SQL handed to the engine.
* ``BruteForceView`` -- a tiny nested-loop implementation of the engine API
  (insert / delete / apply / diff / rows / __iter__ / __len__ / columns) used to
  validate the harness itself (``IVM_DIFF_IMPL=bruteforce``).
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter

import duckdb
from querygen import Pred, Query, row_key

_CMP = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _lit(v) -> str:
    return "NULL" if v is None else str(int(v))


def oracle_sql(q: Query) -> str:
    cols = q.out_cols()
    sel = ", ".join(f"{a}.{c} AS c{i}" for i, (a, c) in enumerate(cols))
    frm = ", ".join(f"{t} {a}" for a, t in q.atoms)
    sql = f"SELECT {sel}, COUNT(*) AS cnt__ FROM {frm}"
    if q.preds:
        sql += " WHERE " + " AND ".join(f"({p.sql()})" for p in q.preds)
    return sql + " GROUP BY ALL"


class DuckDBOracle:
    """Bag state in DuckDB tables + per-step recomputation of the view."""

    def __init__(self, q: Query):
        self.q = q
        self.con = duckdb.connect()
        self.con.execute("SET threads = 1")
        # DuckDB 1.x's optimizer has hit internal errors on contradictory
        # predicates (e.g. x > y AND x = y); the unoptimized plan is plenty fast
        # for these tiny tables and is the more trustworthy reference anyway.
        self.con.execute("PRAGMA disable_optimizer")
        self.bag = {t: Counter() for t in q.schema}
        for t, cols in q.schema.items():
            # id__ is a hidden per-copy id, so single copies of duplicate rows can be deleted
            self.con.execute(
                f"CREATE TABLE {t} (id__ INTEGER, {', '.join(c + ' INTEGER' for c in cols)})"
            )
        self.sql = oracle_sql(q)
        self.con.execute(f"PREPARE view__ AS {self.sql}")
        self._dirty = True
        self._cache: dict = {}
        self._used = q.used_tables()
        self._ids = {t: {} for t in q.schema}
        self._next_id = 0
        self._pending: list[str] = []

    def close(self):
        self.con.close()

    # -- state changes ------------------------------------------------------
    def can_apply(self, batch) -> bool:
        need = Counter()
        for t, entries in batch.items():
            for row, k in entries:
                if k < 0:
                    need[(t, tuple(row))] += -k
        return all(self.bag[t][r] >= k for (t, r), k in need.items())

    def apply(self, batch):
        assert self.can_apply(batch), "invalid batch generated (harness bug)"
        changed = Counter()
        for t, entries in batch.items():
            for row, k in entries:
                changed[(t, tuple(row))] += k
        dels: dict[str, list[int]] = {}
        ins: dict[str, list[str]] = {}
        for (t, row), k in changed.items():
            if k == 0:
                continue
            new = self.bag[t][row] + k
            if new:
                self.bag[t][row] = new
            else:
                del self.bag[t][row]
            ids = self._ids[t].setdefault(row, [])
            if k < 0:  # remove k physical copies (by their hidden id)
                dels.setdefault(t, []).extend(ids[k:])
                del ids[k:]
            else:
                lits = ", ".join(map(_lit, row))
                for _ in range(k):
                    self._next_id += 1
                    ids.append(self._next_id)
                    ins.setdefault(t, []).append(f"({self._next_id}, {lits})")
            if t in self._used:
                self._dirty = True
        stmts = [f"DELETE FROM {t} WHERE id__ IN ({', '.join(map(str, v))})" for t, v in dels.items()]
        stmts += [f"INSERT INTO {t} VALUES {', '.join(v)}" for t, v in ins.items()]
        self._pending.extend(stmts)  # flushed together with the next view query

    def _flush(self, query=None):
        stmts = self._pending + ([query] if query else [])
        self._pending = []
        if stmts:
            return self.con.execute(";\n".join(stmts))
        return None

    def insert(self, t, row):
        self.apply({t: [(row, 1)]})

    def delete(self, t, row):
        self.apply({t: [(row, -1)]})

    # -- view -----------------------------------------------------------------
    def view(self) -> dict:
        """Current view as {out_row: multiplicity} (no zero entries)."""
        if self._dirty:
            res = self._flush("EXECUTE view__").fetchall()
            self._cache = {tuple(r[:-1]): r[-1] for r in res}
            self._dirty = False
        return dict(self._cache)

    def table_rows(self, t) -> Counter:
        """Contents of the DuckDB table (for self-checks)."""
        self._flush()
        cols = ", ".join(self.q.schema[t])
        return Counter(self.con.execute(f"SELECT {cols} FROM {t}").fetchall())


def dict_diff(before: dict, after: dict) -> dict:
    out = {}
    for k in before.keys() | after.keys():
        d = after.get(k, 0) - before.get(k, 0)
        if d:
            out[k] = d
    return out


def sorted_items(d: dict):
    return sorted(d.items(), key=lambda kv: row_key(kv[0]))


# =========================================================================== brute force
class BruteForceError(Exception):
    pass


class BruteForceCyclicError(BruteForceError):
    pass


def atom_graph_is_forest(q: Query) -> bool:
    """Crude stand-in for an acyclicity check (only used to exercise the
    'rejected' path of the harness): the graph of atoms connected by
    between-atom predicates, parallel edges merged, must be a forest."""
    parent = {a: a for a, _ in q.atoms}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    edges = {tuple(sorted(p.aliases())) for p in q.preds if len(p.aliases()) == 2}
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            return False
        parent[ra] = rb
    return True


def _eval_pred(p: Pred, env: dict) -> bool:
    lv = env[p.left[0]][p.left[1]]
    if p.right is None:
        rv = p.const
    else:
        rv = env[p.right[0]][p.right[1]]
        if rv is not None:
            rv = rv + p.offset
    if lv is None or rv is None:
        return False
    return _CMP[p.op](lv, rv)


class BruteForceView:
    """Nested-loop implementation of the view API (for harness validation)."""

    def __init__(self, q: Query, reject_cyclic: bool = False):
        if reject_cyclic and not atom_graph_is_forest(q):
            raise BruteForceCyclicError("cyclic (brute-force stand-in check)")
        self.q = q
        self.bag = {t: Counter() for t in q.schema}
        self.columns = [c for _, c in q.out_cols()]
        self._out = q.out_cols()
        # predicates checked as soon as all their atoms are bound
        self._at = [[] for _ in q.atoms]
        pos = {a: i for i, (a, _) in enumerate(q.atoms)}
        for p in q.preds:
            self._at[max(pos[a] for a in p.aliases())].append(p)

    def _check(self, batch):
        need = Counter()
        for t, entries in batch.items():
            if t not in self.bag:
                raise BruteForceError(f"unknown table {t}")
            for row, k in entries:
                if len(row) != len(self.q.schema[t]):
                    raise BruteForceError("bad arity")
                if k < 0:
                    need[(t, tuple(row))] += -k
        for (t, r), k in need.items():
            if self.bag[t][r] < k:
                raise BruteForceError(f"delete of absent row {r} from {t}")

    def apply(self, batch):
        self._check(batch)
        for t, entries in batch.items():
            for row, k in entries:
                row = tuple(row)
                self.bag[t][row] += k
                if self.bag[t][row] == 0:
                    del self.bag[t][row]

    def insert(self, t, row):
        self.apply({t: [(row, 1)]})

    def delete(self, t, row):
        self.apply({t: [(row, -1)]})

    def diff(self, batch):
        before = dict(self.rows())
        self.apply(batch)
        after = dict(self.rows())
        return list(dict_diff(before, after).items())

    def rows(self):
        q = self.q
        out = Counter()
        schema = q.schema
        atoms = q.atoms
        n = len(atoms)
        env = {}

        def rec(i, mult):
            if i == n:
                out[tuple(env[a][c] for a, c in self._out)] += mult
                return
            alias, t = atoms[i]
            cols = schema[t]
            for row, k in self.bag[t].items():
                env[alias] = dict(zip(cols, row))
                if all(_eval_pred(p, env) for p in self._at[i]):
                    rec(i + 1, mult * k)
            env.pop(alias, None)

        rec(0, 1)
        return iter(list(out.items()))

    def __iter__(self):
        for row, k in self.rows():
            yield from itertools.repeat(row, k)

    def __len__(self):
        return sum(k for _, k in self.rows())


def run_chunk_worker(args):
    """Process-pool entry point (spawn): runs one chunk of the differential test
    in a fresh interpreter and returns its result + stats."""
    import importlib

    td = importlib.import_module("test_differential")
    return td.run_chunk(*args)
