"""Python drivers no one here wrote, against ``ivm serve`` on a DuckDB file: psycopg 3
(server-side binding, prepared statements, binary results, pipeline mode), asyncpg (extended
protocol and binary types only), SQLAlchemy reflection and pandas.read_sql. Each reads the
served views equal to their SELECT over the base tables after random writes of 4 other
clients (commits, rollbacks, failed statements)."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from decimal import Decimal

import asyncpg
import pandas as pd
import psycopg
import pytest
import sqlalchemy as sa
import workload


@pytest.fixture(scope="module")
def db(any_served):
    workload.setup(any_served.url(), parameterized=True)
    return any_served


def accs(db) -> tuple:
    """The parameterized view's inputs to read (both modes: issue 28 item 6)."""
    return (0, 7, 19, 21)


def test_psycopg_server_side_binding_and_pipeline(db):
    workload.run_writers(db.url(), clients=4, statements=30, seed=1)
    want = workload.expected(db.url())
    with psycopg.connect(db.url(), autocommit=True, prepare_threshold=0) as c:
        for name in workload.ORACLE:
            assert workload.norm(c.execute(f"SELECT * FROM {name}").fetchall()) == want[name]
        for acc in accs(db):
            got = c.execute("SELECT * FROM by_acc WHERE acc = %s", (acc,), prepare=True).fetchall()
            assert workload.norm(got) == want[f"by_acc/{acc}"]
            cur = c.cursor(binary=True)
            assert workload.norm(cur.execute("SELECT * FROM by_acc WHERE acc = %s", (acc,)).fetchall()) == \
                want[f"by_acc/{acc}"]
        with c.pipeline():
            curs = [c.execute("SELECT count(*) FROM acc_totals") for _ in range(3)]
            c.execute("INSERT INTO trans VALUES (%s, %s, %s, %s)", (777777, 7, Decimal("61.50"), None))
            after = c.execute("SELECT n FROM acc_totals WHERE acc = %s", (7,))
        counts = [cur.fetchone()[0] for cur in curs]
        assert counts == [len(want["acc_totals"])] * 3
        assert after.fetchone()[0] == int(float([r for r in want["acc_totals"] if r[0] == "7"][0][1])) + 1
        assert c.execute("SELECT count(*) FROM big_trans WHERE id = 777777").fetchone()[0] == 1
        c.execute("DELETE FROM trans WHERE id = 777777")


