"""A randomized differential test through the wire: 4 concurrent writers (commits, rollbacks,
failed statements, write conflicts) and concurrent readers of the views through other drivers;
after each round every served view equals its SELECT over the base tables, and while writers
run, readers never see a commit half applied (transfers keep a view's total at zero)."""

from __future__ import annotations

import asyncio
import random
import threading

import asyncpg
import psycopg
import pytest
import workload


@pytest.fixture(scope="module")
def db(any_served):
    workload.setup(any_served.url(), parameterized=any_served.mode == "duckdb")
    with psycopg.connect(any_served.url(), autocommit=True) as c:
        c.execute("CREATE TABLE ledger (acc INT, amt BIGINT)")
        c.execute("CREATE INCREMENTAL VIEW ledger_total AS SELECT sum(amt) AS total, count(*) AS n FROM ledger")
    return any_served


def _transfers(url: str, seed: int, n: int, errors: list) -> None:
    rng = random.Random(seed)
    try:
        with psycopg.connect(url, autocommit=True) as c:
            for _ in range(n):
                a, b, x = rng.randrange(10), rng.randrange(10), rng.randrange(1, 100)
                c.execute("BEGIN")
                c.execute("INSERT INTO ledger VALUES (%s, %s)", (a, -x))
                if rng.random() < 0.2:
                    c.execute("ROLLBACK")            # half a transfer, never committed
                    continue
                c.execute("INSERT INTO ledger VALUES (%s, %s)", (b, x))
                try:
                    c.execute("COMMIT")
                except psycopg.errors.SerializationFailure:
                    pass
    except Exception as e:  # noqa: BLE001
        errors.append(e)


def _reader(url: str, stop: threading.Event, seen: list, errors: list) -> None:
    async def main():
        c = await asyncpg.connect(url)
        try:
            while not stop.is_set():
                total = await c.fetchval("SELECT total FROM ledger_total")
                seen.append(total)
                await c.fetch("SELECT * FROM acc_totals")
                await c.fetchval("SELECT count(*) FROM big_trans")
        finally:
            await c.close()
    try:
        asyncio.run(main())
    except Exception as e:  # noqa: BLE001
        errors.append(e)


@pytest.mark.parametrize("round_,size", [(0, 25), pytest.param(1, 120, marks=pytest.mark.slow),
                                         pytest.param(2, 120, marks=pytest.mark.slow)])
def test_rounds_of_concurrent_clients(db, round_, size):
    """Each round: 4 random writers (``size`` statements each), 2 transfer writers and 2
    readers at once; the non-slow round is small, the slow rounds larger."""
    url = db.url()
    stop = threading.Event()
    errors: list = []
    seen: list = []
    readers = [threading.Thread(target=_reader, args=(url, stop, seen, errors)) for _ in range(2)]
    for t in readers:
        t.start()
    movers = [threading.Thread(target=_transfers, args=(url, round_ * 10 + k, size * 3 // 5, errors)) for k in range(2)]
    for t in movers:
        t.start()
    workload.run_writers(url, clients=4, statements=size, seed=100 + round_)
    for t in movers:
        t.join()
    stop.set()
    for t in readers:
        t.join(60)
    assert not errors, errors[0]
    assert seen and all(v in (0, None) for v in seen), [v for v in seen if v not in (0, None)][:5]
    want = workload.expected(url)
    with psycopg.connect(url, autocommit=True) as c:
        for name in workload.ORACLE:
            assert workload.norm(c.execute(f"SELECT * FROM {name}").fetchall()) == want[name], name
        if db.mode == "duckdb":
            for acc in (0, 7, 19, 21):
                got = c.execute("SELECT * FROM by_acc WHERE acc = %s", (acc,)).fetchall()
                assert workload.norm(got) == want[f"by_acc/{acc}"]
        total = c.execute("SELECT total, n FROM ledger_total").fetchone()
        assert total == c.execute("SELECT sum(amt), count(*) FROM ledger").fetchone()
