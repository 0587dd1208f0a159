"""The daemon's PostgreSQL sink encodings: row digests computed a column at a time equal the
one-row definition whatever path a column takes, and binary COPY blocks read back as the rows
that were encoded (real PostgreSQL)."""

from __future__ import annotations

import datetime
import decimal
import random
from collections import Counter

import numpy as np
import psycopg
import pytest

from ivm_layer.daemon.rowdigest import digest_bytes, digests, infer, row_digest
from ivm_layer.daemon.sinkrows import DIGEST_COMMENT, SMALL_CHANGE, row_key
from ivm_layer.daemon.sinks import PostgresSink
from ivm_layer.io.postgres import bincopy as pgcopy

VALUES = [None, 0, 1, -1, 2**63 - 1, -2**63, 2**63, -2**70, True, False, 0.0, -0.0, 1.0, 1.5,
          float("inf"), "", "a", "é€", "1", b"x", bytearray(b"x"), decimal.Decimal("1.0"),
          decimal.Decimal("1.00"), datetime.date(2026, 1, 2), (1, 2)]


def _column(rnd: random.Random, kind: str, n: int) -> list:
    if kind == "int":
        return [rnd.choice([None, rnd.randint(-2**63, 2**63 - 1), rnd.randint(-5, 5)]) for _ in range(n)]
    if kind == "str":
        return [rnd.choice([None, "", "a", "é€", str(rnd.randint(0, 9))]) for _ in range(n)]
    if kind == "bool":
        return [rnd.choice([None, True, False]) for _ in range(n)]
    if kind == "float":
        return [rnd.choice([None, 0.0, -0.0, 1.0, rnd.random()]) for _ in range(n)]
    return [rnd.choice(VALUES) for _ in range(n)]     # mixed: the value-by-value path


@pytest.mark.parametrize("seed", range(12))
def test_column_digests_equal_row_digests(seed):
    rnd = random.Random(seed)
    kinds = [rnd.choice(["int", "str", "bool", "float", "mixed"]) for _ in range(rnd.randint(1, 5))]
    n = rnd.randint(1, 300)
    columns = [_column(rnd, k, n) for k in kinds]
    h1, h2 = digests(columns, n)
    got = [bytes(b) for b in digest_bytes(h1, h2)]
    rows = list(zip(*columns))
    assert got == [row_digest(r) for r in rows]
    # equal rows share a digest, different rows (by repr) do not
    by_key: dict[bytes, str] = {}
    for k, r in zip(got, rows):
        assert by_key.setdefault(k, repr(r)) == repr(r)


def test_a_value_has_one_digest_whatever_its_column():
    """The same value in an all-int column (numpy), a string column (dictionary) and a mixed
    column (value by value) gets the same words: a row's key does not depend on its batch."""
    for v, other in [(7, "x"), (-2**63, 1.5), ("s", 3), (True, "t"), (None, 2)]:
        alone = digests([[v, v]], 2)
        mixed = digests([[v, other]], 2)
        assert alone[0][0] == mixed[0][0] and alone[1][0] == mixed[1][0]
        assert bytes(digest_bytes(*alone)[0]) == row_digest((v,))


def test_digests_separate_look_alike_values():
    keys = {row_digest((v,)) for v in [1, True, 1.0, "1", b"1", decimal.Decimal(1), None, "None"]}
    assert len(keys) == 8
    assert row_digest((1, 2)) != row_digest((2, 1)) and row_digest((1, None)) != row_digest((None, 1))


TYPES = ["smallint", "integer", "bigint", "real", "double precision", "boolean", "text",
         "character varying(12)", "character(3)"]


def _typed(rnd: random.Random, t: str):
    if rnd.random() < 0.15:
        return None
    if t == "smallint":
        return rnd.randint(-2**15, 2**15 - 1)
    if t == "integer":
        return rnd.randint(-2**31, 2**31 - 1)
    if t == "bigint":
        return rnd.randint(-2**63, 2**63 - 1)
    if t == "real":
        return float(np.float32(rnd.uniform(-1e6, 1e6)))
    if t == "double precision":
        return rnd.choice([rnd.uniform(-1e300, 1e300), -0.0, float("inf"), 5e-324])
    if t == "boolean":
        return rnd.random() < 0.5
    if t == "character(3)":
        return rnd.choice(["abc", "é€x", "x  "])
    return rnd.choice(["", "a", "tab\there", "quote'\"\\", "é€😀", "x" * rnd.randint(0, 12)])


