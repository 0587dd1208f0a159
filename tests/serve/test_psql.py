"""The real psql (15) against ``ivm serve`` on a DuckDB file: -c, -f, the describe commands,
\\copy both ways, \\watch, Ctrl-C of a long query, tab completion; views equal their SELECT."""

from __future__ import annotations

import os
import re
import threading
import time

import pexpect
import psycopg
import pytest
from serve_process import psql


@pytest.fixture(scope="module")
def shop(any_served):
    s = any_served
    psql(s, "-c", "CREATE TABLE orders (id INT, cust INT, amount DECIMAL(10,2), note VARCHAR)",
         "-c", "CREATE TABLE customers (id INT PRIMARY KEY, region VARCHAR)",
         "-c", "INSERT INTO customers VALUES (1, 'north'), (2, 'south'), (3, 'east')",
         "-c", "INSERT INTO orders SELECT i, i % 3 + 1, (i % 17) * 1.5, 'n' || i FROM generate_series(0, 299) t(i)",
         "-c", "CREATE INCREMENTAL VIEW region_totals AS SELECT c.region, count(*) AS n, sum(o.amount) AS total "
               "FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.region")
    # parameterized views: both modes (issue 28 item 6)
    psql(s, "-c", "CREATE INCREMENTAL VIEW by_cust AS SELECT o.id, o.amount FROM orders o WHERE o.cust = $cust")
    return s


LONG = {"duckdb": "SELECT sum(hash(a.i * b.i)) FROM range(100000) a(i), range(100000) b(i);",
        "postgres": "SELECT pg_sleep(60);"}


ORACLE = ("SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN customers c "
          "ON o.cust = c.id GROUP BY c.region")


def _same_as_oracle(server) -> None:
    out = psql(server, "-A", "-t", "-c", "SELECT * FROM region_totals ORDER BY region",
               "-c", ORACLE + " ORDER BY region").stdout.strip().split("\n")
    half = len(out) // 2
    assert out[:half] == out[half:] and half == 3


def test_c_and_f(shop, tmp_path):
    out = psql(shop, "-c", "SELECT count(*) FROM region_totals").stdout
    assert " count \n-------\n     3\n(1 row)" in out
    script = tmp_path / "w.sql"
    script.write_text("BEGIN;\nINSERT INTO orders VALUES (1000, 1, 5.00, 'f');\n"
                      "UPDATE orders SET amount = amount + 1 WHERE id < 10;\nCOMMIT;\n"
                      "DELETE FROM orders WHERE id BETWEEN 20 AND 29;\n"
                      "SELECT region, n FROM region_totals ORDER BY region;\n")
    out = psql(shop, "-f", str(script)).stdout
    assert "BEGIN" in out and "COMMIT" in out and "DELETE 10" in out and "(3 rows)" in out
    _same_as_oracle(shop)
    assert "42P01" in psql(shop, "-v", "VERBOSITY=verbose", "-c", "SELECT * FROM nowhere", check=False).stderr


def test_describe_commands(shop):
    dv = psql(shop, "-c", r"\dv").stdout
    assert "region_totals" in dv and "view" in dv and "by_cust" in dv
    dt = psql(shop, "-c", r"\dt").stdout
    assert "orders" in dt and "customers" in dt and "region_totals" not in dt
    d = psql(shop, "-c", r"\d").stdout
    assert all(n in d for n in ("orders", "customers", "region_totals"))
    dview = psql(shop, "-c", r"\d region_totals").stdout
    # proxy mode: the served views appear as plain views in schema ivm_serve, with their definition
    assert re.search(r'View "(public|ivm_serve)\.region_totals"', dview) and "region" in dview and "bigint" in dview
    dtab = psql(shop, "-c", r"\d customers").stdout
    assert 'Table "public.customers"' in dtab and "not null" in dtab
    definition = psql(shop, "-c", r"\d+ region_totals").stdout
    assert "View definition" in definition and "GROUP BY" in definition
    dbname = "shop" if shop.mode == "duckdb" else shop.upstream.rsplit("/", 1)[1]   # proxy: the database behind
    assert dbname in psql(shop, "-c", r"\l").stdout
    assert "public" in psql(shop, "-c", r"\dn").stdout


