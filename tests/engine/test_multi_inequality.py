"""Several inequalities on one edge (issue 28 item 4): the multi-level box indexes
(engine/boxgroup.py) against DuckDB evaluating the same SELECT, over random insert / update /
delete streams with NULLs and duplicate rows, 2 and 3 inequalities, with and without an
equality, in 2- and 3-table views; the box index itself against brute force; EXPLAIN's bounds."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest

import ivm_layer
from ivm_layer.engine.boxgroup import BoxGroup, inside

SCHEMA = {"r": ["a", "b", "c"], "s": ["d", "e", "f"], "t": ["g", "h"]}

VIEWS = {
    "2ineq": "SELECT * FROM r, s WHERE r.a < s.d AND r.b < s.e",
    "2ineq_mixed_ops": "SELECT * FROM r, s WHERE r.a <= s.d AND r.b > s.e",
    "2ineq_eq": "SELECT * FROM r, s WHERE r.a < s.d AND r.b >= s.e AND r.c = s.f",
    "3ineq": "SELECT * FROM r, s WHERE r.a < s.d AND r.b < s.e AND r.c > s.f",
    "3ineq_offset": "SELECT * FROM r, s WHERE r.a < s.d + 2 AND r.b >= s.e AND r.c <= s.f",
    "2ineq_project": "SELECT r.a, s.e FROM r, s WHERE r.a < s.d AND r.b < s.e",
    "3table_eq_below": "SELECT * FROM r, s, t WHERE r.a < s.d AND r.b < s.e AND s.f = t.g",
    "3table_eq_on_r": "SELECT * FROM r, s, t WHERE r.a < s.d AND r.b < s.e AND r.c = t.g",
    "3table_two_box_edges": "SELECT * FROM r, s, t WHERE r.a < s.d AND r.b < s.e AND s.f < t.g AND s.e > t.h",
    "3table_3ineq_eq": "SELECT * FROM r, s, t WHERE r.a < s.d AND r.b > s.e AND r.c < s.f AND s.f = t.g",
}


def _tables(sql: str) -> list[str]:
    return [t for t in SCHEMA if f" {t}." in f" {sql}" or f"{t}," in sql or f", {t}" in sql]


class Oracle:
    """The current bags in DuckDB tables; the view recomputed by DuckDB's SELECT."""

    def __init__(self, tables: list[str]):
        self.con = duckdb.connect()
        for t in tables:
            self.con.execute(f"CREATE TABLE {t} ({', '.join(c + ' INTEGER' for c in SCHEMA[t])})")

    def apply(self, batch: dict) -> None:
        for t, changes in batch.items():
            cols = SCHEMA[t]
            for row, k in changes:
                if k > 0:
                    self.con.execute(f"INSERT INTO {t} VALUES ({', '.join('?' * len(row))})", list(row))
                else:  # one copy of the row
                    cond = " AND ".join(f"{c} IS NOT DISTINCT FROM ?" for c in cols)
                    self.con.execute(f"DELETE FROM {t} WHERE rowid = (SELECT min(rowid) FROM {t} WHERE {cond})",
                                     list(row))

    def rows(self, sql: str) -> Counter:
        return Counter(self.con.execute(sql).fetchall())


def _value(rng: random.Random, hi: int):
    return None if rng.random() < 0.08 else rng.randrange(hi)


def _check(v, oracle: Oracle, sql: str) -> Counter:
    want = oracle.rows(sql)
    got = Counter()
    for row, m in v.rows():
        got[row] += m
    assert got == want, (sql, len(got), len(want))
    got_b = Counter()
    for batch in v.rows_batches(5):
        for row, m in batch:
            got_b[row] += m
    assert got_b == want
    assert len(v) == sum(want.values())
    for row in list(want)[:6]:
        assert v.contains(row) == want[row]
    return want


