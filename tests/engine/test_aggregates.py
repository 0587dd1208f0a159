"""Aggregate views: SQL semantics (types, NULLs, empty groups), changes, HAVING, errors, EXPLAIN.

Values are checked against DuckDB running the same SQL over the same rows wherever the
result is data; the randomized stream tests are in test_aggregates_differential.py.
"""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest

import ivm_layer
from ivm_layer import IVMError, SQLError, UnsupportedSQLError, UpdateError

SCHEMA = {
    "o": {"ok": "INTEGER", "cust": "INTEGER", "prio": "VARCHAR"},
    "l": {"ok": "INTEGER", "price": "DECIMAL(12,2)", "disc": "DECIMAL(4,2)", "qty": "INTEGER", "w": "DOUBLE"},
    "c": {"cust": "INTEGER", "nation": "INTEGER"},
}
O_ROWS = [(1, 10, "high"), (2, 10, "low"), (3, 20, "low"), (4, 30, None)]
L_ROWS = [(1, Decimal("100.00"), Decimal("0.10"), 5, 0.5), (1, Decimal("50.50"), Decimal("0.00"), None, 1.5),
          (2, Decimal("10.00"), Decimal("0.05"), 2, None), (3, Decimal("7.25"), None, 7, 2.0),
          (3, Decimal("7.25"), None, 7, 2.0), (9, Decimal("1.00"), Decimal("0.00"), 1, 1.0)]
C_ROWS = [(10, 1), (20, 1), (30, 2)]


def duck(sql: str, o=O_ROWS, l=L_ROWS, c=C_ROWS) -> list[tuple]:
    con = duckdb.connect()
    for t, cols in SCHEMA.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(f'{n} {ty}' for n, ty in cols.items())})")
    for t, rows in (("o", o), ("l", l), ("c", c)):
        if rows:
            con.executemany(f"INSERT INTO {t} VALUES ({', '.join('?' * len(rows[0]))})", [list(r) for r in rows])
    return con.execute(sql).fetchall()


def load(sql: str, o=O_ROWS, l=L_ROWS, c=C_ROWS):
    view = ivm_layer.compile_view(sql, SCHEMA)
    view.apply({"o": [(r, 1) for r in o], "l": [(r, 1) for r in l], "c": [(r, 1) for r in c]})
    return view


def same_rows(view, expected: list[tuple]) -> None:
    """Same bag of rows, with the same Python types value by value."""
    got = sorted(view, key=repr)
    want = sorted(expected, key=repr)
    assert got == want
    for g, w in zip(got, want):
        assert [type(x) for x in g] == [type(x) for x in w], (g, w)


Q3 = ("SELECT o.ok, o.prio, SUM(l.price * (1 - l.disc)) AS revenue, COUNT(*) AS n, COUNT(l.qty) AS nq, "
      "SUM(l.qty) AS q, AVG(l.price) AS ap, MIN(l.price) AS lo, MAX(l.w) AS hi, COUNT(DISTINCT l.price) AS dp "
      "FROM o JOIN l ON o.ok = l.ok GROUP BY o.ok, o.prio")


def test_grouped_join_values_and_types_match_duckdb():
    view = load(Q3)
    expected = duck(Q3)
    same_rows(view, expected)
    row = next(r for r in view if r[0] == 1)
    assert isinstance(row[2], Decimal) and isinstance(row[3], int) and isinstance(row[5], int)
    assert isinstance(row[6], float) and isinstance(row[7], Decimal)


def test_null_only_inputs_give_null_sum_and_zero_count():
    view = load(Q3)
    row = next(r for r in view if r[0] == 3)  # disc is NULL in both rows: revenue NULL
    assert row[2] is None and row[3] == 2 and row[9] == 1
    assert row == next(r for r in duck(Q3) if r[0] == 3)


def test_global_aggregate_has_one_row_over_empty_input():
    sql = "SELECT COUNT(*), SUM(l.qty), AVG(l.w), MIN(l.price), COUNT(DISTINCT l.ok) FROM l"
    view = ivm_layer.compile_view(sql, SCHEMA)
    assert list(view.rows()) == [((0, None, None, None, 0), 1)] == [(tuple(duck(sql, l=[])[0]), 1)]
    change = view.diff({"l": [(L_ROWS[0], 1)]})
    assert change == [((0, None, None, None, 0), -1), ((1, 5, 0.5, Decimal("100.00"), 1), 1)]
    view.delete("l", L_ROWS[0])
    assert list(view) == [(0, None, None, None, 0)]
    assert len(view) == 1