def test_copy_in_and_out(shop, tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("id,cust,amount,note\n" + "".join(f"{2000 + i},{i % 3 + 1},{i}.25,csv {i}\n" for i in range(50)))
    out = psql(shop, "-c", rf"\copy orders FROM '{src}' WITH (FORMAT csv, HEADER true)").stdout
    assert "COPY 50" in out
    tsv = tmp_path / "in.tsv"
    tsv.write_text("".join(f"{3000 + i}\t2\t1.00\ttab\\tnote\n" for i in range(5)) + "3100\t1\t\\N\t\\N\n")
    assert "COPY 6" in psql(shop, "-c", rf"\copy orders FROM '{tsv}'").stdout
    _same_as_oracle(shop)
    dst = tmp_path / "out.csv"
    psql(shop, "-c", rf"\copy (SELECT * FROM region_totals ORDER BY region) TO '{dst}' WITH (FORMAT csv, HEADER)")
    lines = dst.read_text().splitlines()
    assert lines[0] == "region,n,total" and len(lines) == 4
    notes = psql(shop, "-A", "-t", "-c", "SELECT note FROM orders WHERE id = 3000").stdout.strip()
    assert notes == "tab\tnote"


def _spawn(server) -> pexpect.spawn:
    env = dict(os.environ, PAGER="cat", PSQL_PAGER="cat", TERM="dumb")
    child = pexpect.spawn("psql", ["-X", "-h", server.host, "-p", str(server.port), "-U", "ivm", "shop"],
                          env=env, encoding="utf-8", timeout=30)
    child.expect("shop=#")
    return child


def test_watch_sees_other_clients_writes(shop):
    child = _spawn(shop)
    try:
        child.sendline("SELECT n FROM region_totals WHERE region = 'north' \\watch 1")
        child.expect(r"\n\s+(\d+)\s*\r?\n")
        first = int(child.match.group(1))
        with psycopg.connect(shop.url(), autocommit=True) as c:
            c.execute("INSERT INTO orders SELECT 5000 + i, 1, 1, 'w' FROM generate_series(0, 6) t(i)")
        deadline = time.monotonic() + 20
        seen = first
        while seen != first + 7 and time.monotonic() < deadline:
            child.expect(r"\n\s+(\d+)\s*\r?\n")
            seen = int(child.match.group(1))
        assert seen == first + 7
        child.sendcontrol("c")
        child.expect("shop=#")
    finally:
        child.close(force=True)


def test_ctrl_c_cancels_a_long_query(shop):
    child = _spawn(shop)
    try:
        child.sendline(LONG[shop.mode])
        time.sleep(1.5)
        t0 = time.monotonic()
        child.sendcontrol("c")
        child.expect("canceling statement due to user request")
        assert time.monotonic() - t0 < 10
        child.expect("shop=#")
        child.sendline("SELECT 'still' || ' here';")
        child.expect("still here")
    finally:
        child.close(force=True)


def test_tab_completion(shop):
    child = _spawn(shop)
    try:
        child.send("SELECT * FROM region_t\t")
        child.expect("region_t\x07?otals")
        child.sendline(";")
        child.expect(r"\(3 rows\)")
        child.send("\\d custo\t")
        child.expect("custo\x07?mers")
        child.sendline("")
        child.expect("region")
    finally:
        child.close(force=True)


def test_concurrent_psql_clients_and_the_views_stay_exact(shop):
    errors = []

    def writer(k: int) -> None:
        try:
            for j in range(5):
                psql(shop, "-c", f"INSERT INTO orders VALUES ({10000 + k * 100 + j}, {j % 3 + 1}, {j}, 'c')",
                     "-c", f"DELETE FROM orders WHERE id = {10000 + k * 100 + j - 1}")
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    _same_as_oracle(shop)


def test_parameterized_view_read_with_psql(shop):
    """A parameterized view through psql (simple query protocol), in both server modes: the point
    read, a query around it, and the error for a missing input with its SQLSTATE."""
    for sql, oracle in (("SELECT * FROM by_cust WHERE cust = 2", "SELECT id, amount FROM orders WHERE cust = 2"),
                        ("SELECT count(*), sum(amount) FROM by_cust WHERE cust = 3 AND amount > 5",
                         "SELECT count(*), sum(amount) FROM orders WHERE cust = 3 AND amount > 5")):
        got = psql(shop, "-A", "-t", "-c", sql).stdout.split()
        want = psql(shop, "-A", "-t", "-c", oracle).stdout.split()
        assert sorted(got) == sorted(want) and got, sql
    err = psql(shop, "-v", "VERBOSITY=verbose", "-c", "SELECT * FROM by_cust", check=False).stderr
    assert "42P02" in err and "cust" in err