def _stream(name: str, seed: int, steps: int) -> None:
    sql = VIEWS[name]
    tables = _tables(sql)
    rng = random.Random(f"{name}:{seed}")
    hi = 9
    v = ivm_layer.compile_view(sql, {t: SCHEMA[t] for t in tables})
    oracle = Oracle(tables)
    bag = {t: Counter() for t in tables}
    before = Counter()
    for step in range(steps):
        batch: dict = {}
        size = rng.choice([1, 1, 1, 2, 5, 90 if len(tables) == 2 else 25])
        for _ in range(size):
            t = rng.choice(tables)
            pending = Counter(bag[t])
            for row, k in batch.get(t, []):
                pending[row] += k
            live = [row for row, c in pending.items() if c > 0]
            r = rng.random()
            if live and r < 0.25:  # delete one copy
                batch.setdefault(t, []).append((rng.choice(live), -1))
            elif live and r < 0.45:  # update: one copy out, a changed row in
                old = rng.choice(live)
                new = list(old)
                new[rng.randrange(len(new))] = _value(rng, hi)
                batch.setdefault(t, []).extend([(old, -1), (tuple(new), 1)])
            elif live and r < 0.55:  # a duplicate of a present row
                batch.setdefault(t, []).append((rng.choice(live), 1))
            else:
                batch.setdefault(t, []).append((tuple(_value(rng, hi) for _ in SCHEMA[t]), 1))
        for t, changes in batch.items():
            for row, k in changes:
                bag[t][row] += k
            bag[t] = +bag[t]
        if rng.random() < 0.4:  # push mode: the change equals the oracle's difference
            change = v.diff(batch)
            oracle.apply(batch)
            now = oracle.rows(sql)
            want = Counter(now)
            want.subtract(before)
            got = Counter()
            for row, m in change:
                got[row] += m
            assert +got == +want and -got == -want, (name, step)
            before = now
        else:
            v.apply(batch)
            oracle.apply(batch)
            before = oracle.rows(sql)
        if step % 6 == 0 or step == steps - 1:
            before = _check(v, oracle, sql)


@pytest.mark.parametrize("name", list(VIEWS))
def test_multi_inequality_views_match_duckdb(name):
    _stream(name, 1, 24)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("name", list(VIEWS))
def test_multi_inequality_views_match_duckdb_longer(name, seed):
    _stream(name, seed, 120)


@pytest.mark.parametrize("name", ["2ineq", "3ineq", "2ineq_eq"])
def test_bulk_load_and_large_fan_out_match_duckdb(name):
    """A load over the bulk threshold (2,048 rows of a table) and a batch of one side large
    enough to be boxed the other way round, then single-row changes."""
    sql = VIEWS[name]
    tables = _tables(sql)
    rng = random.Random(name)
    v = ivm_layer.compile_view(sql, {t: SCHEMA[t] for t in tables})
    oracle = Oracle(tables)
    hi = 60
    load = {"r": [(tuple(_value(rng, hi) for _ in range(3)), 1) for _ in range(2100)]}
    v.apply(load)
    oracle.con.executemany("INSERT INTO r VALUES (?, ?, ?)", [list(row) for row, _ in load["r"]])
    batch = {"s": [(tuple(_value(rng, hi) for _ in range(3)), 1) for _ in range(150)]}
    v.apply(batch)
    oracle.con.executemany("INSERT INTO s VALUES (?, ?, ?)", [list(row) for row, _ in batch["s"]])
    _check(v, oracle, sql)
    for _ in range(30):
        t = rng.choice(tables)
        row = tuple(_value(rng, hi) for _ in range(3))
        v.insert(t, row)
        oracle.apply({t: [(row, 1)]})
    present = list(oracle.rows("SELECT * FROM s"))[:20]
    for row in present:
        v.delete("s", row)
        oracle.apply({"s": [(row, -1)]})
    _check(v, oracle, sql)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_box_group_matches_brute_force(k):
    """Random multiplicity changes (deletes, duplicates, rebuilds) and random boxes."""
    rng = random.Random(k)
    dims = tuple(range(k))
    g = BoxGroup(dims)
    ref: Counter = Counter()
    for step in range(1500):
        if ref and rng.random() < 0.4:
            t = rng.choice(list(ref))
            d = -rng.randint(1, ref[t])
        else:
            t = tuple(rng.randrange(25) for _ in range(k)) + (rng.randrange(3),)
            d = rng.randint(1, 2)
        g.add(t, d)
        ref[t] += d
        ref = +ref
        if step % 11 == 0:
            box = []
            for _ in range(k):
                lo, hi = rng.choice([None, rng.randrange(25)]), rng.choice([None, rng.randrange(25)])
                box.append((lo, rng.random() < 0.5, hi, rng.random() < 0.5))
            want = {u: m for u, m in ref.items() if inside(u, dims, box)}
            got = list(g.box_items(box))
            assert len(got) == len(want) and dict(got) == want
            assert g.box_sum(box) == sum(want.values())
    assert dict(g.items()) == dict(ref) and g.total == sum(ref.values())
    assert g.nent <= 2 * len(ref) + 4 * 16  # superseded entries are rebuilt away


