"""The daemon's pieces without Spark: shard routing against one engine, the checkpoint store,
batch consolidation (TRUNCATE), sinks' per-batch idempotency, configuration."""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import duckdb
import psycopg
import pytest

from ivm_layer.bench.daemon_workload import valid_changes
from ivm_layer.daemon.cli import build_parser, config_from_args
from ivm_layer.daemon.config import ConfigError, parse_trigger
from ivm_layer.daemon.routing import (
    ViewRouter,
    rewrite_per_atom,
    stable_hash,
)
from ivm_layer.daemon.sinks import DuckDBSink, ParquetSink, PostgresSink
from ivm_layer.daemon.state import (
    EngineState,
    ViewDef,
    batch_changes,
    open_checkpoint,
    parse_views,
)
from ivm_layer.errors import IVMError

SCHEMA = {"r": {"a": "integer", "k": "integer"}, "s": {"k": "integer", "x": "integer"},
          "t": {"y": "integer", "tag": "text"}}
VIEWS = {
    "ineq3": "SELECT r.a, r.k, s.x, t.y, t.tag FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y",
    "common": "SELECT r.a, s.x, r2.a AS a2 FROM r JOIN s ON r.k = s.k JOIN r AS r2 ON r2.k = s.k",
    "selfineq": "SELECT r1.a, r2.a AS b FROM r AS r1, r AS r2 WHERE r1.a < r2.a AND r1.k = 3",
}


def _recover(directory: str, defs: list, state) -> int:
    """Open the engine checkpoint in ``directory`` and load it into ``state``: the last batch id."""
    return state.recover(open_checkpoint(directory, defs))[0]


def _row(rnd: random.Random, table: str) -> tuple:
    if table == "r":
        return (rnd.randint(0, 6), rnd.choice([None, 0, 1, 2, 3]))
    if table == "s":
        return (rnd.choice([None, 0, 1, 2, 3]), rnd.randint(0, 8))
    return (rnd.randint(0, 8), rnd.choice(["a", "b", None]))


def _stream(seed: int, steps: int = 12):
    """Batches of inserts/deletes (with duplicates and NULLs), always valid."""
    yield from valid_changes(random.Random(seed), steps, "rst", _row, 12)


def _rows(st: EngineState, name: str) -> Counter:
    return Counter({r: k for r, k in st.views[name].rows()})


@pytest.mark.parametrize("name", sorted(VIEWS))
@pytest.mark.parametrize("shards", [2, 3, 4])
def test_shard_union_equals_single_engine(name, shards):
    d = ViewDef(name, VIEWS[name], True, ["r", "s", "t"])
    single = EngineState([d], SCHEMA)
    router = ViewRouter(d, SCHEMA, shards)
    # with tables of one row each: the variables shared by all atoms are hashed; the
    # inequality join hashes r and s on k and replicates t; the self-inequality splits a row
    assert router.mode == ("grid" if name == "selfineq" else "hash")
    engines = [EngineState([router.defn], router.atom_schema) for _ in range(shards)]
    for seed in range(3):
        for items in _stream(seed * 31 + shards):
            single_items = [(t, r, k) for t, r, k in items if t in single.base]
            per_shard: list[list] = [[] for _ in range(shards)]
            for i, (t, r, k) in enumerate(items):
                for s, atab in router.route(t, r):
                    per_shard[s].append((0, i, atab, k, r))
            single.apply(batch_changes([(0, i, t, k, r) for i, (t, r, k) in enumerate(single_items)], single.base))
            for s in range(shards):
                engines[s].apply(batch_changes(per_shard[s], engines[s].base))
            union = Counter()
            for e in engines:
                union.update(_rows(e, name))
            assert union == _rows(single, name)
        single = EngineState([d], SCHEMA)
        engines = [EngineState([router.defn], router.atom_schema) for _ in range(shards)]


