"""The grouped TPC-H views of ivm_layer/sql_examples/ (Q3, Q5-style, Q10) over TPC-H-shaped data, kept
equal to DuckDB recomputing them while orders and line items are inserted, deleted and
updated.

Data: DuckDB's ``tpch`` extension (``CALL dbgen(sf=0.01)``, dates shifted so the views'
2026 date constants select the same share as TPC-H's own) when it loads without network;
otherwise — as on our CI machines, which have no network — a seeded generator of the same
schema and key structure. The test says which one it used.
"""

from __future__ import annotations

import collections
import datetime
import os
import random
import sys
from decimal import Decimal

import duckdb
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_sql_examples import TPCH  # noqa: E402

import ivm_layer  # noqa: E402
from ivm_layer.sql_examples import DIR as EXAMPLES  # noqa: E402

VIEWS = ["tpch_q3", "tpch_q5", "tpch_q10"]
REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
DAY0 = datetime.date(2025, 12, 1)
# dbgen's Q3 date 1995-03-15 maps to the views' 2026-01-20
SHIFT = datetime.date(2026, 1, 20) - datetime.date(1995, 3, 15)


def _from_extension() -> dict[str, list[tuple]] | None:
    con = duckdb.connect()
    try:
        con.execute("LOAD tpch")
    except duckdb.Error:
        try:
            con.execute("INSTALL tpch")
            con.execute("LOAD tpch")
        except duckdb.Error:
            return None
    con.execute("CALL dbgen(sf=0.01)")
    out = {}
    for t, cols in TPCH.items():
        sel = []
        for c in cols:
            have = {r[0] for r in con.execute(f"DESCRIBE {t}").fetchall()}
            if c not in have:
                sel.append("NULL")
            elif cols[c] == "DATE":
                sel.append(f"{c} + INTERVAL {SHIFT.days} DAY")
            else:
                sel.append(f"CAST({c} AS {cols[c]})")
        out[t] = [tuple(v.date() if isinstance(v, datetime.datetime) else v for v in r)
                  for r in con.execute(f"SELECT {', '.join(sel)} FROM {t}").fetchall()]
    return out


def _money(rng: random.Random) -> Decimal:
    return Decimal(rng.randint(90_000, 10_000_000)) / 100


def _lineitem(rng: random.Random, ok: int, ln: int, odate: datetime.date, n_supp: int) -> tuple:
    ship = odate + datetime.timedelta(days=rng.randint(1, 120))
    return (ok, ln, rng.randint(1, 50), ship, ship + datetime.timedelta(days=rng.randint(-30, 30)),
            ship + datetime.timedelta(days=rng.randint(1, 30)), rng.randint(1, n_supp), _money(rng),
            Decimal(rng.randint(0, 10)) / 100, rng.choice(["R", "A", "N", None]))


def _generated(seed: int = 42, n_cust: int = 150, n_orders: int = 1500, n_supp: int = 20) -> dict[str, list[tuple]]:
    rng = random.Random(seed)
    region = [(i, name) for i, name in enumerate(REGIONS)]
    nation = [(i, f"NATION{i:02d}", i % 5) for i in range(25)]
    supplier = [(i, f"Supplier#{i:03d}", rng.randrange(25)) for i in range(1, n_supp + 1)]
    customer = [(i, f"Customer#{i:05d}", rng.randrange(25), rng.choice(SEGMENTS)) for i in range(1, n_cust + 1)]
    orders, lineitem = [], []
    for ok in range(1, n_orders + 1):
        odate = DAY0 + datetime.timedelta(days=rng.randint(0, 90))
        orders.append((ok, rng.randint(1, n_cust), rng.choice("OFP"), odate,
                       rng.choice(["1-URGENT", "2-HIGH", "3-MEDIUM"]), 0))
        for ln in range(1, rng.randint(1, 7) + 1):
            lineitem.append(_lineitem(rng, ok, ln, odate, n_supp))
    return {"region": region, "nation": nation, "supplier": supplier, "customer": customer,
            "orders": orders, "lineitem": lineitem}


