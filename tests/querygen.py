"""Seeded random generator of conjunctive join queries and update streams.

Everything here is deterministic given the seed (plain ``random.Random``), so a
failing case can be reproduced from its seed alone::

    from querygen import gen_case
    case = gen_case(1234)
    print(case.query.sql, case.query.schema)
    for op in case.stream: print(op)

A *query* is kept as a structured object (``Query``) so the oracle can build its
own SQL from it without parsing the SQL handed to the engine.

A *stream* is a list of ``Op``:

* ``Op("insert", table=t, row=r)``           -> ``view.insert(t, r)``
* ``Op("delete", table=t, row=r)``           -> ``view.delete(t, r)``   (r is present)
* ``Op("apply",  batch={t: [(r, k), ...]})`` -> ``view.apply(batch)``
* ``Op("diff",   batch={t: [(r, k), ...]})`` -> ``view.diff(batch)``

Every op is valid: deletes / negative multiplicities only ever remove rows
that are present (a row may occur several times in one batch; the total of its
negative entries never exceeds its count before the batch).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

OPS = ("=", "<", "<=", ">", ">=")
TABLE_NAMES = ("r", "s", "t", "u")
COL_LETTERS = "abcd"

DOMAIN_LO, DOMAIN_HI = 0, 5
NULL_PROB = 0.1


# --------------------------------------------------------------------------- query
@dataclass(frozen=True)
class Pred:
    """``left OP right [+ offset]`` or ``left OP const``.

    left / right are (alias, column).  Exactly one of ``right`` / ``const`` is set.
    """

    left: tuple[str, str]
    op: str
    right: Optional[tuple[str, str]] = None
    offset: int = 0
    const: Optional[int] = None

    def aliases(self) -> set[str]:
        s = {self.left[0]}
        if self.right is not None:
            s.add(self.right[0])
        return s

    def sql(self) -> str:
        lhs = f"{self.left[0]}.{self.left[1]}"
        if self.right is None:
            return f"{lhs} {self.op} {self.const}"
        rhs = f"{self.right[0]}.{self.right[1]}"
        if self.offset > 0:
            rhs += f" + {self.offset}"
        elif self.offset < 0:
            rhs += f" - {-self.offset}"
        return f"{lhs} {self.op} {rhs}"


@dataclass
class Query:
    schema: dict[str, list[str]]
    atoms: list[tuple[str, str]]  # (alias, table), FROM order
    preds: list[Pred]
    select: Optional[list[tuple[str, str]]]  # None means SELECT *
    sql: str = ""  # the SQL handed to the engine (may use JOIN ... ON)

    def out_cols(self) -> list[tuple[str, str]]:
        """Output columns as (alias, column), in SELECT order (``*`` expanded)."""
        if self.select is not None:
            return list(self.select)
        return [(a, c) for a, t in self.atoms for c in self.schema[t]]

    def alias_table(self) -> dict[str, str]:
        return dict(self.atoms)

    def used_tables(self) -> set[str]:
        return {t for _, t in self.atoms}


def gen_schema(rnd: random.Random) -> dict[str, list[str]]:
    n = rnd.randint(2, 4)
    schema = {}
    for t in TABLE_NAMES[:n]:
        m = rnd.randint(2, 4)
        schema[t] = [f"{t}_{COL_LETTERS[i]}" for i in range(m)]
    return schema


def _rand_op(rnd: random.Random, eq_bias: float) -> str:
    if rnd.random() < eq_bias:
        return "="
    return rnd.choice(OPS[1:])


def _rand_offset(rnd: random.Random) -> int:
    return rnd.choice((-3, -2, -1, 1, 2)) if rnd.random() < 0.35 else 0


def _between(rnd, atoms, schema, i, j, eq_bias) -> Pred:
    ai, ti = atoms[i]
    aj, tj = atoms[j]
    if rnd.random() < 0.5:
        (ai, ti), (aj, tj) = (aj, tj), (ai, ti)
    op = _rand_op(rnd, eq_bias)
    off = _rand_offset(rnd) if (op != "=" or rnd.random() < 0.15) else 0
    return Pred((ai, rnd.choice(schema[ti])), op, (aj, rnd.choice(schema[tj])), off)


def gen_query(
    rnd: random.Random,
    schema: dict[str, list[str]],
    n_atoms: Optional[int] = None,
) -> Query:
    tables = list(schema)
    if n_atoms is None:
        n_atoms = rnd.choice((2, 2, 3, 3, 3, 4, 4))
    # --- atoms, with self-joins fairly often
    atom_tables: list[str] = []
    for i in range(n_atoms):
        if atom_tables and rnd.random() < 0.3:
            atom_tables.append(rnd.choice(atom_tables))
        else:
            atom_tables.append(rnd.choice(tables))
    atoms = [(f"{t}{i}", t) for i, t in enumerate(atom_tables)]

    preds: list[Pred] = []
    eq_bias = rnd.choice((0.3, 0.5, 0.75, 0.9, 1.0))
    # --- spanning forest (connected most of the time, cross products sometimes)
    connect_p = 1.0 if rnd.random() < 0.75 else 0.5
    for i in range(1, n_atoms):
        if rnd.random() < connect_p:
            j = rnd.randrange(i)
            preds.append(_between(rnd, atoms, schema, i, j, eq_bias))
            # sometimes a second predicate on the same edge
            if rnd.random() < 0.2:
                preds.append(_between(rnd, atoms, schema, i, j, eq_bias))
    # --- extra between-atom predicates (frequently make the query cyclic)
    for _ in range(rnd.choice((0, 0, 0, 1, 1, 2))):
        if n_atoms < 2:  # a single atom has no pair (same random draws for n_atoms >= 2)
            break
        i, j = rnd.sample(range(n_atoms), 2)
        preds.append(_between(rnd, atoms, schema, i, j, eq_bias))
    # --- an implied equality (a.x = b.y AND b.y = c.z AND a.x = c.z): a cycle in
    # the atom graph but still an acyclic hypergraph (one shared variable)
    if rnd.random() < 0.2:
        eqs = [p for p in preds if p.op == "=" and p.right is not None and p.offset == 0]
        pairs = [
            (p, q) for p in eqs for q in eqs
            if p is not q and p.right == q.left and p.left[0] != q.right[0]
        ]
        if pairs:
            p, q = rnd.choice(pairs)
            preds.append(Pred(p.left, "=", q.right))
    # --- constant filters
    for _ in range(rnd.choice((0, 0, 1, 1, 2))):
        a, t = rnd.choice(atoms)
        preds.append(Pred((a, rnd.choice(schema[t])), rnd.choice(OPS), const=rnd.randint(-1, 6)))
    # --- same-atom comparisons
    for _ in range(rnd.choice((0, 0, 0, 1))):
        a, t = rnd.choice(atoms)
        if len(schema[t]) >= 2:
            x, y = rnd.sample(schema[t], 2)
            preds.append(Pred((a, x), rnd.choice(OPS), (a, y)))
    rnd.shuffle(preds)

    # --- projection
    all_cols = [(a, c) for a, t in atoms for c in schema[t]]
    r = rnd.random()
    if r < 0.12:
        select = None
    else:
        k = rnd.randint(1, min(4, len(all_cols)))
        select = rnd.sample(all_cols, k)
        if rnd.random() < 0.15:  # duplicate column
            select.insert(rnd.randrange(len(select) + 1), rnd.choice(select))
        eqs = [p for p in preds if p.op == "=" and p.right is not None]
        if eqs and rnd.random() < 0.25:  # both sides of an equality
            p = rnd.choice(eqs)
            select += [p.left, p.right]

    q = Query(schema=schema, atoms=atoms, preds=preds, select=select)
    q.sql = render_sql(q, rnd)
    return q


def chain_atoms(rnd: random.Random, schema: dict[str, list[str]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Three atoms ``x0``, ``x1``, ``x2`` over random tables of ``schema`` (x0 or x2 a self-join
    of x1 three times in ten): ``(tables, atoms)`` for a random chain query."""
    tables = [rnd.choice(list(schema)) for _ in range(3)]
    if rnd.random() < 0.3:
        tables[rnd.choice((0, 2))] = tables[1]  # a self-join
    return tables, [(f"x{i}", t) for i, t in enumerate(tables)]