def test_routing_helpers():
    assert stable_hash([1]) == stable_hash([1.0]) == stable_hash([__import__("decimal").Decimal("1.00")])
    assert stable_hash(["1"]) != stable_hash([1])
    sql, tables = rewrite_per_atom("SELECT r.a, x.a FROM r, r AS x WHERE r.a < x.a")
    assert tables == ["r", "r"] and "ivm_a0_r AS r" in sql and "ivm_a1_r AS x" in sql
    with pytest.raises(IVMError, match="DISTINCT"):
        ViewRouter(ViewDef("d", "SELECT DISTINCT r.a FROM r, s WHERE r.k = s.k", True), SCHEMA, 2)


def test_batch_changes_truncate_in_stream_order():
    base = {"t": {(1, "a"): 2, (2, "b"): 1}}
    rows = [(10, 0, "t", 1, (3, "c")), (11, 0, "t", 0, None), (11, 1, "t", 1, (1, "a")),
            (12, 0, "s", 1, (None, 1)), (12, 1, "s", -1, (None, 1))]
    assert batch_changes(rows, base) == {"t": {(1, "a"): -1, (2, "b"): -1}}


def test_checkpoint_store_recovers_and_compacts(tmp_path):
    d = ViewDef("ineq3", VIEWS["ineq3"], True, ["r", "s", "t"])
    st = EngineState([d], SCHEMA)
    store = open_checkpoint(str(tmp_path), [d])
    assert store.position == -1
    for b, items in enumerate(_stream(5, 9)):
        ch = batch_changes([(0, i, t, k, r) for i, (t, r, k) in enumerate(items)], st.base)
        st.apply(ch)
        store.append(b, ch)
        if b == 4:
            store.write_snapshot({"batch": b}, st.base, b)
    assert store.position == 8 and store.log_entries == 4
    again = EngineState([d], SCHEMA)
    assert _recover(str(tmp_path), [d], again) == 8
    assert _rows(again, "ineq3") == _rows(st, "ineq3") and again.base == st.base
    import os

    os.chmod(tmp_path, 0o777)  # a directory others could write: its files could be planted
    with pytest.raises(IVMError, match="written by other users"):
        _recover(str(tmp_path), [d], EngineState([d], SCHEMA))
    os.chmod(tmp_path, 0o700)
    other = ViewDef("ineq3", VIEWS["common"], True, ["r", "s"])
    with pytest.raises(IVMError, match="other view definitions"):
        open_checkpoint(str(tmp_path), [other])


def test_engine_state_refuses_inconsistent_delete():
    st = EngineState([ViewDef("ineq3", VIEWS["ineq3"], True)], SCHEMA)
    st.apply({"r": {(1, 1): 1}})
    with pytest.raises(IVMError, match="does not hold"):
        st.apply({"r": {(1, 1): -1}, "s": {(9, 9): -1}})
    assert st.base["r"] == {(1, 1): 1} and len(st.views["ineq3"]) == 0


CHANGES_1 = {"v": [((1, "a"), 2), ((2, None), 1)]}
CHANGES_2 = {"v": [((1, "a"), -2), ((3, "c"), 1)]}
LAYOUT = {"v": (["x", "y"], ["integer", "text"])}


def _sink_rows_pg(url):
    with psycopg.connect(url) as c:
        return Counter({(x, y): n for x, y, n in c.execute("SELECT x, y, ivm_count FROM v").fetchall()})


def test_postgres_sink_is_idempotent_per_batch(pg_url):
    s = PostgresSink(pg_url, "d1")
    s.prepare(LAYOUT, fresh=True)
    assert s.write(0, CHANGES_1) and s.write(1, CHANGES_2)
    assert not s.write(1, CHANGES_2) and not s.write(0, CHANGES_1)  # replays
    assert _sink_rows_pg(pg_url) == Counter({(2, None): 1, (3, "c"): 1})
    s.close()
    s = PostgresSink(pg_url, "d1")
    s.prepare(LAYOUT, fresh=True)  # a new checkpoint starts over
    assert _sink_rows_pg(pg_url) == Counter()
    assert s.write(0, CHANGES_1)
    s.close()