def test_group_vanishes_at_count_zero_and_changes_are_delete_old_insert_new():
    sql = "SELECT l.ok, COUNT(*), SUM(l.qty) FROM l GROUP BY l.ok"
    view = load(sql)
    seen = []
    view.subscribe(seen.append)
    assert view.diff({"l": [((2, Decimal("1.00"), None, 3, None), 1)]}) == [((2, 1, 2), -1), ((2, 2, 5), 1)]
    assert seen == [[((2, 1, 2), -1), ((2, 2, 5), 1)]]
    # replacing a row keeps the count but changes the sum: still one delete + one insert
    change = view.diff({"l": [((2, Decimal("1.00"), None, 3, None), -1), ((2, Decimal("1.00"), None, 4, None), 1)]})
    assert change == [((2, 2, 5), -1), ((2, 2, 6), 1)]
    change = view.diff({"l": [((2, Decimal("1.00"), None, 4, None), -1), (L_ROWS[2], -1)]})
    assert change == [((2, 2, 6), -1)]
    assert 2 not in {r[0] for r in view}
    assert view.diff({"l": []}) == []


def test_min_max_follow_deletes_of_the_extreme_value():
    sql = "SELECT c.nation, MIN(l.price), MAX(l.price), MIN(o.prio) FROM c, o, l WHERE c.cust = o.cust AND o.ok = l.ok GROUP BY c.nation"
    view = load(sql)
    same_rows(view, duck(sql))
    view.delete("l", L_ROWS[0])  # the max of nation 1
    rest = [r for r in L_ROWS if r != L_ROWS[0]]
    same_rows(view, duck(sql, l=rest))
    view.delete("o", O_ROWS[0])  # 'high' leaves: MIN(prio) becomes 'low'
    same_rows(view, duck(sql, o=O_ROWS[1:], l=rest))


def test_having_filters_groups_and_reacts_to_changes():
    sql = "SELECT l.ok, SUM(l.qty) AS q FROM l GROUP BY l.ok HAVING COUNT(*) >= 2 AND SUM(l.qty) > 4"
    view = load(sql)
    same_rows(view, duck(sql))
    assert view.diff({"l": [(L_ROWS[2], -1)]}) == []
    assert view.diff({"l": [((2, Decimal(1), None, 3, None), 1), ((2, Decimal(1), None, 4, None), 1)]}) == [((2, 7), 1)]
    assert view.diff({"l": [((2, Decimal(1), None, 3, None), -1)]}) == [((2, 7), -1)]


def test_unselected_group_columns_repeat_rows_and_distinct_collapses_them():
    sql = "SELECT COUNT(*) AS n FROM l GROUP BY l.ok"
    view = load(sql)
    same_rows(view, duck(sql))
    assert len(view) == 4
    dview = load("SELECT DISTINCT COUNT(*) AS n FROM l GROUP BY l.ok")
    assert sorted(dview) == [(1,), (2,)]
    assert len(dview) == 2


def test_distinct_aggregates():
    sql = ("SELECT o.cust, COUNT(DISTINCT l.price), SUM(DISTINCT l.qty), AVG(DISTINCT l.qty) "
           "FROM o, l WHERE o.ok = l.ok GROUP BY o.cust")
    view = load(sql)
    same_rows(view, duck(sql))
    view.delete("l", L_ROWS[3])  # one of two equal rows: the distinct values stay
    same_rows(view, duck(sql, l=L_ROWS[:3] + L_ROWS[4:]))
    view.delete("l", L_ROWS[4])
    same_rows(view, duck(sql, l=L_ROWS[:3] + L_ROWS[5:]))


def test_inequality_join_aggregate_and_group_by_ordinal_alias():
    sql = "SELECT c.nation AS n, SUM(o.ok) AS s FROM c, o WHERE c.cust < o.cust GROUP BY 1"
    view = load(sql)
    same_rows(view, duck(sql))
    view.delete("o", O_ROWS[3])
    same_rows(view, duck(sql, o=O_ROWS[:3]))


