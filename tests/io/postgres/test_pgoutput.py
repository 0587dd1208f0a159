"""The pgoutput decoder against a real PostgreSQL 15 server: WAL is generated with real
statements and the slot's output (``pg_logical_slot_get_binary_changes``, and the streaming
replication connection) is decoded. Expected values come from PostgreSQL itself (a SELECT of
the same rows), never from hand-written literals of the decoder's output."""

from __future__ import annotations

import time

import psycopg
import pytest

from ivm_layer.io.postgres import replication as pgc
from ivm_layer.io.postgres.pgoutput import (
    PgOutputDecoder,
    PgOutputError,
    ReplicaIdentityError,
    ValueDecoder,
    parse_lsn,
)

TYPES_DDL = """CREATE TABLE typed (
    i2 smallint, i4 integer, i8 bigint, num numeric(12, 3), txt text, vc varchar(20),
    b boolean, d date, ts timestamp, tstz timestamptz, f4 real, f8 double precision,
    u uuid, jb jsonb, js json, by bytea, arr integer[], iv interval, ch char(3))"""
TYPES_COLS = "i2, i4, i8, num, txt, vc, b, d, ts, tstz, f4, f8, u, jb::text, js::text, by, arr, iv, ch"
TYPES_ROW = """(-3, 2147483647, 9007199254740993, 12345.678, E'tab\\there\\nnewline \\\\ back', 'ünïcödé',
    true, '2024-02-29', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.5+05:30', 1.5, 0.1,
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"b": [1, 2, {"c": null}], "a": "x"}', '{"z": 1,  "a": 2}',
    '\\x00ff10', '{1,NULL,3}', '1 day 02:03:04', 'ab')"""


@pytest.fixture(autouse=True)
def _drop_slots(request):
    """Slots are per cluster and retain WAL: drop this test's slots afterwards."""
    yield
    url = request.node.funcargs.get("pg_url")
    if url is not None:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                      "WHERE database = current_database() AND NOT active")


def _conn(url):
    return psycopg.connect(url, autocommit=True, options="-c TimeZone=UTC -c synchronous_commit=on")


def _slot(conn, name=None, pub="p", tables=("t",)):
    """A pgoutput slot (slots are per cluster: named after the test's database)."""
    name = name or "s_" + conn.info.dbname
    pgc.ensure_publication(conn, pub, tables)
    conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", [name])


def _get(conn, dec, slot=None, pub="p", binary=False):
    """Consume the slot's changes (SQL interface) and decode them."""
    slot = slot or "s_" + conn.info.dbname
    opts = ["proto_version", "1", "publication_names", pub, "messages", "true"]
    if binary:
        opts += ["binary", "true"]
    rows = conn.execute(
        "SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes(%s, NULL, NULL, "
        + ", ".join(["%s"] * len(opts)) + ")", [slot, *opts]).fetchall()
    return [t for lsn, data in rows if (t := dec.feed(data, parse_lsn(lsn))) is not None]


def _pg_rows(conn, sql):
    return [tuple(tuple(v) if isinstance(v, list) else v for v in r) for r in conn.execute(sql).fetchall()]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_every_type_insert_and_nulls(pg_url, binary):
    conn = _conn(pg_url)
    conn.execute(TYPES_DDL)
    conn.execute("ALTER TABLE typed REPLICA IDENTITY FULL")
    _slot(conn, tables=["typed"])
    conn.execute(f"INSERT INTO typed VALUES {TYPES_ROW}")
    conn.execute("INSERT INTO typed DEFAULT VALUES")              # every column NULL
    dec = PgOutputDecoder()
    txns = _get(conn, dec, binary=binary)
    assert len(txns) == 2
    got = [r for t in txns for r, k in t.changes["typed"]]
    assert [k for t in txns for _, k in t.changes["typed"]] == [1, 1]
    expected = _pg_rows(conn, f"SELECT {TYPES_COLS} FROM typed ORDER BY i2 NULLS LAST")
    assert got == expected
    # the types are psycopg's, not strings
    first = got[0]
    assert [type(v).__name__ for v in first[:13]] == [
        "int", "int", "int", "Decimal", "str", "str", "bool", "date", "datetime", "datetime",
        "float", "float", "UUID"]
    assert first[9].utcoffset().total_seconds() == 0          # timestamptz in UTC
    assert first[13] == conn.execute("SELECT jb::text FROM typed WHERE jb IS NOT NULL").fetchone()[0]
    assert got[1] == (None,) * 19
    # Relation message: names, types, replica identity
    rel = txns[0].relations["typed"]
    assert rel.column_names[:3] == ("i2", "i4", "i8") and rel.replica_identity == "f"