def test_postgres_sink_merge_is_keyed_and_checked(pg_url):
    """A batch is merged by primary-key probes: the sink table is never scanned (fresh, never
    analyzed statistics included), rows whose count reaches zero go away, and a table changed
    by someone else (a count going negative) fails the batch, leaving the table as it was."""
    layout = {"v": (["x", "y"], ["integer", "text"])}
    s = PostgresSink(pg_url, "d2")
    s.prepare(layout, fresh=True)
    s.write(0, {"v": [((i, "r"), 1) for i in range(20_000)]})

    def seq_scans():
        with psycopg.connect(pg_url) as c:
            c.execute("SELECT pg_stat_force_next_flush()")
            return c.execute("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'v'").fetchone()[0]

    before = seq_scans()
    assert s.write(1, {"v": [((i, "r"), -1) for i in range(0, 20_000, 9)] + [((-1, None), 2)]})
    # rows the batch adds that the table already holds: the COPY of new rows is refused and
    # the whole batch is upserted (the savepoint undid the partial COPY)
    assert s.write(2, {"v": [((-2, "n"), 1), ((-1, None), 1), ((10, "r"), 3)]})
    assert s.upsert_only["v"] > 0
    assert seq_scans() == before
    want = Counter({(i, "r"): 1 for i in range(20_000) if i % 9}) + Counter({(-1, None): 3, (-2, "n"): 1})
    want[(10, "r")] = 4
    assert _sink_rows_pg(pg_url) == want
    with psycopg.connect(pg_url, autocommit=True) as c:  # someone else removes a row
        c.execute("DELETE FROM v WHERE x = 1")
    with pytest.raises(IVMError, match="negative count"):
        s.write(3, {"v": [((1, "r"), -1), ((2, "r"), -1)]})
    assert _sink_rows_pg(pg_url) == want - Counter({(1, "r"): 1})  # batch 3 changed nothing
    s.close()


def test_duckdb_and_parquet_sinks_are_idempotent(tmp_path):
    import pyarrow.parquet as pq

    db = str(tmp_path / "out.duckdb")
    sinks = [DuckDBSink(db, "d1"), ParquetSink(str(tmp_path / "pq"))]
    for s in sinks:
        s.prepare(LAYOUT, fresh=True)
        assert s.write(0, CHANGES_1) and s.write(1, CHANGES_2)
        assert not s.write(1, CHANGES_2)
        s.close()
    with duckdb.connect(db) as c:
        got = Counter({(x, y): n for x, y, n in c.execute("SELECT x, y, ivm_count FROM v").fetchall()})
        assert c.execute("SELECT count(*) FROM v WHERE ivm_count <= 0").fetchone()[0] == 0
    assert got == Counter({(2, None): 1, (3, "c"): 1})
    s = DuckDBSink(db, "d1")
    s.prepare(LAYOUT, fresh=False)
    with pytest.raises(IVMError, match="negative count"):  # a row the table does not hold
        s.write(2, {"v": [((3, "c"), -1), ((9, "z"), -1)]})
    assert not s.write(1, CHANGES_2) and s.write(2, {"v": [((3, "c"), -1)]})  # nothing half-applied
    s.close()
    with duckdb.connect(db) as c:
        assert c.execute("SELECT x, y, ivm_count FROM v").fetchall() == [(2, None, 1)]
    total = Counter()
    for f in sorted((tmp_path / "pq" / "v").glob("batch-*.parquet")):
        for rec in pq.read_table(f).to_pylist():
            total[(rec["x"], rec["y"])] += rec["ivm_delta"]
    assert +total == Counter({(2, None): 1, (3, "c"): 1}) and not -total


