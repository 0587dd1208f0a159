"""Grouped views through a DuckDB session: CREATE INCREMENTAL [MATERIALIZED] VIEW … GROUP BY,
kept equal to DuckDB evaluating the SELECT after every statement of a random write workload
(inserts, updates, deletes, rolled-back transactions), with the session unchanged."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

import ivm_layer

GROUPED = {
    "g_rev": "SELECT o.cust, SUM(l.price * (1 - l.disc)) AS revenue, COUNT(*) AS n, AVG(l.qty) AS aq "
             "FROM o JOIN l ON o.ok = l.ok GROUP BY o.cust",
    "g_minmax": "SELECT l.ok, MIN(l.price) AS lo, MAX(l.qty) AS hi, COUNT(DISTINCT l.qty) AS dq "
                "FROM l GROUP BY l.ok HAVING COUNT(*) > 1",
    "g_all": "SELECT COUNT(*) AS n, SUM(l.qty) AS q FROM o, l WHERE o.ok = l.ok AND o.cust < 3",
}


def _close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
    return a == b


def _same(got, want) -> bool:
    got, want = sorted(got, key=repr), sorted(want, key=repr)
    return len(got) == len(want) and all(len(x) == len(y) and all(map(_close, x, y)) for x, y in zip(got, want))


def check(s) -> None:
    for name, sql in GROUPED.items():
        got = s.execute(f"SELECT * FROM {name}").fetchall()
        want = s.execute(sql).fetchall()
        assert _same(got, want), (name, got, want)


def writes(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.35:
        rows = ", ".join(f"({rng.randint(0, 6)}, {rng.randint(1, 9)}.{rng.randint(0, 99):02d}, "
                         f"{rng.choice(['NULL', '0.05', '0.10', '0.00'])}, {rng.choice(['NULL', str(rng.randint(1, 5))])})"
                         for _ in range(rng.randint(1, 3)))
        return f"INSERT INTO l VALUES {rows}"
    if r < 0.55:
        return f"INSERT INTO o VALUES ({rng.randint(0, 6)}, {rng.randint(0, 4)})"
    if r < 0.70:
        return f"UPDATE l SET qty = qty + 1 WHERE ok = {rng.randint(0, 6)}"
    if r < 0.85:
        return f"DELETE FROM l WHERE ok = {rng.randint(0, 6)} AND qty IS NOT NULL"
    return f"DELETE FROM o WHERE cust = {rng.randint(0, 4)}"


@pytest.mark.parametrize("materialized", [False, True])
def test_grouped_views_follow_writes_through_a_session(materialized):
    rng = random.Random(5 + materialized)
    s = ivm_layer.connect()
    s.execute("CREATE TABLE o (ok INTEGER, cust INTEGER)")
    s.execute("CREATE TABLE l (ok INTEGER, price DECIMAL(10,2), disc DECIMAL(4,2), qty INTEGER)")
    s.execute("INSERT INTO o VALUES (1, 1), (2, 1), (3, 2)")
    s.execute("INSERT INTO l VALUES (1, 10.00, 0.10, 2), (1, 5.50, NULL, 3), (2, 3.25, 0.00, NULL)")
    kind = "MATERIALIZED " if materialized else ""
    for name, sql in GROUPED.items():
        s.execute(f"CREATE INCREMENTAL {kind}VIEW {name} AS {sql}")
    check(s)
    rev = s.execute("SELECT revenue FROM g_rev WHERE cust = 1").fetchone()[0]
    assert isinstance(rev, Decimal) and rev == Decimal("12.25")
    changes = []
    s.view("g_rev").subscribe(changes.append)
    for step in range(40):
        if rng.random() < 0.15:
            s.execute("BEGIN")
            s.execute(writes(rng))
            s.execute("ROLLBACK")
        else:
            s.execute(writes(rng))
        check(s)
    assert changes, "the workload changed g_rev at least once"
    for change in changes:  # a changed group: its old row out, its new row in
        assert all(k in (1, -1) for _, k in change)
    s.close()