def test_snapshot_copy_gives_identical_values(pg_url):
    """COPY under a snapshot and the stream decode to equal values of equal Python types."""
    conn = _conn(pg_url)
    conn.execute(TYPES_DDL)
    conn.execute("ALTER TABLE typed REPLICA IDENTITY FULL")
    _slot(conn, tables=["typed"])
    conn.execute(f"INSERT INTO typed VALUES {TYPES_ROW}")
    conn.execute("INSERT INTO typed DEFAULT VALUES")
    streamed = [r for t in _get(conn, PgOutputDecoder()) for r, _ in t.changes["typed"]]
    cols = [(c, oid) for c, _, oid in pgc.table_columns(conn, "typed")]
    copied = pgc.copy_tables(pg_url, None, {"typed": cols}, ValueDecoder())["typed"]
    assert sorted(copied, key=repr) == sorted(streamed, key=repr)
    for a, b in zip(sorted(copied, key=repr), sorted(streamed, key=repr)):
        assert [type(v) for v in a] == [type(v) for v in b]


def test_update_delete_full_identity_and_key_change(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    _slot(conn)
    conn.execute("INSERT INTO t VALUES (1, 'a'), (2, NULL)")
    conn.execute("UPDATE t SET id = 10, v = 'b' WHERE id = 1")     # key change
    conn.execute("UPDATE t SET v = 'c' WHERE id = 2")              # NULL → value
    conn.execute("DELETE FROM t WHERE id = 10")
    txns = _get(conn, PgOutputDecoder())
    assert [t.changes["t"] for t in txns] == [
        [((1, "a"), 1), ((2, None), 1)],
        [((1, "a"), -1), ((10, "b"), 1)],
        [((2, None), -1), ((2, "c"), 1)],
        [((10, "b"), -1)],
    ]
    assert conn.execute("SELECT * FROM t").fetchall() == [(2, "c")]
    lsns = [t.end_lsn for t in txns]
    assert lsns == sorted(lsns) and all(t.commit_lsn < t.end_lsn for t in txns)
    assert len({t.xid for t in txns}) == 4


@pytest.mark.parametrize("identity", ["DEFAULT", "USING INDEX t_v_key"])
def test_update_without_old_row_is_a_clear_error(pg_url, identity):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL UNIQUE)")
    conn.execute(f"ALTER TABLE t REPLICA IDENTITY {identity}")
    _slot(conn)
    conn.execute("INSERT INTO t VALUES (1, 'a')")
    conn.execute("UPDATE t SET v = 'b'")
    dec = PgOutputDecoder()
    with pytest.raises(ReplicaIdentityError, match="REPLICA IDENTITY FULL") as ei:
        _get(conn, dec)
    assert ei.value.table == "t"