def test_config_toml_flags_and_errors(tmp_path):
    views = tmp_path / "views.sql"
    views.write_text("CREATE INCREMENTAL MATERIALIZED VIEW v AS SELECT r.a FROM r, s WHERE r.k < s.k;")
    toml = tmp_path / "daemon.toml"
    toml.write_text('[daemon]\nsource = "postgresql://u@h/db"\nviews = "views.sql"\n'
                    'checkpoint = "ck"\nsinks = ["source", "parquet:out"]\nshards = 2\n')
    args = build_parser().parse_args(["--config", str(toml), "--shards", "3", "--trigger", "500ms"])
    cfg = config_from_args(args).validate()
    assert cfg.views == str(views) and cfg.checkpoint == str(tmp_path / "ck")
    assert cfg.sinks == ["source", f"parquet:{tmp_path / 'out'}"] and cfg.shards == 3
    assert cfg.trigger_seconds == 0.5 and cfg.slot.startswith("ivm_ck_") and cfg.slot.endswith("_slot")
    assert parse_trigger("available-now") is None and parse_trigger("2min") == 120
    with pytest.raises(ConfigError, match="duration"):
        parse_trigger("soon")
    toml.write_text('[daemon]\nsorce = "x"\n')
    with pytest.raises(ConfigError, match="unknown setting"):
        config_from_args(build_parser().parse_args(["--config", str(toml)]))
    with pytest.raises(ConfigError, match="--checkpoint"):
        config_from_args(build_parser().parse_args(["--source", "postgresql://x/y",
                                                    "--views", str(views)])).validate()
    assert [d.name for d in parse_views(views.read_text())] == ["v"]
    with pytest.raises(IVMError, match="only hold CREATE INCREMENTAL"):
        parse_views("CREATE TABLE x (a int);")


# -- the ivm-cdc reader's methods, called directly (the same calls Spark makes) -----------------
def _reader(url, **extra):
    from ivm_layer.daemon.source import CdcStreamReader

    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE PUBLICATION p1 FOR TABLE r, s")
    opts = {"url": url, "slot": f"slot_{url.rsplit('/', 1)[1]}", "publication": "p1", "tables": "r,s",
            "maxChangesPerBatch": "5", "snapshotPartitionRows": "1000"} | extra
    return CdcStreamReader(opts)


def _read_all(reader, parts):
    import pickle

    out = []
    for p in parts:
        for item in reader.read(p):  # snapshot slices yield tuples, change batches Arrow batches
            rows = [item] if isinstance(item, tuple) else [tuple(r.values()) for r in item.to_pylist()]
            out += [(lsn, t, sign, None if raw is None else pickle.loads(raw))
                    for lsn, _seq, _ts, t, sign, raw in rows]
    return out


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return int(hi, 16) << 32 | int(lo, 16)


def _wait_confirmed(url: str, slot: str, lsn: int, timeout: float = 30.0) -> int:
    """The slot's confirmed position once it reached ``lsn`` (or the last seen after ``timeout``)."""
    import time

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as c:
        while True:
            conf = _lsn(c.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                  "WHERE slot_name = %s", [slot]).fetchone()[0])
            if conf >= lsn or time.monotonic() > deadline:
                return conf
            time.sleep(0.1)


