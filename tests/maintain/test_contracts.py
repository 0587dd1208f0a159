"""The Source and Sink contracts (maintain/contracts.py) held against their implementations:
the daemon's sinks write each batch id once and say what they hold; the replication feed
hands out committed transactions in order and confirms only what its consumer committed."""

from __future__ import annotations

import io
import time

import psycopg
import pytest

from ivm_layer.daemon.sinks import ConsoleSink, DuckDBSink, ParquetSink, PostgresSink
from ivm_layer.io.postgres import replication as pgc
from ivm_layer.io.postgres.feed import ChangeFeed
from ivm_layer.io.postgres.pgoutput import parse_lsn
from ivm_layer.maintain.contracts import FaultTolerance, Sink, Source

LAYOUTS = {"v": (["x", "y"], ["integer", "text"])}
BATCH = {"v": [((1, "a"), 2), ((2, None), 1)]}


def test_every_daemon_sink_is_a_sink_and_says_its_fault_tolerance(tmp_path):
    sinks = [DuckDBSink(str(tmp_path / "s.duckdb"), "d"), ParquetSink(str(tmp_path / "pq")), ConsoleSink(io.StringIO()),
             PostgresSink("postgresql://nobody@127.0.0.1:1/none", "d")]
    assert all(isinstance(s, Sink) for s in sinks)
    assert [s.fault_tolerance for s in sinks] == [FaultTolerance.EXACTLY_ONCE] * 2 + [FaultTolerance.NONE,
                                                                                       FaultTolerance.EXACTLY_ONCE]


@pytest.mark.parametrize("kind", ["duckdb", "parquet"])
def test_an_exactly_once_sink_writes_a_batch_id_once(tmp_path, kind):
    sink = DuckDBSink(str(tmp_path / "s.duckdb"), "d") if kind == "duckdb" else ParquetSink(str(tmp_path / "pq"))
    sink.prepare(LAYOUTS, fresh=True)
    assert sink.committed() == -1
    assert sink.write(0, BATCH) is True
    assert sink.write(0, BATCH) is False               # a replay: discarded
    assert sink.committed() >= -1 and sink.write(1, {"v": [((1, "a"), -1)]}) is True
    assert sink.write(1, {"v": [((1, "a"), -1)]}) is False
    if kind == "duckdb":
        assert sink.committed() == 1
        import duckdb

        sink.close()
        rows = duckdb.connect(str(tmp_path / "s.duckdb")).execute("SELECT x, y, ivm_count FROM v ORDER BY x").fetchall()
        assert rows == [(1, "a", 1), (2, None, 1)]
    sink.close()


def test_the_replication_feed_is_an_exactly_once_source(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE src (a int); ALTER TABLE src REPLICA IDENTITY FULL; CREATE PUBLICATION src_pub FOR TABLE src")
        start = parse_lsn(c.execute("SELECT lsn::text FROM pg_create_logical_replication_slot('src_slot', 'pgoutput')")
                          .fetchone()[0])
        for i in range(3):
            c.execute("INSERT INTO src VALUES (%s)", [i])

    def open_stream(lsn: int) -> pgc.ReplicationStream:
        rs = pgc.ReplicationStream(pg_url)
        rs.start("src_slot", "src_pub", lsn)
        return rs

    feed = ChangeFeed(open_stream, "src_slot", start, release_when_full=True)
    try:
        assert isinstance(feed, Source) and feed.fault_tolerance is FaultTolerance.EXACTLY_ONCE
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += feed.drain(10, 0.5)
        assert [t.changes["src"] for t in got] == [[((i,), 1)] for i in range(3)]
        assert [t.end_lsn for t in got] == sorted(t.end_lsn for t in got) and feed.position >= got[-1].end_lsn
        feed.commit(got[1].end_lsn)                   # the consumer made two durable
    finally:
        feed.close()
    with psycopg.connect(pg_url, autocommit=True) as c:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            confirmed = parse_lsn(c.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                            "WHERE slot_name = 'src_slot'").fetchone()[0])
            if confirmed >= got[1].end_lsn:
                break
            time.sleep(0.2)
        assert got[1].end_lsn <= confirmed < got[2].end_lsn     # confirmed what was committed, no further
    again = ChangeFeed(open_stream, "src_slot", got[1].end_lsn)   # a crash: a new source at the commit
    try:
        replay = []
        deadline = time.monotonic() + 30
        while not replay and time.monotonic() < deadline:
            replay += again.drain(10, 0.5)
        assert [t.changes["src"] for t in replay] == [[((2,), 1)]]   # only what was not committed
    finally:
        again.close()
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("SELECT pg_drop_replication_slot('src_slot')")