def test_binary_copy_reads_back_exactly(pg_url):
    rnd = random.Random(5)
    n = 3000
    columns = [[_typed(rnd, t) for _ in range(n)] for t in TYPES]
    arrays = [infer(c) for c in columns]
    fields = pgcopy.fields(arrays, TYPES)
    assert fields is not None
    keys = digest_bytes(*digests(columns, n, arrays))
    block = [pgcopy.uuid_field(keys), pgcopy.bigint_field(np.arange(n)), *fields]
    cols = [f"c{i}" for i in range(len(TYPES))]
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE enc (k uuid, i bigint, "
                  + ", ".join(f"{x} {t}" for x, t in zip(cols, TYPES)) + ")")
        with c.cursor().copy(f"COPY enc (k, i, {', '.join(cols)}) FROM STDIN (FORMAT binary)") as cp:
            cp.write(pgcopy.HEADER)
            for lo in range(0, n, 1000):   # blocks, some rows taken out of order
                sel = np.arange(lo, min(n, lo + 1000))[::-1]
                cp.write(pgcopy.encode([f.take(sel) for f in block], len(sel)))
            cp.write(pgcopy.TRAILER)
        got = c.execute(f"SELECT k, i, {', '.join(cols)} FROM enc ORDER BY i").fetchall()
    assert [r[1] for r in got] == list(range(n))
    assert [r[0].bytes for r in got] == [bytes(k) for k in keys]
    real = TYPES.index("real")   # float4 reads back as its shortest text: compare as float32

    def same(r):
        return tuple(np.float32(v) if v is not None and i == real else v for i, v in enumerate(r))
    assert [same(r[2:]) for r in got] == [same(r) for r in zip(*columns)]


def test_values_without_an_exact_binary_form_are_refused():
    assert pgcopy.fields([infer([1, 2.5])], ["integer"]) is None        # a float in an int column
    assert pgcopy.fields([infer([2**31])], ["integer"]) is None         # out of range
    assert pgcopy.fields([infer(["a"])], ["integer"]) is None
    assert pgcopy.fields([infer([1])], ["numeric"]) is None             # not encoded here
    assert pgcopy.fields([infer([datetime.date(2026, 1, 1)])], ["date"]) is None
    assert pgcopy.fields([infer([1, None])], ["double precision"]) is not None


def _rows(url: str, table: str, cols: str) -> Counter:
    with psycopg.connect(url) as c:
        return Counter({r[:-1]: r[-1] for r in c.execute(f"SELECT {cols}, ivm_count FROM {table}")})


def test_sink_keys_agree_across_paths_and_releases(pg_url):
    """Rows written in a large binary block are found by a later small change (written row by
    row) and by a text-format block (a numeric column); a table keyed by an older release keeps
    its keys; a fresh checkpoint moves an emptied table to the new digests."""
    big = [((i, f"s{i % 7}"), 1) for i in range(SMALL_CHANGE * 5)]
    s = PostgresSink(pg_url, "enc1")
    s.prepare({"v": (["x", "y"], ["integer", "text"])}, fresh=True)
    assert not s.legacy["v"]
    assert s.write(0, {"v": big})
    assert s.write(1, {"v": [((i, f"s{i % 7}"), -1) for i in range(40)]})
    more = {"v": [((i, f"s{i % 7}"), 2) for i in range(40, SMALL_CHANGE * 5)]}
    assert s.write(2, more, s.prepare_batch(more))   # encoded ahead, as the daemon does: refused
    assert s.upsert_only["v"] > 0                    # (the rows exist), so the batch was upserted
    assert _rows(pg_url, "v", "x, y") == Counter({(i, f"s{i % 7}"): 3 for i in range(40, SMALL_CHANGE * 5)})
    with psycopg.connect(pg_url) as c:
        keys = {r[0].bytes for r in c.execute("SELECT ivm_key FROM v")}
    assert keys == {row_digest((i, f"s{i % 7}")) for i in range(40, SMALL_CHANGE * 5)}
    s.close()
    # a column without a binary encoding: the text rows carry the same digests
    s = PostgresSink(pg_url, "enc2")
    s.prepare({"w": (["x", "d"], ["integer", "numeric"])}, fresh=True)
    rows = [((i, decimal.Decimal(i) / 4), 1) for i in range(SMALL_CHANGE * 3)]
    assert s.write(0, {"w": rows}) and s.write(1, {"w": [(r, -1) for r, _ in rows[: SMALL_CHANGE * 2]]})
    assert _rows(pg_url, "w", "x, d") == Counter({r: 1 for r, _ in rows[SMALL_CHANGE * 2:]})
    s.close()
    # an older release's table (text keys from row_key, no comment) keeps row_key
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE old (x integer, ivm_count bigint NOT NULL, ivm_key text PRIMARY KEY)")
        c.cursor().executemany("INSERT INTO old VALUES (%s, 1, %s)", [(i, row_key((i,))) for i in range(200)])
    s = PostgresSink(pg_url, "enc3")
    s.prepare({"old": (["x"], ["integer"])}, fresh=False)
    assert s.legacy["old"]
    assert s.write(0, {"old": [((i,), -1) for i in range(100)]})
    assert _rows(pg_url, "old", "x") == Counter({(i,): 1 for i in range(100, 200)})
    s.close()
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("ALTER TABLE old ALTER COLUMN ivm_key TYPE uuid USING md5(ivm_key)::uuid")
    s = PostgresSink(pg_url, "enc3")
    s.prepare({"old": (["x"], ["integer"])}, fresh=False)
    assert s.legacy["old"]          # rows in it: their keys stay
    s.close()
    s = PostgresSink(pg_url, "enc3")
    s.prepare({"old": (["x"], ["integer"])}, fresh=True)
    assert not s.legacy["old"]      # emptied by a new checkpoint: the new digests
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT col_description('old'::regclass, 3)").fetchone()[0] == DIGEST_COMMENT
    s.close()