def test_cdc_reader_snapshot_handoff_limits_and_ack(pg_url):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int) WITH (fillfactor = 10); CREATE TABLE s (k int, x numeric)")
        c.execute("ALTER TABLE r REPLICA IDENTITY FULL; ALTER TABLE s REPLICA IDENTITY FULL")
        c.execute("INSERT INTO r SELECT g, g % 7 FROM generate_series(1, 5000) g")
        c.execute("ANALYZE r")
    reader = _reader(pg_url)
    start = reader.initialOffset()
    snap_end = reader.latestOffset(start, ReadMaxRows(5))
    with psycopg.connect(pg_url, autocommit=True) as c:  # committed after the snapshot: the stream's
        c.execute("SET synchronous_commit = on")  # decoding reads flushed WAL only
        c.execute("INSERT INTO r VALUES (-1, NULL)")
        c.execute("BEGIN; DELETE FROM r WHERE a = 1; UPDATE s SET x = 1; INSERT INTO s VALUES (1, 2.50), "
                  "(1, 2.50); COMMIT")
        for i in range(4):
            c.execute("INSERT INTO r VALUES (%s, 1), (%s, 2)", [100 + i, 100 + i])
        c.execute("TRUNCATE s")
    parts = reader.partitions(start, snap_end)
    assert len(parts) > 2  # the big table is read by several partitions under one snapshot
    snap = _read_all(reader, parts)
    assert Counter((t, row) for _, t, _, row in snap) == Counter(("r", (g, g % 7)) for g in range(1, 5001))
    reader.commit(snap_end)  # the snapshot batch is done: the same connection streams the slot
    with psycopg.connect(pg_url) as c:
        wal = _lsn(c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
    assert reader.feed.wait_position(wal, 60)  # the stream delivered everything written so far

    batches, cur = [], snap_end
    while True:
        end = reader.latestOffset(cur, ReadMaxRows(5))
        if end == cur:
            break
        rows = _read_all(reader, reader.partitions(cur, end))
        assert rows == _read_all(reader, reader.partitions(cur, end))  # a replay reads the same
        batches.append(rows)
        cur = end
    sizes = [sum(1 for r in b if r[2]) for b in batches]
    # whole transactions (1 | 3 | 2 | 2 | 2 | 2 | TRUNCATE) up to 5 row changes per batch
    assert sizes == [4, 4, 4], sizes
    flat = [r for b in batches for r in b]
    assert ("s", 1, (1, __import__("decimal").Decimal("2.50"))) in [(t, s, row) for _, t, s, row in flat]
    assert flat[-1][1:] == ("s", 0, None)  # TRUNCATE
    with psycopg.connect(pg_url) as c:
        conf = c.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                         [reader.slot]).fetchone()[0]
    assert _lsn(conf) < cur["lsn"]  # nothing acknowledged before commit()
    reader.commit(cur)
    assert _wait_confirmed(pg_url, reader.slot, cur["lsn"]) >= cur["lsn"]
    # Trigger.AvailableNow: only what was committed before prepareForTriggerAvailableNow
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("SET synchronous_commit = on")
        c.execute("INSERT INTO r VALUES (7, 7)")
        reader.prepareForTriggerAvailableNow()
        c.execute("INSERT INTO r VALUES (8, 8)")
    end = reader.latestOffset(cur, ReadAllAvailable())
    assert [row for _, _, _, row in _read_all(reader, reader.partitions(cur, end))] == [(7, 7)]
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    reader.stop()
    assert _slot_released(pg_url, reader.slot)  # the stream's walsender is gone with the connection
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("SELECT pg_drop_replication_slot(%s)", [reader.slot])


def _slot_released(url: str, slot: str, timeout: float = 10.0) -> bool:
    """Whether the slot became inactive with no walsender left (within ``timeout``)."""
    import time

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as c:
        while time.monotonic() < deadline:
            active = c.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", [slot]).fetchone()[0]
            senders = c.execute("SELECT count(*) FROM pg_stat_replication").fetchone()[0]
            if not active and senders == 0:
                return True
            time.sleep(0.1)
    return False


def test_example_daemon_config_and_views_compile():
    import pathlib

    from ivm_layer.daemon.shards import ViewRouter

    root = pathlib.Path(__file__).resolve().parents[2] / "examples" / "daemon"
    cfg = config_from_args(build_parser().parse_args(["--config", str(root / "daemon.toml")])).validate()
    assert cfg.sinks[0] == "source" and cfg.sinks[1].startswith("parquet:" + str(root))
    schema = {"customers": {"id": "integer", "name": "text"},
              "orders": {"id": "integer", "customer_id": "integer", "card": "text", "country": "text",
                         "ts": "timestamp without time zone"},
              "shipments": {"id": "integer", "order_id": "integer", "shipped_at": "timestamp without time zone"}}
    init = (root / "init.sql").read_text()
    for table, cols in schema.items():  # the example schema is the one init.sql creates
        assert f"CREATE TABLE {table} ({', '.join(f'{c} {t.split()[0]}' for c, t in cols.items())})" in init
    defs = parse_views(cfg_views := (root / "views.sql").read_text())
    assert cfg_views and [d.name for d in defs] == ["repeated_card_use", "order_shipments"]
    st = EngineState(defs, schema)
    assert set(st.views) == {"repeated_card_use", "order_shipments"}
    assert [ViewRouter(d, schema, 2).mode for d in defs] == ["hash", "hash"]


