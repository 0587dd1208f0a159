"""The bulk paths (engine/bulk.py: column-wise reading, indexes built per key from grouped data,
guard steps in one pass) against the single-tuple path and DuckDB's SELECT, on randomized
batches with NULLs, duplicates (repeated rows and k > 1) and deletes mixed in, for the paper's
query shapes: equality joins (two and three tables), an inequality join, GROUP BY over a table
and over a join. The thresholds are lowered so that CI-sized batches take the bulk paths, and a
spy proves that they did."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest

import ivm_layer
from ivm_layer.engine import batches, bulk, updcode
from ivm_layer.engine import view as view_mod

SCHEMA = {"r": ["a", "b"], "s": ["b", "c"], "t": ["c", "d"]}
SHAPES = {
    "equality": "SELECT r.a, r.b, s.c FROM r, s WHERE r.b = s.b",
    "three_way": "SELECT r.a, s.c, t.d FROM r, s, t WHERE r.b = s.b AND s.c = t.c",
    "inequality": "SELECT r.a, s.c FROM r, s WHERE r.a < s.c",
    "group_by": "SELECT b, count(*) AS n, sum(a) AS sa FROM r GROUP BY b",
    "join_group_by": "SELECT r.b, count(*) AS n, sum(s.c) AS sc FROM r, s WHERE r.b = s.b GROUP BY r.b",
}

#: shapes whose indexes the bulk builder fills (measured: a three-way join, an inequality's ordered chain and a
#: GROUP BY's ring payloads take the generated per-tuple code after the column-wise reader)
BUILT_IN_BULK = {"equality"}


def value(rng):
    return None if rng.random() < 0.12 else rng.randint(0, 7)


def batch_for(rng, bag, tables, deletes):
    """One batch {table: [(row, k)]}: inserts (some repeated, some with k > 1) and, for the
    tables in ``deletes``, deletes of rows present (partly of several copies)."""
    out = {}
    for t in tables:
        items = []
        for _ in range(rng.randint(20, 60)):
            row = (value(rng), value(rng))
            items.append((row, rng.choice([1, 1, 1, 2, 3])))
            if rng.random() < 0.2:
                items.append((row, 1))                # the same row again in the batch
        if t in deletes and bag[t]:
            for row in rng.sample(sorted(bag[t], key=repr), min(len(bag[t]), rng.randint(1, 15))):
                items.append((row, -rng.randint(1, bag[t][row])))
        rng.shuffle(items)
        out[t] = items
    return out


def oracle_rows(con, sql, bag):
    for t, cols in SCHEMA.items():
        con.execute(f"CREATE OR REPLACE TABLE {t} ({', '.join(c + ' INTEGER' for c in cols)})")
        rows = [row for row, k in bag[t].items() for _ in range(k)]
        if rows:
            con.executemany(f"INSERT INTO {t} VALUES (?, ?)", rows)
    return Counter(con.execute(sql).fetchall())


def view_rows(v):
    out = Counter()
    for row, k in v.rows():
        out[row] += k
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_bulk_batches_equal_single_tuple_updates_and_duckdb(shape, monkeypatch):
    for mod in (bulk, batches, view_mod, updcode):
        for name, low in (("BULK_MIN", 16), ("COLUMNS_MIN", 8)):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, low)
    built, read = [], []
    real, real_read = bulk.apply_index, batches.read_rows
    monkeypatch.setattr(bulk, "apply_index", lambda idx, delta: (built.append(len(delta)), real(idx, delta)))
    monkeypatch.setattr(batches, "read_rows", lambda items, arity: (read.append(1), real_read(items, arity))[1])
    sql = SHAPES[shape]
    con = duckdb.connect()
    for seed in range(2):
        rng = random.Random(seed * 31 + len(shape))
        tables = [t for t in SCHEMA if f"{t}." in sql or f"FROM {t}" in sql]
        whole = ivm_layer.compile_view(sql, {t: SCHEMA[t] for t in tables})
        single = ivm_layer.compile_view(sql, {t: SCHEMA[t] for t in tables})
        bag = {t: Counter() for t in SCHEMA}
        for step in range(5):
            # the first batch only inserts (the initial load); later ones mix deletes into some tables
            deletes = set() if step == 0 else {t for t in tables if rng.random() < 0.5}
            b = batch_for(rng, bag, tables, deletes)
            whole.apply(b)
            net = {t: Counter() for t in tables}
            for t, items in b.items():
                for row, k in items:
                    net[t][row] += k
            for t in tables:            # one row at a time: inserts first, then deletes
                for sign in (1, -1):
                    for row, k in net[t].items():
                        if k * sign > 0:
                            for _ in range(abs(k)):
                                (single.insert if sign > 0 else single.delete)(t, row)
                bag[t].update(net[t])
                bag[t] = Counter({r: k for r, k in bag[t].items() if k > 0})
            want = oracle_rows(con, sql, bag)
            assert view_rows(whole) == view_rows(single) == want, (shape, seed, step)
            assert len(whole) == len(single) == sum(want.values())
    assert read, "the column-wise reader never ran"
    if shape in BUILT_IN_BULK:
        assert built, "the bulk index builder never ran"
