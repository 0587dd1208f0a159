"""The test cluster itself: logical decoding is on and the server listens on loopback only."""

import psycopg


def test_cluster_is_logical_and_local(pg_url):
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SHOW wal_level").fetchone()[0] == "logical"
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        assert conn.execute("SELECT current_setting('server_version_num')::int").fetchone()[0] >= 150000


def test_fresh_databases_are_isolated(pg_cluster):
    a, b = pg_cluster.create_database(), pg_cluster.create_database()
    assert a != b
    with psycopg.connect(a, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
    with psycopg.connect(b) as conn:
        assert conn.execute("SELECT to_regclass('t')").fetchone()[0] is None