def test_explain_says_which_route_each_aggregate_takes():
    view = ivm_layer.compile_view(
        "SELECT o.cust, SUM(l.price * (1 - l.disc)), SUM(l.qty * o.cust), SUM(l.qty * o.ok), MIN(l.price), COUNT(*) "
        "FROM o, l WHERE o.ok = l.ok GROUP BY o.cust", SCHEMA)
    text = view.explain()
    assert "ring payload on atom l" in text
    assert "the expression spans several atoms" in text
    # o.ok = l.ok makes l.qty * o.ok an expression over atom l alone: a ring payload
    assert text.count("ring payload on atom l") == 2
    assert "ordered multiset" in text
    assert "count of the join" in text


def test_bad_value_is_rejected_without_any_change():
    view = load("SELECT l.ok, SUM(l.qty) FROM l GROUP BY l.ok")
    before = sorted(view)
    with pytest.raises(UpdateError, match="not a number"):
        view.apply({"l": [((7, Decimal(1), None, 3, None), 1), ((7, Decimal(1), None, "x", None), 1)]})
    assert sorted(view) == before
    with pytest.raises(UpdateError):
        view.delete("l", (5, Decimal(1), None, 3, None))  # not present
    assert sorted(view) == before


def test_update_during_enumeration_raises():
    view = load("SELECT l.ok, COUNT(*) FROM l GROUP BY l.ok")
    it = view.rows()
    next(it)
    view.insert("l", (8, Decimal(1), None, 1, None))
    with pytest.raises(ivm_layer.ConcurrentModificationError):
        list(it)


def test_self_join_with_negative_values_cancelling_in_a_group():
    """Sums of opposite sign meet at a projection node; the count component keeps the tuples."""
    schema = {"s": ["a", "b"]}
    sql = "SELECT s1.a, s2.b, SUM(3 - s2.b) FROM s s0, s s1, s s2 WHERE s0.a = s2.a - 2 AND s0.b = s1.b GROUP BY s1.a, s2.b"
    view = ivm_layer.compile_view(sql, schema)
    rows = [(1, 5), (3, 1), (3, 5), (1, 1), (2, 3), (4, 2)]
    view.apply({"s": [(r, 1) for r in rows]})
    view.apply({"s": [((3, 5), -1), ((2, 3), -1)]})
    con = duckdb.connect()
    con.execute("CREATE TABLE s (a INT, b INT)")
    con.executemany("INSERT INTO s VALUES (?, ?)", [list(r) for r in rows if r not in ((3, 5), (2, 3))])
    assert sorted(view) == sorted(con.execute(sql).fetchall())


@pytest.mark.parametrize("sql, error, fragment", [
    ("SELECT l.ok, SUM(l.qty) OVER (ORDER BY l.ok ROWS 1 PRECEDING) FROM l", UnsupportedSQLError, "window frame"),
    ("SELECT SUM(MAX(l.qty)) FROM l", UnsupportedSQLError, "nested aggregate"),
    ("SELECT l.ok FROM l WHERE SUM(l.qty) > 1 GROUP BY l.ok", UnsupportedSQLError, "aggregate in WHERE"),
    ("SELECT l.ok, l.qty, COUNT(*) FROM l GROUP BY l.ok", SQLError, "must appear in GROUP BY"),
    ("SELECT l.ok, COUNT(*) FROM l GROUP BY l.ok ORDER BY 2", UnsupportedSQLError, "ORDER"),
    ("SELECT l.ok, COUNT(*) FROM l GROUP BY l.ok LIMIT 3", UnsupportedSQLError, "LIMIT"),
    ("SELECT l.ok, COUNT(*) + 1 FROM l GROUP BY l.ok", UnsupportedSQLError, "computed from aggregates"),
    ("SELECT l.ok, STRING_AGG(o.prio, ',') FROM l, o WHERE l.ok = o.ok GROUP BY l.ok", UnsupportedSQLError,
     "aggregate function"),
    ("SELECT l.ok, SUM(md5(l.qty)) FROM l GROUP BY l.ok", UnsupportedSQLError, "function md5()"),
    ("SELECT l.ok, COUNT(DISTINCT l.qty, l.ok) FROM l GROUP BY l.ok", UnsupportedSQLError, "several arguments"),
    ("SELECT * FROM l GROUP BY l.ok", UnsupportedSQLError, "* in the SELECT list"),
    ("SELECT l.ok, COUNT(*) FROM l GROUP BY l.ok HAVING l.qty > 1", SQLError, "HAVING must be a group-by column"),
])
def test_unsupported_and_wrong_aggregate_sql_is_named(sql, error, fragment):
    with pytest.raises(error) as e:
        ivm_layer.compile_view(sql, SCHEMA)
    assert fragment in str(e.value)
    assert isinstance(e.value, IVMError)