def test_aggregate_view_columns_are_typed_by_the_source(pg_url):
    from ivm_layer import IVMError, compile_view
    from ivm_layer.daemon.sinks import SinkError, view_layout
    from ivm_layer.io.postgres.snapshot import view_types

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int)")
    sql = "SELECT r.k, COUNT(*) AS n, SUM(r.a) AS s, AVG(r.a) AS m FROM r GROUP BY r.k"
    types = view_types(pg_url, sql)
    assert types == ["integer", "bigint", "bigint", "numeric"]
    view = compile_view(sql, {"r": {"a": "integer", "k": "integer"}}, dialect="postgres")
    assert view_layout(view, {}, types) == (["k", "n", "s", "m"], types)
    with pytest.raises(SinkError, match="aggregate"):
        view_layout(view, {})
    with pytest.raises(SinkError, match="types 3 columns"):
        view_layout(view, {}, types[:3])
    with pytest.raises(IVMError, match="cannot type"):
        view_types(pg_url, "SELECT nope FROM r")
    with psycopg.connect(pg_url) as c:  # the probe left nothing behind
        assert c.execute("SELECT to_regclass('ivm_type_probe')").fetchone()[0] is None


def test_replica_identity_needs_consent(pg_url, tmp_path):
    from ivm_layer.daemon.config import DaemonConfig
    from ivm_layer.daemon.runner import prepare_source

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int); CREATE TABLE s (k int, x int)")
        c.execute("ALTER TABLE s REPLICA IDENTITY FULL")
    views = tmp_path / "views.sql"
    views.write_text("CREATE INCREMENTAL VIEW v AS SELECT r.a, s.x FROM r JOIN s ON r.k = s.k;")
    defs = parse_views(views.read_text())

    def identities():
        with psycopg.connect(pg_url) as c:
            return dict(c.execute("SELECT relname, relreplident::text FROM pg_class "
                                  "WHERE relname IN ('r', 's')").fetchall())

    cfg = DaemonConfig(source=pg_url, views=str(views), checkpoint=str(tmp_path / "ck")).validate()
    with pytest.raises(IVMError, match=r"table\(s\) r lack REPLICA IDENTITY FULL.*--set-replica-identity"):
        prepare_source(cfg, defs)
    assert identities() == {"r": "d", "s": "f"}  # nothing was changed
    cfg.set_replica_identity = True
    schema = prepare_source(cfg, defs)
    assert identities() == {"r": "f", "s": "f"} and sorted(schema) == ["r", "s"]
    assert defs[0].types == ["integer", "integer"]
    args = build_parser().parse_args(["--source", pg_url, "--views", str(views), "--checkpoint", "x",
                                      "--set-replica-identity"])
    assert config_from_args(args).set_replica_identity is True
    args = build_parser().parse_args(["--source", pg_url, "--views", str(views), "--checkpoint", "x"])
    assert config_from_args(args).set_replica_identity is False