def test_delete_with_key_only_is_a_clear_error(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    _slot(conn)
    conn.execute("INSERT INTO t VALUES (1, 'a')")
    conn.execute("DELETE FROM t")
    with pytest.raises(ReplicaIdentityError, match="ALTER TABLE t REPLICA IDENTITY FULL"):
        _get(conn, PgOutputDecoder())


def test_toasted_unchanged_column_is_filled_from_old_row(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int, big text, n int)")
    conn.execute("ALTER TABLE t ALTER COLUMN big SET STORAGE EXTERNAL")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    _slot(conn)
    conn.execute("INSERT INTO t SELECT 1, string_agg(md5(i::text), ''), 0 FROM generate_series(1, 4000) i")
    conn.execute("UPDATE t SET n = 1")
    dec = PgOutputDecoder()
    txns = _get(conn, dec)
    big = conn.execute("SELECT big FROM t").fetchone()[0]
    assert len(big) == 128_000
    assert txns[1].changes["t"] == [((1, big, 0), -1), ((1, big, 1), 1)]
    assert dec.unchanged_toast == 1            # the new row really carried a 'u' column


def test_rolled_back_transactions_and_savepoints_are_absent(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int)")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    _slot(conn)
    with conn.transaction():
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(RuntimeError), conn.transaction():    # SAVEPOINT … ROLLBACK TO SAVEPOINT
            conn.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError
        conn.execute("INSERT INTO t VALUES (3)")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (4)")
    conn.execute("ROLLBACK")
    conn.execute("INSERT INTO t VALUES (5)")
    txns = _get(conn, PgOutputDecoder())
    assert [t.changes["t"] for t in txns] == [[((1,), 1), ((3,), 1)], [((5,), 1)]]
    assert sorted(r for r, in conn.execute("SELECT id FROM t")) == [1, 3, 5]


def test_multi_statement_transaction_over_two_tables(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int, v int); CREATE TABLE u (id int)")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL; ALTER TABLE u REPLICA IDENTITY FULL")
    conn.execute("CREATE TABLE other (id int)")                    # not published
    _slot(conn, tables=["t", "u"])
    with conn.transaction():
        conn.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
        conn.execute("INSERT INTO u VALUES (7)")
        conn.execute("INSERT INTO other VALUES (9)")
        conn.execute("UPDATE t SET v = v + 10")
        conn.execute("DELETE FROM u")
    txns = _get(conn, PgOutputDecoder())
    assert len(txns) == 1
    assert txns[0].changes == {
        "t": [((1, 1), 1), ((2, 2), 1), ((1, 1), -1), ((1, 11), 1), ((2, 2), -1), ((2, 12), 1)],
        "u": [((7,), 1), ((7,), -1)]}
    assert txns[0].n_changes == 8
    assert set(txns[0].relations) == {"t", "u"}


def test_truncate(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int); CREATE TABLE u (id int)")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL; ALTER TABLE u REPLICA IDENTITY FULL")
    _slot(conn, tables=["t", "u"])
    conn.execute("INSERT INTO t VALUES (1); INSERT INTO u VALUES (1)")
    with conn.transaction():
        conn.execute("INSERT INTO t VALUES (2)")
        conn.execute("TRUNCATE t, u RESTART IDENTITY")
        conn.execute("INSERT INTO t VALUES (3)")
    txns = _get(conn, PgOutputDecoder())
    assert txns[-1].truncated == ["t", "u"]
    assert txns[-1].changes == {"t": [((3,), 1)]}                  # the insert before it is wiped


