"""Range parameters with an ordered index (issue 28 item 5), differentially against DuckDB.

Each view below is compiled once and fed a random insert / update / delete stream (small
domains, so duplicates are common; NULLs in every column; ints and floats mixed in the compared
columns); DuckDB holds the same table. After every step, lookups with random parameter values
(present, absent, NULL, int and float, empty and inverted intervals) must equal DuckDB running
the view's own SQL with those values bound to its placeholders. The shapes: equality + range,
range only, BETWEEN, two bounds on one column, a range on a second column (checked row by row),
joins with the range in one fracture component, a range column too deep to index (filtered),
views outside CQAP0 (ordered answer map), a Boolean lookup. EXPLAIN must say which ones use
the index.
"""

import random
from collections import Counter

import duckdb
import pytest

from ivm_layer import compile_view
from ivm_layer.errors import IVMError, UpdateError

TRANS = {"trans": ["id", "acc", "ts", "amount"]}
RS = {"r": ["a", "b", "c"], "s": ["a", "d"]}
DEEP = {"r": ["a", "b", "ts"], "s": ["a", "b", "c"]}

# (sql, schema, indexed?) — indexed: EXPLAIN names the ordered index; False: it says why not
VIEWS = [
    ("SELECT t.id, t.amount FROM trans t WHERE t.acc = $acc AND t.ts > $since", TRANS, True),
    ("SELECT t.id, t.ts FROM trans t WHERE t.ts BETWEEN $lo AND $hi", TRANS, True),
    ("SELECT t.acc FROM trans t WHERE t.ts >= $lo AND t.ts < $hi AND t.amount <= $cap", TRANS, True),
    ("SELECT t.id, t.ts FROM trans t WHERE $lo < t.ts AND t.ts >= $lo2 AND t.acc = $acc", TRANS, True),
    ("SELECT t.amount FROM trans t WHERE t.ts <= $hi", TRANS, True),
    ("SELECT 1 AS hit FROM trans t WHERE t.acc = $acc AND t.ts > $since", TRANS, True),
    ("SELECT r.b, r.c, s.d FROM r JOIN s ON r.a = s.a WHERE r.a = $a AND r.b > $lo", RS, True),
    ("SELECT r.c, s.d FROM r JOIN s ON r.a = s.a WHERE r.b BETWEEN $lo AND $hi AND s.d < $dmax", RS, True),
    ("SELECT DISTINCT t.acc, t.amount FROM trans t WHERE t.ts > $since", TRANS, True),  # answer map
    ("SELECT r.b FROM r JOIN s ON r.b = s.d WHERE r.a = $a AND r.b < $hi", RS, True),  # not CQAP0
    ("SELECT r.b, r.ts, s.c FROM r JOIN s ON r.a = s.a AND r.b = s.b WHERE r.a = $a AND r.ts > $x", DEEP, False),
    ("SELECT r.b, s.d FROM r, s WHERE r.a = $a AND s.d > $lo", RS, True),  # the range in the other component
    ("SELECT t.id FROM trans t WHERE t.acc = $acc AND t.acc >= $lo", TRANS, False),  # on the input itself
]


def _value(rnd: random.Random, null: float = 0.12):
    if rnd.random() < null:
        return None
    x = rnd.randint(0, 3)
    return x + 0.5 if rnd.random() < 0.15 else x  # mixed int / float in one column


def _duck(schema: dict) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for t, cols in schema.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(c + ' DOUBLE' for c in cols)})")
    return con


def _where(cols: list[str], row: tuple) -> tuple[str, list]:
    return " AND ".join(f"{c} IS NOT DISTINCT FROM ?" for c in cols), list(row)


def _delete_one(con, table: str, cols: list[str], row: tuple) -> None:
    cond, args = _where(cols, row)
    con.execute(f"DELETE FROM {table} WHERE rowid = (SELECT min(rowid) FROM {table} WHERE {cond})", args)


def _expected(con, sql: str, values: dict) -> Counter:
    return Counter(con.execute(sql, values).fetchall())


def _got(view, values: dict) -> Counter:
    out = Counter()
    for row, m in view.lookup(**values):
        assert m > 0
        out[row] += m
    return out


@pytest.mark.parametrize("case", range(len(VIEWS)))
def test_range_lookups_match_duckdb(case):
    _differential(case, 1000 + case, 70)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", range(len(VIEWS)))
def test_range_lookups_match_duckdb_long(case, seed):
    _differential(case, 5000 + 100 * seed + case, 400)


