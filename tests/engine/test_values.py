"""SQL value semantics (NaN, −0.0, DECIMAL with fractional offsets, mixed numbers) against
DuckDB, and all-or-nothing errors: every rejected update leaves the view exactly as it was."""

from __future__ import annotations

import math
import random
from collections import Counter
from decimal import Decimal

import duckdb
import pytest

import ivm_layer
from ivm_layer.engine.values import NAN
from ivm_layer.errors import IVMError, UpdateError

SCHEMA = {"r": ["a", "b"], "s": ["c", "d"]}
DDL = "CREATE TABLE r (a DOUBLE, b INTEGER); CREATE TABLE s (c DECIMAL(10,2), d DOUBLE)"
A_VALUES = [None, -0.0, 0.0, 1.0, 1.5, 2.0, math.inf, -math.inf, "nan"]
B_VALUES = [None, 0, 1, 2, 3]
C_VALUES = [None, Decimal("0.50"), Decimal("1.00"), Decimal("1.50"), Decimal("2.25"), Decimal("3")]

QUERIES = [
    "SELECT r.a, r.b, s.c, s.d FROM r JOIN s ON r.a < s.d",
    "SELECT r.a, r.b, s.c, s.d FROM r JOIN s ON r.a = s.d",
    "SELECT r.a, r.b, s.c, s.d FROM r JOIN s ON r.b < s.c + 0.5",
    "SELECT r.a, r.b, s.c, s.d FROM r JOIN s ON s.c + 0.25 >= r.b",
    "SELECT r.b, s.c, s.d FROM r JOIN s ON r.a <= s.d AND r.b < s.c",
    "SELECT r.a, r.b FROM r WHERE r.a > 1.0",
    "SELECT r.a, s.c FROM r JOIN s ON r.b > s.c - 0.5 AND r.a >= s.d",
    "SELECT r.a, r.b, s.c, s.d FROM r JOIN s ON r.b = s.c AND r.a < s.d",
]


def _value(v):
    return float("nan") if v == "nan" else v  # a fresh NaN object every time (as decoded)