def test_orphan_slots_of_discarded_checkpoints_are_dropped(pg_url, tmp_path, caplog):
    from ivm_layer.daemon.hygiene import clean_orphans, mark_publication

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int)")
        kept = tmp_path / "kept"
        kept.mkdir()
        db = c.execute("SELECT current_database()").fetchone()[0]
        for name, ckpt in (("gone", tmp_path / "gone"), ("kept", kept), ("own", tmp_path / "own")):
            c.execute(f"CREATE PUBLICATION ivm_{name}_{db}_pub FOR TABLE r")
            mark_publication(c, f"ivm_{name}_{db}_pub", str(ckpt))
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", [f"ivm_{name}_{db}_slot"])
        c.execute("CREATE PUBLICATION ivm_unlabelled_pub FOR TABLE r")  # not a daemon's: untouched
        with caplog.at_level("WARNING", logger="ivm.daemon"):
            assert clean_orphans(c, f"ivm_own_{db}_pub") == [f"ivm_gone_{db}_pub"]
        assert f"ivm_kept_{db}_slot" in caplog.text and "retains" in caplog.text
        slots = {r[0] for r in c.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s", [db])}
        pubs = {r[0] for r in c.execute("SELECT pubname FROM pg_publication")}
        assert slots == {f"ivm_kept_{db}_slot", f"ivm_own_{db}_slot"}
        assert pubs == {f"ivm_kept_{db}_pub", f"ivm_own_{db}_pub", "ivm_unlabelled_pub"}
        for s in slots:
            c.execute("SELECT pg_drop_replication_slot(%s)", [s])


def test_change_feed_commit_log_and_back_pressure(pg_url, tmp_path):
    """The feed stops reading when its stage is full (a soft bound: one read of what the socket
    holds), frees what the consumer's commit marker (the daemon's sinks-committed.json,
    written atomically) says is durable, confirms the slot up to there and no further, and
    delivers every transaction exactly once."""
    from ivm_layer.daemon.commitmark import marker_path, write_marker
    from ivm_layer.io.postgres.feed import committed_offset, daemon_feed

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int, pad text); ALTER TABLE r REPLICA IDENTITY FULL")
        c.execute("CREATE PUBLICATION p2 FOR TABLE r")
        slot = f"feed_{pg_url.rsplit('/', 1)[1]}"
        start = _lsn(c.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')",
                               [slot]).fetchone()[0])
        for i in range(300):  # ~6 MB of changes: more than a socket buffer holds
            c.execute("INSERT INTO r SELECT g, %s, repeat('x', 2000) FROM generate_series(1, 10) g", [i])
        wal = _lsn(c.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])
    marker = marker_path(str(tmp_path))
    assert committed_offset(marker) is None
    feed = daemon_feed(pg_url, slot, "p2", start, max_staged=200, committed_marker=marker)
    seen: Counter = Counter()
    try:
        assert feed.wait_position(wal, 60, until_full=True)
        n = len(feed.staged(start))
        time.sleep(0.6)
        assert len(feed.staged(start)) == n and not feed.wait_position(wal, 0.3)  # stopped reading
        done, batch = start, 0
        deadline = time.monotonic() + 120
        while done < wal and time.monotonic() < deadline:
            staged = feed.staged(done)
            if not staged:
                feed.wait_position(done + 1, 1.0)
                continue
            end = staged[-1][0]
            for t in feed.take(done, end):  # what a batch reads, then the sinks hold
                seen.update((a, k) for (a, k, _), _ in t.changes["r"])
            write_marker(str(tmp_path), batch, end)
            assert committed_offset(marker) == end
            assert _wait_confirmed(pg_url, slot, end) >= end  # confirmed from the marker alone
            done, batch = end, batch + 1
            if feed.position >= wal and not feed.staged(done):
                break
        assert batch > 3 and seen == Counter({(a, k): 1 for a in range(1, 11) for k in range(300)})
    finally:
        feed.close()
    assert _slot_released(pg_url, slot)
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("SELECT pg_drop_replication_slot(%s)", [slot])