def _differential(case: int, seed: int, steps: int) -> None:
    sql, schema, indexed = VIEWS[case]
    view = compile_view(sql, schema)
    text = view.explain()
    if indexed:
        assert "ordered index on" in text and "O(log n + answer)" in text and "no ordered index" not in text
    else:
        assert "no ordered index" in text and "O(rows under the equality key)" in text
    con = _duck(schema)
    rnd = random.Random(seed)
    live: dict[str, list[tuple]] = {t: [] for t in schema}
    checks = nonempty = 0
    for step in range(steps):
        table = rnd.choice(list(schema))
        cols = schema[table]
        kind = rnd.random()
        if kind < 0.55 or not live[table]:
            row = tuple(_value(rnd) for _ in cols)
            other = [(t, r) for t in schema if t != table for r in live[t]]
            if other and rnd.random() < 0.5:  # join partners: the shared columns of a row of another table
                t, r = rnd.choice(other)
                row = tuple(r[schema[t].index(c)] if c in schema[t] else x for c, x in zip(cols, row))
            k = 2 if rnd.random() < 0.2 else 1  # a duplicate loaded twice
            view.apply({table: [(row, k)]})
            for _ in range(k):
                con.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols))})", list(row))
            live[table] += [row] * k
        elif kind < 0.8:
            row = rnd.choice(live[table])
            view.delete(table, row)
            _delete_one(con, table, cols, row)
            live[table].remove(row)
        else:  # an update: one batch, the old row out and the new one in
            old = rnd.choice(live[table])
            new = tuple(_value(rnd) if rnd.random() < 0.5 else x for x in old)
            view.apply({table: [(old, -1), (new, 1)]})
            _delete_one(con, table, cols, old)
            con.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols))})", list(new))
            live[table].remove(old)
            live[table].append(new)
        for _ in range(4):
            values = {p: _value(rnd, 0.05) for p in view.params}
            if rnd.random() < 0.6:  # wide intervals, so answers are often not empty
                for p in view.params:
                    if p in ("lo", "lo2", "since", "x"):
                        values[p] = rnd.choice((-1, 0, 1, 0.5))
                    elif p in ("hi", "cap", "dmax"):
                        values[p] = rnd.choice((2, 2.5, 4))
            got = _got(view, values)
            assert got == _expected(con, sql, values), (sql, step, values)
            checks += 1
            nonempty += bool(got)
    assert checks == 4 * steps and nonempty > 25, (checks, nonempty)
    con.close()


def test_range_lookup_cost_does_not_read_the_rows_outside_the_range():
    """The ordered index is what serves the lookup: a 5-row range out of 20,000 rows (one key)
    visits only those rows (counted through the rows an open lookup yields before the range
    ends, and through the first row being reached without a pass over the key's rows)."""
    v = compile_view("SELECT t.id, t.ts FROM trans t WHERE t.acc = $acc AND t.ts >= $since", TRANS)
    v.apply({"trans": [((i, 1, i, 0), 1) for i in range(20_000)]})
    it = v.lookup(acc=1, since=19_995)
    assert sorted(it) == [((i, i), 1) for i in range(19_995, 20_000)]
    only = compile_view("SELECT t.id FROM trans t WHERE t.ts BETWEEN $lo AND $hi", TRANS)
    only.apply({"trans": [((i, i % 7, i, 0), 1) for i in range(20_000)]})
    assert sorted(only.lookup(lo=10, hi=12)) == [((10,), 1), ((11,), 1), ((12,), 1)]
    # the range node's index is ordered: one bisection finds the range (white box: the group)
    trep = only._trep
    node = trep.nodes[only._range_node]
    assert node.node.order_by == "t.ts" and node.p_index.sort_pos is not None


def test_range_parameters_errors_and_edge_cases():
    v = compile_view("SELECT t.id FROM trans t WHERE t.ts > $since AND t.ts <= $until", TRANS)
    v.apply({"trans": [((1, 1, 5, 0), 1), ((2, 1, None, 0), 1), ((3, 1, 7.5, 0), 1)]})
    assert sorted(v.lookup(since=4, until=7.5)) == [((1,), 1), ((3,), 1)]
    assert list(v.lookup(since=7, until=6)) == [] and list(v.lookup(since=5, until=5)) == []
    assert list(v.lookup(since=None, until=9)) == []
    with pytest.raises(IVMError, match="cannot be compared"):
        list(v.lookup(since="a", until=9))
    # the compared column is ordered: a value of another kind is refused before any change
    with pytest.raises(UpdateError, match="no change was applied"):
        v.apply({"trans": [((4, 1, 6, 0), 1), ((5, 1, "x", 0), 1)]})
    assert sorted(v.lookup(since=0, until=99)) == [((1,), 1), ((3,), 1)] and len(v) == 2
    with pytest.raises(IVMError, match="range parameters .* not supported with GROUP BY"):
        compile_view("SELECT t.acc, count(*) FROM trans t WHERE t.ts > $since GROUP BY t.acc", TRANS)