def random_ineq(rnd: random.Random, a: tuple[str, str], b: tuple[str, str]) -> Pred:
    """``a op b + c`` or ``b op a + c`` with a random one-sided inequality and a small offset."""
    op = rnd.choice(("<", "<=", ">", ">="))
    off = rnd.choice((0, 0, 0, 1, -2))
    return Pred(a, op, b, off) if rnd.random() < 0.5 else Pred(b, op, a, off)


def finish_query(rnd: random.Random, schema: dict[str, list[str]], tables: list[str],
                 atoms: list[tuple[str, str]], preds: list[Pred], select_share: float, least: int) -> Query:
    """The query over ``atoms`` with ``preds``, selecting ``SELECT *`` or (``select_share`` of the
    time) a random sample of at least ``least`` columns, its SQL rendered."""
    select = None
    if rnd.random() < select_share:
        cols = [(a, c) for a, t in atoms for c in schema[t]]
        select = rnd.sample(cols, rnd.randint(least, len(cols)))
    q = Query({t: schema[t] for t in sorted(set(tables))}, atoms, preds, select)
    q.sql = render_sql(q, rnd)
    return q


def render_sql(q: Query, rnd: Optional[random.Random] = None) -> str:
    """SQL for the engine.  Some predicates go into ``JOIN ... ON`` clauses.

    FROM is a comma list of groups ``x JOIN y ON .. JOIN z ON ..``; an ON clause
    only references aliases of its own group (standard SQL scoping).
    """
    if q.select is None:
        sel = "*"
    else:
        sel = ", ".join(f"{a}.{c}" for a, c in q.select)
    use_join = rnd is not None and rnd.random() < 0.35
    placed: set[int] = set()
    from_parts = [f"{q.atoms[0][1]} {q.atoms[0][0]}"]
    group = [q.atoms[0][0]]
    for alias, table in q.atoms[1:]:
        cands = []
        if use_join:
            scope = set(group) | {alias}
            cands = [
                k for k, p in enumerate(q.preds)
                if k not in placed and alias in p.aliases() and p.aliases() <= scope
            ]
        if cands and rnd.random() < 0.7:
            chosen = [k for k in cands if rnd.random() < 0.7] or [cands[0]]
            placed.update(chosen)
            on = " AND ".join(q.preds[k].sql() for k in chosen)
            from_parts.append(f" JOIN {table} {alias} ON {on}")
            group.append(alias)
        else:
            from_parts.append(f", {table} {alias}")
            group = [alias]
    sql = f"SELECT {sel} FROM {''.join(from_parts)}"
    rest = [p.sql() for k, p in enumerate(q.preds) if k not in placed]
    if rest:
        sql += " WHERE " + " AND ".join(rest)
    return sql