def test_grouped_tpch_views_match_duckdb_under_changes():
    data = _from_extension()
    source = "tpch extension" if data is not None else "seeded generator"
    if data is None:
        data = _generated()
    print(f"TPC-H data from the {source}: {len(data['lineitem'])} line items")
    con = duckdb.connect()
    for t, cols in TPCH.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(f'{c} {ty}' for c, ty in cols.items())})")
        _insert(con, t, data[t])
    views = {}
    for name in VIEWS:
        sql = (EXAMPLES / f"{name}.sql").read_text()
        view = ivm_layer.compile_view(sql, TPCH)
        view.apply({t: [(r, 1) for r in data[t]] for t in view.tables})
        views[name] = (view, sql)
        assert "ring payload on atom l" in view.explain()

    def check(when: str) -> None:
        for name, (view, sql) in views.items():
            want = collections.Counter(map(tuple, con.execute(sql).fetchall()))
            assert want, f"{name} is empty {when}: the data does not exercise it"
            assert collections.Counter(dict(view.rows())) == want, f"{name} differs from DuckDB {when}"

    check("after loading")
    rng = random.Random(7)
    orders = {r[0]: r for r in data["orders"]}
    items = list(data["lineitem"])
    next_ok = max(orders) + 1
    for round_ in range(4):
        batch: dict[str, list] = {"orders": [], "lineitem": []}
        for r in rng.sample(items, len(items) // 25):  # delete some line items
            items.remove(r)
            batch["lineitem"].append((r, -1))
        for ok in rng.sample(sorted(orders), 20):  # cancel whole orders
            batch["orders"].append((orders.pop(ok), -1))
            gone = [r for r in items if r[0] == ok]
            for r in gone:
                items.remove(r)
                batch["lineitem"].append((r, -1))
        for r in rng.sample(items, 30):  # reprice: an update is a delete + insert
            new = r[:7] + (_money(rng),) + r[8:]
            items.remove(r)
            items.append(new)
            batch["lineitem"] += [(r, -1), (new, 1)]
        for _ in range(40):  # new orders with their items
            odate = DAY0 + datetime.timedelta(days=rng.randint(0, 90))
            o = (next_ok, rng.choice([r[0] for r in data["customer"]]), "O", odate, "2-HIGH", 0)
            orders[next_ok] = o
            batch["orders"].append((o, 1))
            for ln in range(1, rng.randint(1, 5) + 1):
                li = _lineitem(rng, next_ok, ln, odate, len(data["supplier"]))
                items.append(li)
                batch["lineitem"].append((li, 1))
            next_ok += 1
        _delete(con, batch)
        for t, changes in batch.items():
            _insert(con, t, [row for row, k in changes if k > 0])
        for view, _ in views.values():
            change = view.diff(batch)
            assert all(k in (1, -1) for _, k in change)
        check(f"after round {round_}")


KEYS = {"orders": ["o_orderkey"], "lineitem": ["l_orderkey", "l_linenumber"]}


def _lit(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, datetime.date):
        return f"DATE '{v.isoformat()}'"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


def _insert(con, table: str, rows: list[tuple]) -> None:
    """One INSERT … VALUES per 2000 rows (row-by-row executemany is slow in DuckDB)."""
    for i in range(0, len(rows), 2000):
        values = ", ".join("(" + ", ".join(map(_lit, r)) + ")" for r in rows[i:i + 2000])
        con.execute(f"INSERT INTO {table} VALUES {values}")


def _delete(con, batch) -> None:
    """Delete the batch's removed rows by their (unique) TPC-H keys."""
    for t, changes in batch.items():
        cols = list(TPCH[t])
        keys = [tuple(row[cols.index(c)] for c in KEYS[t]) for row, k in changes if k < 0]
        if keys:
            values = ", ".join("(" + ", ".join(map(_lit, key)) + ")" for key in keys)
            con.execute(f"DELETE FROM {t} WHERE ({', '.join(KEYS[t])}) IN (VALUES {values})")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-s"]))