def test_logical_messages_origin_and_type(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    conn.execute("CREATE TABLE t (id int, m mood)")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    _slot(conn)
    conn.execute("SELECT pg_logical_emit_message(false, 'nontx', 'hello'::bytea)")
    with conn.transaction():
        conn.execute("SELECT pg_logical_emit_message(true, 'tx', 'in txn')")
        conn.execute("INSERT INTO t VALUES (1, 'happy')")
    conn.execute("SELECT pg_replication_origin_create('upstream')")
    with conn.transaction():
        conn.execute("SELECT pg_replication_origin_session_setup('upstream')")
        conn.execute("SELECT pg_replication_origin_xact_setup('0/10', now())")
        conn.execute("INSERT INTO t VALUES (2, 'sad')")
    conn.execute("SELECT pg_replication_origin_session_reset()")
    dec = PgOutputDecoder()
    txns = _get(conn, dec)
    msgs = dec.take_messages()
    assert [(m.prefix, m.content, m.transactional) for m in msgs] == [("nontx", b"hello", False)]
    assert [(m.prefix, m.content) for m in txns[0].messages] == [("tx", b"in txn")]
    assert txns[0].changes == {"t": [((1, "happy"), 1)]}
    oid = conn.execute("SELECT 'mood'::regtype::oid::int").fetchone()[0]
    assert dec.types[oid] == ("public", "mood")                   # the Type message
    assert txns[1].origin == "upstream" and txns[0].origin is None
    assert txns[1].changes == {"t": [((2, "sad"), 1)]}


def test_relation_resent_after_alter_replaces_schema(pg_url):
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int, v text)")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    _slot(conn)
    conn.execute("INSERT INTO t VALUES (1, 'a')")
    conn.execute("ALTER TABLE t ADD COLUMN w numeric, ALTER COLUMN v TYPE int USING 0")
    conn.execute("INSERT INTO t VALUES (2, 5, 1.25)")
    conn.execute("UPDATE t SET w = 2 WHERE id = 1")
    dec = PgOutputDecoder()
    txns = _get(conn, dec)
    assert txns[0].relations["t"].column_names == ("id", "v")
    rel = txns[1].relations["t"]
    assert rel.column_names == ("id", "v", "w")
    assert [c.type_oid for c in rel.columns] == [23, 23, 1700]
    assert txns[1].changes["t"] == [((2, 5, pytest.approx(1.25)), 1)]
    assert txns[2].changes["t"][1][0] == (1, 0, 2)
    assert "t" not in txns[2].relations                          # not re-sent without a change


def test_stream_must_start_at_a_transaction_boundary():
    dec = PgOutputDecoder()
    with pytest.raises(PgOutputError, match="outside a transaction"):
        dec.feed(b"I" + (16384).to_bytes(4, "big") + b"N\x00\x00", 1)
    with pytest.raises(PgOutputError, match="unknown pgoutput message kind"):
        dec.feed(b"S\x00", 1)


def test_replication_stream_snapshot_handoff_and_acknowledgement(pg_url):
    """The streaming reader: exported snapshot + stream = the table, with writes between slot
    creation and START_REPLICATION; the slot is acknowledged exactly up to flushed_lsn."""
    conn = _conn(pg_url)
    conn.execute("CREATE TABLE t (id int)")
    conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
    conn.execute("INSERT INTO t SELECT generate_series(1, 1000)")
    pgc.ensure_publication(conn, "p", ["t"])
    rs = pgc.ReplicationStream(pg_url, status_interval=0.2)
    try:
        slot = rs.create_slot("hand")
        conn.execute("INSERT INTO t VALUES (-1)")                    # after the snapshot
        conn.execute("DELETE FROM t WHERE id <= 10")
        snap = pgc.copy_tables(pg_url, slot.snapshot, {"t": [("id", 23)]})["t"]
        assert sorted(snap) == [(i,) for i in range(1, 1001)]       # the snapshot predates them
        rs.start("hand", "p", slot.consistent_lsn)
        conn.execute("INSERT INTO t VALUES (-2)")
        dec = PgOutputDecoder()
        state = {r: 1 for r in snap}
        txns = []
        deadline = time.monotonic() + 20
        while len(txns) < 3 and time.monotonic() < deadline:
            for lsn, payload in rs.read(0.5):
                if (t := dec.feed(payload, lsn)) is not None:
                    txns.append(t)
        for t in txns:
            for r, k in t.changes["t"]:
                state[r] = state.get(r, 0) + k
        assert sorted(r for r, k in state.items() if k) == sorted(conn.execute("SELECT id FROM t").fetchall())
        assert all(k in (0, 1) for k in state.values())
        rs.flushed_lsn = txns[0].end_lsn
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            rs.read(0.1)
            if pgc.slot_lag(conn, "hand").confirmed_flush_lsn == txns[0].end_lsn:
                break
        lag = pgc.slot_lag(conn, "hand")
        assert lag.active and lag.confirmed_flush_lsn == txns[0].end_lsn
        assert lag.lag_bytes > 0
    finally:
        rs.close()
    assert pgc.drop_slot(conn, "hand")
    assert not pgc.slot_exists(conn, "hand")