# --------------------------------------------------------------------------- stream
@dataclass
class Op:
    kind: str  # insert | delete | apply | diff
    table: Optional[str] = None
    row: Optional[tuple] = None
    batch: Optional[dict] = None

    def __repr__(self) -> str:
        if self.kind in ("insert", "delete"):
            return f"{self.kind}({self.table!r}, {self.row!r})"
        return f"{self.kind}({self.batch!r})"


def _rand_val(rnd: random.Random):
    if rnd.random() < NULL_PROB:
        return None
    return rnd.randint(DOMAIN_LO, DOMAIN_HI)


class _StreamState:
    def __init__(self, rnd, schema, hot_tables, max_rows):
        self.rnd = rnd
        self.schema = schema
        self.tables = list(schema)
        self.hot = sorted(hot_tables) or self.tables
        self.bag = {t: Counter() for t in schema}
        self.seen = {t: [] for t in schema}
        self.max_rows = max_rows

    def pick_table(self):
        if self.rnd.random() < 0.85:
            return self.rnd.choice(self.hot)
        return self.rnd.choice(self.tables)

    def size(self, t):
        return sum(self.bag[t].values())

    def new_row(self, t):
        rnd = self.rnd
        if self.seen[t] and rnd.random() < 0.3:
            return rnd.choice(self.seen[t])  # duplicate of a current / earlier row
        row = tuple(_rand_val(rnd) for _ in self.schema[t])
        self.seen[t].append(row)
        return row

    def present_row(self, t, counts=None):
        counts = self.bag[t] if counts is None else counts
        rows = sorted((r for r, k in counts.items() if k > 0), key=_row_key)
        if not rows:
            return None
        return self.rnd.choice(rows)

    def want_delete(self, t):
        n = self.size(t)
        if n == 0:
            return False
        if n >= self.max_rows:
            return True
        return self.rnd.random() < 0.2 + 0.6 * n / self.max_rows

    def gen_batch(self):
        rnd = self.rnd
        batch: dict[str, list] = {}
        avail = {t: Counter(self.bag[t]) for t in self.tables}  # remaining deletable
        for _ in range(rnd.randint(1, 5)):
            t = self.pick_table()
            if self.want_delete(t) and +avail[t]:
                row = self.present_row(t, avail[t])
                k = -rnd.randint(1, avail[t][row]) if rnd.random() < 0.5 else -1
                avail[t][row] += k
            else:
                row = self.new_row(t)
                k = rnd.choice((1, 1, 1, 2, 3))
            batch.setdefault(t, []).append((row, k))
        if rnd.random() < 0.03:
            batch.setdefault(rnd.choice(self.tables), [])  # empty entry
        if rnd.random() < 0.02:
            batch = {}
        return batch

    def apply_batch(self, batch):
        for t, entries in batch.items():
            for row, k in entries:
                self.bag[t][row] += k
                assert self.bag[t][row] >= 0
                if self.bag[t][row] == 0:
                    del self.bag[t][row]


