"""pgbench (15) with custom scripts against ``ivm serve``: simple, extended and prepared
protocols, 4 clients writing and reading served views; the views equal their SELECT after."""

from __future__ import annotations

import os
import subprocess

import psycopg
import pytest

SCRIPT = """\\set id random(1, 1000000000)
\\set cust random(1, 3)
INSERT INTO orders VALUES (:id, :cust, 2.50, 'pgbench');
SELECT n, total FROM region_totals WHERE region = 'north';
SELECT count(*) FROM region_totals;
{by_cust_read}UPDATE orders SET amount = amount + 1 WHERE id = :id;
BEGIN;
INSERT INTO orders VALUES (:id + 1, :cust, 1.00, 'pgbench tx');
{by_cust_count}COMMIT;
DELETE FROM orders WHERE id = :id;
"""

ORACLE = ("SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN customers c "
          "ON o.cust = c.id GROUP BY c.region ORDER BY 1")


@pytest.fixture(scope="module")
def shop(any_served):
    served = any_served
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("CREATE TABLE orders (id BIGINT, cust INT, amount DECIMAL(12,2), note VARCHAR)")
        c.execute("CREATE TABLE customers (id INT, region VARCHAR)")
        c.execute("INSERT INTO customers VALUES (1, 'north'), (2, 'south'), (3, 'east')")
        c.execute("INSERT INTO orders SELECT i, i % 3 + 1, i % 100, 'seed' FROM generate_series(0, 999) t(i)")
        c.execute("CREATE INCREMENTAL VIEW region_totals AS SELECT c.region, count(*) AS n, sum(o.amount) AS total "
                  "FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.region")
        if served.mode == "duckdb":
            c.execute("CREATE INCREMENTAL VIEW by_cust AS SELECT o.id, o.amount FROM orders o WHERE o.cust = $cust")
    return served


@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_pgbench_custom_script(shop, tmp_path, mode):
    script = tmp_path / "bench.sql"
    duck = shop.mode == "duckdb"
    script.write_text(SCRIPT.format(
        by_cust_read="SELECT id, amount FROM by_cust WHERE cust = :cust LIMIT 5;\n" if duck else "",
        by_cust_count="SELECT count(*) FROM by_cust WHERE cust = :cust;\n" if duck else ""))
    env = dict(os.environ, PGHOST=shop.host, PGPORT=str(shop.port), PGUSER="ivm", PGDATABASE="shop")
    res = subprocess.run(["pgbench", "-n", "-f", str(script), "-M", mode, "-c", "4", "-j", "2", "-t", "8"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "number of transactions actually processed: 32/32" in res.stdout, res.stdout
    assert "number of failed transactions: 0" in res.stdout, res.stdout
    with psycopg.connect(shop.url(), autocommit=True) as c:
        c.execute("INSERT INTO customers SELECT 99, 'nowhere' WHERE false")   # proxy: read after a write syncs
        assert c.execute("SELECT * FROM region_totals ORDER BY 1").fetchall() == c.execute(ORACLE).fetchall()
        for cust in (1, 2, 3) if duck else ():
            assert sorted(c.execute("SELECT * FROM by_cust WHERE cust = %s", (cust,)).fetchall()) == sorted(
                c.execute("SELECT id, amount FROM orders WHERE cust = %s", (cust,)).fetchall())
