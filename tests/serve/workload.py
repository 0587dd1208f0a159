"""A shared randomized workload for the client tests: tables with NULLs and duplicate rows,
three incremental views (an aggregate, a join, a parameterized one), writers that commit, roll
back and fail statements, and the oracle — each view's SELECT run over the base tables."""

from __future__ import annotations

import random
import re
import threading

import psycopg

TABLES = [
    "CREATE TABLE accounts (acc INT, owner VARCHAR, tier INT)",
    "CREATE TABLE trans (id BIGINT, acc INT, amt DECIMAL(12,2), note VARCHAR)",
]
SEED = [
    "INSERT INTO accounts SELECT i, 'owner ' || i, i % 3 FROM generate_series(0, 19) t(i)",
    "INSERT INTO trans SELECT i, i % 20, (i % 97) * 1.25, CASE WHEN i % 7 = 0 THEN NULL ELSE 'n' || (i % 5) END "
    "FROM generate_series(0, 1999) t(i)",
]
VIEWS = {
    "acc_totals": "SELECT acc, count(*) AS n, sum(amt) AS total, count(note) AS notes FROM trans GROUP BY acc",
    "big_trans": "SELECT t.id, t.acc, t.amt, a.owner FROM trans t JOIN accounts a ON t.acc = a.acc "
                 "WHERE t.amt > 60",
    "by_acc": "SELECT id, amt, note FROM trans WHERE acc = $acc",
}
ORACLE = {
    "acc_totals": VIEWS["acc_totals"],
    "big_trans": VIEWS["big_trans"],
}
PARAM_ORACLE = "SELECT id, amt, note FROM trans WHERE acc = {acc}"


def setup(url: str, parameterized: bool = True) -> None:
    """Tables, seed rows and the views (``parameterized``: with ``by_acc``; PostgreSQL
    sessions have no parameterized views)."""
    with psycopg.connect(url, autocommit=True) as c:
        for s in TABLES + SEED:
            c.execute(s)
        for name, sql in VIEWS.items():
            if parameterized or name != "by_acc":
                c.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")


def _op(rng: random.Random, ids: list[int]) -> str:
    k = rng.random()
    if k < 0.45:
        i = rng.randrange(10**6, 10**9)
        ids.append(i)
        amt = "NULL" if rng.random() < 0.05 else f"{rng.randrange(0, 20000) / 100:.2f}"
        note = "NULL" if rng.random() < 0.2 else f"'w{rng.randrange(3)}'"
        n = rng.choice([1, 1, 1, 2])       # duplicate rows too
        return f"INSERT INTO trans VALUES " + ", ".join([f"({i}, {rng.randrange(22)}, {amt}, {note})"] * n)
    if k < 0.7:
        return f"UPDATE trans SET amt = amt + {rng.randrange(-50, 50)} WHERE acc = {rng.randrange(20)} AND id % 13 = {rng.randrange(13)}"
    if k < 0.9:
        target = rng.choice(ids) if ids and rng.random() < 0.6 else rng.randrange(2000)
        return f"DELETE FROM trans WHERE id = {target}"
    return f"UPDATE accounts SET owner = 'o{rng.randrange(100)}' WHERE acc = {rng.randrange(20)}"


def writer(url: str, seed: int, statements: int, errors: list) -> None:
    """Random autocommit writes and transaction blocks; some blocks roll back, some contain a
    failing statement (then ROLLBACK); a few statements fail on their own."""
    rng = random.Random(seed)
    ids: list[int] = []
    try:
        with psycopg.connect(url, autocommit=True) as c:
            done = 0
            while done < statements:
                r = rng.random()
                if r < 0.5:
                    try:
                        c.execute(_op(rng, ids))
                    except psycopg.errors.SerializationFailure:
                        pass          # a write conflict with another client's open block: 40001
                    done += 1
                elif r < 0.85:
                    c.execute("BEGIN")
                    try:
                        for _ in range(rng.randrange(1, 5)):
                            c.execute(_op(rng, ids))
                            done += 1
                    except psycopg.errors.SerializationFailure:
                        c.execute("ROLLBACK")
                        continue
                    if rng.random() < 0.3:
                        try:
                            c.execute("INSERT INTO trans VALUES (1, 'not a number', 1, 'x')")
                        except psycopg.Error:
                            pass
                        try:
                            c.execute("SELECT 1")
                            raise AssertionError("a failed block accepted a statement")
                        except psycopg.errors.InFailedSqlTransaction:
                            pass
                        c.execute("ROLLBACK")
                    elif rng.random() < 0.25:
                        c.execute("ROLLBACK")
                    else:
                        try:
                            c.execute("COMMIT")
                        except psycopg.errors.SerializationFailure:
                            pass
                else:
                    try:
                        c.execute("SELECT no_such_column FROM trans")
                    except psycopg.errors.UndefinedColumn:
                        pass
                    done += 1
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def run_writers(url: str, clients: int = 4, statements: int = 40, seed: int = 0) -> None:
    errors: list = []
    threads = [threading.Thread(target=writer, args=(url, seed * 100 + k, statements, errors)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _one(v):
    from decimal import Decimal

    if v is None:
        return None
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (Decimal, float, int)):
        return str(Decimal(str(v)).normalize())
    if isinstance(v, str) and re.fullmatch(r"-?\d+(\.\d+)?", v):   # node-postgres: int8/numeric as text
        return str(Decimal(v).normalize())
    return str(v)


def norm(rows) -> list:
    """Rows as comparable tuples: numbers by value (Decimal('12.50') == 12.5), order ignored."""
    out = [tuple(_one(v) for v in r) for r in rows]
    return sorted(out, key=lambda r: tuple((x is None, x or "") for x in r))


def expected(url: str) -> dict:
    """The oracle through a plain psycopg connection (through the server: DuckDB or the
    PostgreSQL behind it recomputes each SELECT)."""
    with psycopg.connect(url, autocommit=True) as c:
        out = {name: norm(c.execute(sql).fetchall()) for name, sql in ORACLE.items()}
        for acc in (0, 7, 19, 21):
            out[f"by_acc/{acc}"] = norm(c.execute(PARAM_ORACLE.format(acc=acc)).fetchall())
    return out


def settle(server) -> None:
    """Proxy mode: writes reach the views through replication; a client's own reads wait for
    its writes, but the writers here are other clients — wait until every committed write is
    applied (one write and read on a fresh connection: read-your-writes syncs the stream)."""
    if getattr(server, "mode", "duckdb") != "postgres":
        return
    with psycopg.connect(server.url(), autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS settle_marker (x INT)")
        c.execute("INSERT INTO settle_marker VALUES (1)")
        c.execute("SELECT count(*) FROM acc_totals").fetchone()