def test_psycopg_types_round_trip(served):
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("CREATE TABLE typed (i2 SMALLINT, i4 INTEGER, i8 BIGINT, f4 REAL, f8 DOUBLE, n DECIMAL(18,4), "
                  "b BOOLEAN, s VARCHAR, d DATE, ts TIMESTAMP, tz TIMESTAMPTZ, bl BLOB, u UUID, iv INTERVAL)")
        c.execute("CREATE TABLE arrays (arr INTEGER[], words VARCHAR[])")
        row = (3, -70000, 2**40, 1.5, 2.25, Decimal("1234.5678"), True, "héllo", dt.date(2024, 2, 29),
               dt.datetime(2024, 1, 2, 3, 4, 5, 600000), dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
               b"\x00\x01\xff", uuid.UUID("12345678-1234-5678-1234-567812345678"), dt.timedelta(days=2, seconds=7))
        c.execute("INSERT INTO typed VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
        c.execute("INSERT INTO arrays VALUES (%s, %s)", ([1, None, 3], ["a b", 'q"', None]))
        c.execute("CREATE INCREMENTAL VIEW typed_v AS SELECT * FROM typed")
        for binary in (False, True):
            assert c.cursor(binary=binary).execute("SELECT * FROM typed").fetchone() == row
            assert c.cursor(binary=binary).execute("SELECT * FROM typed_v").fetchone() == row
            assert c.cursor(binary=binary).execute("SELECT * FROM arrays").fetchone() == ([1, None, 3], ["a b", 'q"', None])


def test_asyncpg_extended_protocol_binary(db):
    workload.run_writers(db.url(), clients=4, statements=20, seed=2)
    want = workload.expected(db.url())

    async def main():
        c = await asyncpg.connect(db.url())
        try:
            for name in workload.ORACLE:
                assert workload.norm([tuple(r) for r in await c.fetch(f"SELECT * FROM {name}")]) == want[name]
            stmt = await c.prepare("SELECT * FROM by_acc WHERE acc = $1")    # both modes
            assert [p.name for p in stmt.get_parameters()] == ["int4"]
            for acc in accs(db):
                assert workload.norm([tuple(r) for r in await stmt.fetch(acc)]) == want[f"by_acc/{acc}"]
            stmt = await c.prepare("SELECT * FROM acc_totals WHERE acc = $1")
            assert [p.name for p in stmt.get_parameters()] == ["int4"]
            assert len(await stmt.fetch(7)) == 1
            assert await c.fetchval("SELECT count(*) FROM acc_totals") == len(want["acc_totals"])
            async with c.transaction():
                await c.execute("INSERT INTO trans VALUES ($1, $2, $3, $4)", 99, 19, Decimal("7.00"), "async")
                inside = await c.fetchval("SELECT n FROM acc_totals WHERE acc = $1", 19)
                assert inside == int(float([r for r in want["acc_totals"] if r[0] == "19"][0][1])) + 1
            async with c.transaction():
                async for rec in c.cursor("SELECT * FROM big_trans", prefetch=50):
                    assert rec["amt"] > 60
            await c.execute("DELETE FROM trans WHERE id = 99")
        finally:
            await c.close()
    asyncio.run(main())


def test_sqlalchemy_reflection_and_pandas(db):
    workload.run_writers(db.url(), clients=4, statements=20, seed=3)
    want = workload.expected(db.url())
    engine = sa.create_engine(db.url().replace("postgresql://", "postgresql+psycopg://"))
    try:
        insp = sa.inspect(engine)
        assert {"accounts", "trans"} <= set(insp.get_table_names())
        assert {"acc_totals", "big_trans"} <= set(insp.get_view_names())
        cols = {c["name"]: c["type"] for c in insp.get_columns("acc_totals")}
        assert list(cols) == ["acc", "n", "total", "notes"] and isinstance(cols["n"], sa.BigInteger)
        assert insp.has_table("trans")
        meta = sa.MetaData()
        trans = sa.Table("trans", meta, autoload_with=engine)
        assert [c.name for c in trans.columns] == ["id", "acc", "amt", "note"]
        for name in workload.ORACLE:
            df = pd.read_sql(f"SELECT * FROM {name}", engine)
            assert workload.norm(df.astype(object).where(df.notna(), None).itertuples(index=False)) == want[name]
        df = pd.read_sql(sa.text("SELECT * FROM by_acc WHERE acc = :acc"), engine, params={"acc": 7})
        assert len(df) == len(want["by_acc/7"])
        with engine.begin() as conn:
            conn.execute(sa.insert(trans).values(id=123, acc=3, amt=Decimal("99.00"), note="sa"))
        with engine.connect() as conn:
            n = conn.execute(sa.text("SELECT n FROM acc_totals WHERE acc = 3")).scalar()
        assert n == int(float([r for r in want["acc_totals"] if r[0] == "3"][0][1])) + 1
    finally:
        engine.dispose()


def test_errors_carry_sqlstate_and_position_and_a_failed_block_answers_25p02(db):
    """ErrorResponse: SQLSTATE and the error's position; the connection stays usable; inside
    a failed block every statement gets 25P02 until ROLLBACK (ReadyForQuery status E), as in
    PostgreSQL; a served view's reads are unchanged by the rolled-back block."""
    with psycopg.connect(db.url()) as c:        # not autocommit: psycopg opens a block
        before = c.execute("SELECT count(*) FROM big_trans").fetchone()[0]
        c.execute("INSERT INTO trans VALUES (888888, 1, 99, 'rolled back')")
        with pytest.raises(psycopg.errors.UndefinedTable) as e:
            c.execute("SELECT * FROM no_such_table_here")
        assert e.value.diag.sqlstate == "42P01"
        assert e.value.diag.statement_position == "15"
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        for _ in range(2):
            with pytest.raises(psycopg.errors.InFailedSqlTransaction):
                c.execute("SELECT count(*) FROM big_trans")
        c.rollback()
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with pytest.raises(psycopg.errors.SyntaxError) as e:
            c.execute("SELECT 1 FROM trans WHERE")
        assert e.value.diag.sqlstate == "42601" and e.value.diag.statement_position
        c.rollback()
        assert c.execute("SELECT count(*) FROM big_trans").fetchone()[0] == before
        assert c.execute("SELECT count(*) FROM trans WHERE id = 888888").fetchone()[0] == 0
        c.rollback()