def gen_stream(
    rnd: random.Random,
    schema: dict[str, list[str]],
    hot_tables,
    n_steps: int = 200,
    max_rows: int = 7,
) -> list[Op]:
    st = _StreamState(rnd, schema, hot_tables, max_rows)
    ops: list[Op] = []
    for _ in range(n_steps):
        r = rnd.random()
        if r < 0.55:
            t = st.pick_table()
            if st.want_delete(t):
                row = st.present_row(t)
                op = Op("delete", table=t, row=row)
                st.apply_batch({t: [(row, -1)]})
            else:
                row = st.new_row(t)
                op = Op("insert", table=t, row=row)
                st.apply_batch({t: [(row, 1)]})
        else:
            batch = st.gen_batch()
            op = Op("apply" if r < 0.78 else "diff", batch=batch)
            st.apply_batch(batch)
        ops.append(op)
    return ops


def _row_key(row):
    return tuple((v is None, v if v is not None else 0) for v in row)


row_key = _row_key


@dataclass
class Case:
    seed: int
    query: Query
    stream: list[Op] = field(default_factory=list)


def gen_case(seed: int, n_steps: int = 200, n_atoms: Optional[int] = None, max_rows: int = 7) -> Case:
    rnd = random.Random(seed)
    schema = gen_schema(rnd)
    q = gen_query(rnd, schema, n_atoms=n_atoms)
    stream = gen_stream(rnd, schema, q.used_tables(), n_steps=n_steps, max_rows=max_rows)
    return Case(seed, q, stream)


if __name__ == "__main__":  # pragma: no cover - debugging aid
    import sys

    for s in (map(int, sys.argv[1:]) if len(sys.argv) > 1 else range(10)):
        c = gen_case(s)
        print(s, c.query.schema)
        print("   ", c.query.sql)