def test_restart_writes_the_logged_batches_a_sink_lacks(pg_url, tmp_path):
    """Batches are in the engine's log before their sinks are written (on a background
    thread). A daemon that stopped in between: the next start applies the logged batches the
    sinks lack one at a time and writes them; a sink that holds a batch skips it."""
    from ivm_layer.daemon.config import DaemonConfig
    from ivm_layer.daemon.runner import DriverEngine
    from ivm_layer.daemon.sinks import DuckDBSink
    from ivm_layer.daemon.state import ViewDef

    d = ViewDef("j", "SELECT r.a, s.x FROM r JOIN s ON r.k = s.k", True, ["r", "s"])
    schema = {"r": [("a", "integer", 0), ("k", "integer", 0)], "s": [("k", "integer", 0), ("x", "text", 0)]}
    cfg = DaemonConfig(source=pg_url, views="-", checkpoint=str(tmp_path / "ck"))
    duck = str(tmp_path / "out.duckdb")

    def sinks():
        return [PostgresSink(pg_url, "catchup"), DuckDBSink(duck, "catchup")]

    batches = [{"r": {(i, i % 5): 1 for i in range(300)}, "s": {(k, f"x{k}"): 1 for k in range(5)}},
               {"r": {(i, i % 5): -1 for i in range(0, 300, 3)}},
               {"s": {(2, "x2"): -1, (9, "x9"): 1}, "r": {(1000, 9): 2}}]
    first = sinks()
    e = DriverEngine(cfg, [d], schema, first)
    e.writer.write(0, e.state.apply(batches[0]))      # batch 0: written to both sinks
    e.store.append(0, batches[0])
    for bid in (1, 2):                                 # logged, then stopped before the sinks
        e.state.apply(batches[bid])
        e.store.append(bid, batches[bid])
    first[1].write(1, {"j": []})   # the DuckDB sink holds batch 1 (empty)
    want = Counter(dict(e.state.views["j"].rows()))
    for s in first:
        s.close()
    again = sinks()
    e2 = DriverEngine(cfg, [d], schema, again)
    assert e2.last == 2 and Counter(dict(e2.state.views["j"].rows())) == want
    assert _rows(pg_url, "j", "a, x") == want
    with duckdb_connect(duck) as c:
        got = Counter({(a, x): n for a, x, n in c.execute("SELECT a, x, ivm_count FROM j").fetchall()})
    # batch 1 was skipped by the DuckDB sink (it said it held it): its deletes are missing there
    assert got == want + Counter({(i, f"x{i % 5}"): 1 for i in range(0, 300, 3)})
    for s in again:
        s.close()


def duckdb_connect(path):
    import duckdb

    return duckdb.connect(path)


def test_sink_writer_keeps_order_and_hands_failures_on():
    """One batch in flight at a time, in order: a batch starts after the one before it is
    written; a failed write is reported to ``failed`` on the thread and raised by the next
    wait (the next batch, or the daemon's stop), and the writer goes on after it."""
    import time

    from ivm_layer.daemon.sinks import Sink, SinkError
    from ivm_layer.daemon.sinkwriter import SinkWriter

    events = []

    class Slow(Sink):
        def write(self, batch_id, changes, prepared=None):
            events.append(("start", batch_id, prepared))
            time.sleep(0.05)
            if changes.get("fail"):
                raise SinkError(f"batch {batch_id} refused")
            events.append(("end", batch_id))
            return True

    w = SinkWriter([Slow()])
    done, failed = [], []
    w.submit(0, {}, done.append, failed.append, prepared=["p0"])
    w.submit(1, {}, done.append, failed.append)        # waits for batch 0 first
    assert events[:2] == [("start", 0, "p0"), ("end", 0)]
    w.submit(2, {"fail": [((1,), 1)]}, done.append, failed.append)
    with pytest.raises(SinkError, match="batch 2 refused"):
        w.wait()
    assert events == [("start", 0, "p0"), ("end", 0), ("start", 1, None), ("end", 1), ("start", 2, None)]
    assert len(done) == 2 and len(failed) == 1 and "batch 2" in str(failed[0])
    assert w.wait() < 0.5                                # the failure was handed on once
    assert w.write(3, {}) >= 0.05 and events[-1] == ("end", 3)