def _norm(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if v == 0:
            return 0.0
    return v


def _bag(rows) -> Counter:
    out: Counter = Counter()
    for row, k in rows:
        out[tuple(_norm(v) for v in row)] += k
    return out


def _oracle(con, sql, bag) -> Counter:
    con.execute("DELETE FROM r; DELETE FROM s")
    for t, rows in bag.items():
        data = [row for row, k in rows.items() for _ in range(k)]
        if data:
            con.executemany(f"INSERT INTO {t} VALUES (?, ?)", data)
    return _bag((tuple(r), 1) for r in con.execute(sql).fetchall())


@pytest.mark.parametrize("qi", range(len(QUERIES)))
def test_value_semantics_match_duckdb(qi):
    sql = QUERIES[qi]
    rng = random.Random(1300 + qi)
    con = duckdb.connect()
    con.execute(DDL)
    for trial in range(2):
        view = ivm_layer.compile_view(sql, SCHEMA)
        bag = {"r": Counter(), "s": Counter()}
        for step in range(70):
            t = rng.choice(["r", "s"])
            present = [row for row, k in bag[t].items() if k]
            if present and rng.random() < 0.35:
                row = rng.choice(present)
                fresh = tuple(float("nan") if isinstance(v, float) and math.isnan(v) else v for v in row)
                batch = {t: [(fresh, -1)]}
                bag[t][row] -= 1
                if not bag[t][row]:
                    del bag[t][row]
            else:
                if t == "r":
                    row = (_value(rng.choice(A_VALUES)), rng.choice(B_VALUES))
                else:
                    row = (rng.choice(C_VALUES), _value(rng.choice(A_VALUES)))
                key = tuple(NAN if isinstance(v, float) and v != v else v for v in row)
                bag[t][key] += 1
                batch = {t: [(row, 1)]}
            if rng.random() < 0.5:
                view.apply(batch)
            else:
                before = _bag(view.rows())
                change = _bag(view.diff(batch))
                after = _bag(view.rows())
                expect = Counter(after)
                expect.subtract(before)
                assert change == {r: k for r, k in expect.items() if k}, (sql, step)
            if step % 5 == 4 or step == 69:
                exp = _oracle(con, sql, bag)
                got = _bag(view.rows())
                assert got == exp, (sql, trial, step)
                assert len(view) == sum(exp.values())
    con.close()


def test_nan_row_deleted_with_a_freshly_decoded_nan():
    v = ivm_layer.compile_view("SELECT * FROM r JOIN s ON r.a < s.d", SCHEMA)
    v.insert("r", (float("nan"), 1))
    v.insert("s", (Decimal("1"), 5.0))
    assert len(v) == 0  # NaN is above every number
    v.insert("s", (Decimal("1"), float("nan")))
    assert len(v) == 0  # NaN < NaN is false
    v.delete("r", (float("nan"), 1))
    v.apply({"s": [((Decimal("1"), float("nan")), -1)]})
    assert v.stats()["base_rows"] == 1


def test_negative_zero_equals_zero():
    v = ivm_layer.compile_view("SELECT r.b, s.c FROM r JOIN s ON r.a = s.d", SCHEMA)
    v.insert("r", (-0.0, 1))
    v.insert("s", (Decimal("2"), 0.0))
    assert len(v) == 1
    v.delete("r", (0.0, 1))  # the same row as far as SQL is concerned
    assert len(v) == 0


def test_mixed_numbers_compare_exactly():
    v = ivm_layer.compile_view("SELECT * FROM r JOIN s ON r.a < s.d + 0.1", SCHEMA)
    v.apply({"r": [((1, 0), 1), ((Decimal("1.1"), 0), 1), ((1.05, 0), 1)],
             "s": [((Decimal("0"), 1), 1)]})
    # 1 < 1.1 and 1.05 < 1.1; Decimal 1.1 < 1 + 0.1 (an exact DECIMAL literal) is false
    assert sorted(r[0] for r, _ in v.rows()) == [1, 1.05]


# -- all or nothing -----------------------------------------------------------------------
def _state(view):
    base = view._base if hasattr(view, "_base") else view
    return (sorted(map(repr, view.rows())), len(view), view.stats(),
            {t: dict(s) for t, s in base._tables.items()}, dict(base._kinds))


def _rejects(view, batch):
    before = _state(view)
    with pytest.raises(UpdateError):
        view.apply(batch)
    assert _state(view) == before
    p = None
    with pytest.raises(UpdateError):
        p = view.prepare(batch)
    assert p is None and _state(view) == before


def test_errors_change_nothing():
    v = ivm_layer.compile_view("SELECT * FROM r JOIN s ON r.a < s.d", SCHEMA)
    v.apply({"r": [((1, 1), 1)], "s": [((Decimal("1"), 2), 1)]})
    _rejects(v, {"r": [((1, 1), -1)], "R": [((1, 1), -1)]})  # two spellings, one table
    _rejects(v, {"r": None})
    _rejects(v, {"r": 5})
    _rejects(v, {"r": "ab"})
    _rejects(v, {"r": [((1, 1), 1)], "s": [((Decimal(1), "x"), 1)]})  # text compared with numbers
    _rejects(v, {"s": [((Decimal(1), 1 + 2j), 1)]})  # a value that cannot be ordered
    _rejects(v, {"r": [((1, 2), 1), ([1, 2, 3], 1)]})
    _rejects(v, {"r": [((1, 2), True)]})
    _rejects(v, {"r": [((1, 2), 1)], "t": [((1,), 1)]})
    with pytest.raises(UpdateError):
        v.insert("s", (Decimal(3), "x"))
    assert len(v) == 1 and v.stats()["base_rows"] == 2


def test_compared_variables_share_one_kind():
    v = ivm_layer.compile_view("SELECT * FROM r JOIN s ON r.a < s.d", SCHEMA)
    v.insert("r", (1, 1))
    _rejects(v, {"s": [((Decimal(1), "x"), 1)]})
    v.insert("s", (Decimal(1), 2.5))
    assert len(v) == 1


def test_filter_on_text_constant_rejects_numbers_first():
    v = ivm_layer.compile_view("SELECT * FROM r WHERE r.a < 'x'", SCHEMA)
    _rejects(v, {"r": [((1, 1), 1)]})
    v.insert("r", ("a", 1))
    assert len(v) == 1


def test_decimal_with_fractional_offset_commits():
    v = ivm_layer.compile_view("SELECT * FROM r JOIN s ON r.a < s.c + 0.5", SCHEMA)
    v.insert("r", (Decimal("1.5"), 1))
    v.insert("s", (Decimal("1.2"), 1))
    v.insert("s", (Decimal("1.0"), 1))
    assert [r for r, _ in v.rows()] == [(Decimal("1.5"), 1, Decimal("1.2"), 1)]
    v.delete("s", (Decimal("1.2"), 1))
    assert len(v) == 0 and v.stats()["base_rows"] == 2


def test_nan_against_decimal_is_rejected_before_anything_changes():
    v = ivm_layer.compile_view("SELECT * FROM r JOIN s ON r.a < s.c", SCHEMA)
    v.insert("s", (Decimal("1.5"), 1))
    _rejects(v, {"r": [((float("nan"), 1), 1)]})


def test_aggregate_type_errors():
    with pytest.raises(IVMError):
        ivm_layer.compile_view("SELECT r.a, sum(r.b) FROM r GROUP BY r.a HAVING sum(r.b) > 'x'", SCHEMA)
    with pytest.raises(IVMError):
        ivm_layer.compile_view("SELECT r.a, sum('x') FROM r GROUP BY r.a", SCHEMA)
    v = ivm_layer.compile_view("SELECT r.a, max(r.b) FROM r GROUP BY r.a HAVING max(r.b) > 'x'", SCHEMA)
    _rejects(v, {"r": [((1, 1), 1)]})
    v.insert("r", (1, "y"))
    assert list(v.rows()) == [((1, "y"), 1)]
    s = ivm_layer.compile_view("SELECT r.a, sum(r.b) FROM r GROUP BY r.a", SCHEMA)
    s.insert("r", (1, 2))
    _rejects(s, {"r": [((1, "x"), 1)]})


def test_nan_in_aggregates_follows_duckdb():
    v = ivm_layer.compile_view("SELECT r.a, max(r.b), count(*) FROM r GROUP BY r.a HAVING max(r.b) > 5", SCHEMA)
    v.apply({"r": [((1, 2.0), 1), ((1, float("nan")), 1)]})
    rows = list(v.rows())
    assert len(rows) == 1 and math.isnan(rows[0][0][1]) and rows[0][0][2] == 2
    v.delete("r", (1, float("nan")))
    assert list(v.rows()) == []