def test_explain_derives_polylog_bounds():
    v = ivm_layer.compile_view(VIEWS["2ineq"], {t: SCHEMA[t] for t in ("r", "s")})
    text = v.explain()
    assert "update cost: O(log^3 n)" in text
    assert "enumeration: O(log^3 n) delay" in text
    assert "multi-level box index" in text
    assert "O(n)" not in text.split("GJT")[0]
    v3 = ivm_layer.compile_view(VIEWS["3ineq"], {t: SCHEMA[t] for t in ("r", "s")})
    assert "update cost: O(log^4 n)" in v3.explain()
    vt = ivm_layer.compile_view(VIEWS["3table_two_box_edges"], {t: SCHEMA[t] for t in ("r", "s", "t")})
    assert "box" in vt.explain() and "one order covers" not in vt.explain()


def test_session_view_with_two_inequalities_follows_writes():
    """CREATE INCREMENTAL VIEW over a DuckDB session: INSERT / UPDATE / DELETE statements (NULLs,
    duplicates, rollbacks), the view equal to DuckDB's SELECT after each."""
    sql = "SELECT r.a, r.b, r.c, s.d, s.e, t.h FROM r, s, t WHERE r.a < s.d AND r.b < s.e AND s.f = t.g"
    rng = random.Random(11)
    s = ivm_layer.connect()
    for t, cols in SCHEMA.items():
        s.execute(f"CREATE TABLE {t} ({', '.join(c + ' INTEGER' for c in cols)})")
    s.execute("INSERT INTO r VALUES (1, 2, 3), (1, 2, 3), (NULL, 1, 1), (4, 5, 6)")
    s.execute("INSERT INTO s VALUES (5, 6, 1), (2, 3, NULL), (9, 9, 2)")
    s.execute("INSERT INTO t VALUES (1, 7), (2, 8), (2, 8)")
    s.execute(f"CREATE INCREMENTAL VIEW mv AS {sql}")

    def val() -> str:
        return "NULL" if rng.random() < 0.1 else str(rng.randrange(10))

    def check() -> None:
        got = Counter(s.execute("SELECT * FROM mv").fetchall())
        want = Counter(s.execute(sql).fetchall())
        assert got == want

    check()
    for step in range(40):
        t = rng.choice(list(SCHEMA))
        cols = SCHEMA[t]
        r = rng.random()
        if r < 0.45:
            rows = ", ".join("(" + ", ".join(val() for _ in cols) + ")" for _ in range(rng.randint(1, 4)))
            stmt = f"INSERT INTO {t} VALUES {rows}"
        elif r < 0.75:
            stmt = f"UPDATE {t} SET {rng.choice(cols)} = {val()} WHERE {cols[0]} = {rng.randrange(10)}"
        else:
            stmt = f"DELETE FROM {t} WHERE {rng.choice(cols)} = {rng.randrange(10)}"
        if rng.random() < 0.1:
            s.execute("BEGIN")
            s.execute(stmt)
            s.execute("ROLLBACK")
        else:
            s.execute(stmt)
        check()
    s.close()