def test_having_may_name_select_aliases():
    sql = "SELECT l.ok AS k, SUM(l.qty) AS q FROM l GROUP BY l.ok HAVING q > 4 AND k < 3"
    view = load(sql)
    same_rows(view, duck(sql))


def test_grouped_view_over_a_materialized_core_matches_duckdb():
    """The fraud query's join has a core (an inequality cycle): sums take the materialized route."""
    schema = {"trans": {"id": "INTEGER", "acc": "INTEGER", "ts": "INTEGER", "amnt": "INTEGER"}}
    sql = ("SELECT s1.acc, COUNT(*), SUM(l.amnt), MAX(s2.amnt) FROM trans s1, trans s2, trans l "
           "WHERE s1.ts < s2.ts AND s2.ts < l.ts AND l.ts < s1.ts + 3600 AND s1.acc = s2.acc AND s2.acc = l.acc "
           "AND s1.amnt < 100 AND s2.amnt < 100 AND l.amnt > 400 GROUP BY s1.acc")
    view = ivm_layer.compile_view(sql, schema)
    assert "(the view has a materialized core)" in view.explain() and "ring payload on" not in view.explain()
    import random
    rng = random.Random(3)
    rows = []
    con = duckdb.connect()
    con.execute("CREATE TABLE trans (id INTEGER, acc INTEGER, ts INTEGER, amnt INTEGER)")
    for i in range(120):
        if rows and rng.random() < 0.3:
            r = rows.pop(rng.randrange(len(rows)))
            view.delete("trans", r)
            con.execute("DELETE FROM trans WHERE id = ?", [r[0]])
        else:
            r = (i, rng.randint(1, 3), rng.randint(0, 5000), rng.choice([20, 50, 90, 500, 800]))
            rows.append(r)
            view.insert("trans", r)
            con.execute("INSERT INTO trans VALUES (?, ?, ?, ?)", list(r))
        assert sorted(view) == sorted(con.execute(sql).fetchall())
    assert len(view) > 0


def test_count_distinct_and_min_of_text_columns():
    sql = "SELECT o.cust, COUNT(DISTINCT o.prio), MIN(o.prio), MAX(o.prio) FROM o GROUP BY o.cust"
    view = load(sql)
    same_rows(view, duck(sql))
    view.delete("o", O_ROWS[1])
    same_rows(view, duck(sql, o=[O_ROWS[0]] + O_ROWS[2:]))
    with pytest.raises(UpdateError, match="not a number"):
        ivm_layer.compile_view("SELECT SUM(DISTINCT o.prio) FROM o", SCHEMA).insert("o", (1, 1, "x"))


def test_division_by_zero_values_in_min_max_and_distinct_follow_duckdb():
    """x/0 is ±inf and 0/0 NaN (DOUBLE); NaN sorts above every number and counts once."""
    q = "SELECT r.g, MIN(r.a / r.b), MAX(r.a / r.b), COUNT(DISTINCT r.a / r.b) FROM r GROUP BY r.g"
    rows = [(1, 0, 0), (1, 1, 2), (2, 0, 0), (2, 3, 0), (3, -1, 0), (1, 0, 0)]
    view = ivm_layer.compile_view(q, {"r": ["g", "a", "b"]})
    view.apply({"r": [(x, 1) for x in rows]})
    con = duckdb.connect()
    con.execute("CREATE TABLE r (g INT, a INT, b INT)")
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", [list(x) for x in rows])
    assert repr(sorted(view)) == repr(sorted(con.execute(q).fetchall()))
    view.apply({"r": [(x, -1) for x in rows[:2]]})
    con.execute("DELETE FROM r WHERE g = 1 AND b = 2")
    con.execute("DELETE FROM r WHERE rowid = (SELECT min(rowid) FROM r WHERE g = 1)")
    assert repr(sorted(view)) == repr(sorted(con.execute(q).fetchall()))