def test_engine_state_static_tables_rebuild_on_static_writes():
    """A view declaring a static table: dynamic changes go through the engine's O(1) path, a
    change to the static table rebuilds the view from the base rows (counted), and the view's
    changes always add up to the same view recomputed from scratch."""
    import random

    from ivm_layer import compile_view
    from ivm_layer.daemon.state import EngineState, ViewDef, parse_views

    (d,) = parse_views("CREATE INCREMENTAL VIEW sv WITH (static = 'n') AS "
                       "SELECT o.id, o.nk, n.name FROM o JOIN n ON o.nk = n.nk")
    assert d.static == ["n"]
    schema = {"o": {"id": "integer", "nk": "integer"}, "n": {"nk": "integer", "name": "text"}}
    st = EngineState([d], schema)
    rng = random.Random(4)
    seen: dict = {}

    def feed(changes):
        for row, k in st.apply(changes).get("sv", []):
            seen[row] = seen.get(row, 0) + k
            if not seen[row]:
                del seen[row]

    feed({"n": {(1, "a"): 1, (2, "b"): 1}, "o": {(i, i % 3): 1 for i in range(20)}})
    assert st.rebuilds["sv"] == 0
    for step in range(30):
        if step % 7 == 6:
            feed({"n": {(rng.randint(0, 3), f"x{step}"): 1}})
        else:
            feed({"o": {(100 + step, rng.randint(0, 3)): 1}})
        fresh = compile_view("SELECT o.id, o.nk, n.name FROM o JOIN n ON o.nk = n.nk", schema)
        fresh.apply({t: list(rows.items()) for t, rows in st.base.items() if rows})
        assert dict(st.views["sv"].rows()) == dict(fresh.rows()) == seen
    assert st.rebuilds["sv"] == 4
    assert isinstance(ViewDef("x", "SELECT 1", False).static, list)


def test_spark_class_data_archive_adopted_and_leftovers_removed(tmp_path, monkeypatch):
    """A finished run's class-data archive is adopted; the archives of other finished runs of
    the same Spark (never to be used) are removed; a running JVM's is left alone."""
    import subprocess

    from ivm_layer.daemon import spark

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("IVM_SPARK_FAST_START", raising=False)
    d = spark.cds_dir()
    os.makedirs(d, mode=0o700)
    final = os.path.join(d, f"spark-{spark._archive_key()}.jsa")
    dead = []
    for _ in range(2):
        p = subprocess.Popen(["true"])
        p.wait()
        dead.append(p.pid)
    for pid in dead + [os.getpid()]:
        with open(f"{final}.{pid}.tmp", "w") as f:
            f.write(str(pid))
    opts = spark.driver_java_options()
    assert f"-XX:SharedArchiveFile={final}" in opts.split()
    with open(final) as f:
        assert int(f.read()) in dead
    assert sorted(os.listdir(d)) == sorted([os.path.basename(final), f"{os.path.basename(final)}.{os.getpid()}.tmp"])


def test_commit_marker_is_what_the_feed_confirms_and_covers_a_replayed_snapshot(tmp_path):
    """The daemon's sinks-committed.json (not Spark's commits/ directory) tells the feed what it
    may confirm and the source whether a replayed snapshot batch was applied; an unreadable
    marker counts as none (the slot is then confirmed less far: safe)."""
    from ivm_layer.daemon.commitmark import marker_path, read_marker, write_marker
    from ivm_layer.daemon.source import CdcStreamReader
    from ivm_layer.io.postgres.feed import committed_offset

    path = marker_path(str(tmp_path))
    reader = CdcStreamReader({"url": "postgresql://u@h/db", "slot": "s", "publication": "p", "tables": "r",
                              "commitMarker": path})
    assert read_marker(path) is None and committed_offset(path) is None
    assert not reader._snapshot_applied()
    write_marker(str(tmp_path), 0, 0x16B3F28)
    assert reader._snapshot_applied()
    assert committed_offset(path) == 0x16B3F28 and read_marker(path)["batch_id"] == 0
    write_marker(str(tmp_path), 7, 0x16B4000)
    assert committed_offset(path) == 0x16B4000 and read_marker(path)["batch_id"] == 7
    assert not [n for n in os.listdir(tmp_path) if n != os.path.basename(path)]   # no temporary left
    with open(path, "w") as f:
        f.write('{"batch_id": 8, "lsn": ')                       # torn (not by the daemon: it renames)
    assert read_marker(path) is None and committed_offset(path) is None
