"""PostgreSQL sessions: state files that are safe to read back, names that cannot collide or
escape, connection targets like libpq, and a state keyed by the database's identity — on a
real PostgreSQL 15."""

from __future__ import annotations

import math
import os
import pickle
import stat
import warnings
from collections import Counter

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import ivm_layer
from ivm_layer.errors import IVMError
from ivm_layer.io.postgres.conninfo import ConnectionTargetError, is_postgres_target
from ivm_layer.maintain.checkpoint import CheckpointError
from ivm_layer.session.postgres.session import CatalogError, PostgresSession


def bag(s, name) -> Counter:
    return Counter({r: k for r, k in s.view(name).rows()})


@pytest.fixture
def db(pg_url, tmp_path):
    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE r (a int, b float8, d numeric(12,2))")
    w.execute("ALTER TABLE r REPLICA IDENTITY FULL")
    w.execute("INSERT INTO r VALUES (1, 1.5, 2.25), (2, 'NaN', 3.50), (3, 'Infinity', NULL)")
    yield pg_url, w, tmp_path / "state"
    w.close()


class Boom:
    """A pickle that runs a shell command when loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_state_files_are_private_typed_json_and_never_run_code(db, tmp_path):
    url, w, state = db
    old = os.umask(0)                           # the layer must not depend on the umask
    try:
        with ivm_layer.connect(url, state_dir=state) as s:
            s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b, d FROM r")
            w.execute("UPDATE r SET a = a + 10")          # NaN and Infinity rows change too
            s.sync()
            # (NaN != NaN in Python: compare the rows' text)
            assert sorted(map(repr, bag(s, "v").elements())) == sorted(
                map(repr, w.execute("SELECT a, b, d FROM r").fetchall()))
            slot = s._views["v"].slot
    finally:
        os.umask(old)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    files = sorted(p.name for p in state.iterdir())
    assert files == [f"{slot}.log", f"{slot}.snap"]
    for p in state.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
        assert not p.read_bytes().startswith(b"\x80")          # not a pickle
    # resume from the snapshot + log: the NaN row is still the same row (UPDATE finds it)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = ivm_layer.connect(url, state_dir=state)
    w.execute("UPDATE r SET a = a - 10")
    s.sync()
    assert len(s.view("v")) == 3 and sorted(r[0] for r, _ in s.view("v").rows()) == [1, 2, 3]
    s.close()
    # a planted pickle, under the new name and the old one: never loaded as code
    marker = tmp_path / "pwned"
    for name in (f"{slot}.snap", f"{slot}.ckpt"):
        fd = os.open(state / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(Boom(marker), f)
    with pytest.warns(UserWarning, match="unusable checkpoint.*malformed|rebuilding"):
        s = ivm_layer.connect(url, state_dir=state)
    assert not marker.exists()
    s.sync()
    assert sorted(r[0] for r, _ in s.view("v").rows()) == [1, 2, 3]
    s.close(drop=True)


def test_state_directory_writable_by_others_is_refused(db):
    url, _, state = db
    state.mkdir(mode=0o700)
    os.chmod(state, 0o777)
    with pytest.raises(CheckpointError, match="can be written by other users"):
        ivm_layer.connect(url, state_dir=state)
    os.chmod(state, 0o755)                        # readable only: tightened
    ivm_layer.connect(url, state_dir=state).close()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_hostile_catalog_rows_are_refused_and_left_alone(db, tmp_path):
    url, w, state = db
    with ivm_layer.connect(url, state_dir=state) as s:
        s.execute("CREATE INCREMENTAL VIEW good AS SELECT a FROM r")
    marker = tmp_path / "pwned"
    with open(state.parent / "evil.ckpt", "wb") as f:
        pickle.dump(Boom(marker), f)
    rows = [("evil", "incremental", "CREATE INCREMENTAL VIEW evil AS SELECT a FROM r", "../evil"),
            ("evil2", "incremental", "CREATE INCREMENTAL VIEW evil2 AS SELECT a FROM r", "ivm_x/../../evil"),
            # a definition that names an existing table: never dropped or replaced
            ("r", "materialized", "CREATE INCREMENTAL MATERIALIZED VIEW r AS SELECT a FROM r", "ivm_r_slot"),
            ("other", "incremental", "CREATE INCREMENTAL VIEW notother AS SELECT a FROM r", "ivm_other")]
    for row in rows:
        w.execute("INSERT INTO ivm.views VALUES ('default', %s, %s, %s, %s)", row)
    with pytest.warns(UserWarning) as rec:
        s = ivm_layer.connect(url, state_dir=state)
    text = "\n".join(str(r.message) for r in rec)
    assert "'evil'" in text and "invalid slot '../evil'" in text
    assert "'evil2'" in text and "'r'" in text and "did not create" in text
    assert "does not create a view of that name" in text
    assert s.views == ["good"]                                  # one bad row never blocks the rest
    assert not marker.exists()
    assert w.execute("SELECT count(*) FROM r").fetchone()[0] == 3     # the table is untouched
    assert Counter(s.execute("SELECT a FROM r").fetchall()) == Counter({(1,): 1, (2,): 1, (3,): 1})
    s.execute("DROP VIEW evil, evil2")                                 # the way out: rows go
    assert w.execute("SELECT name FROM ivm.views ORDER BY name").fetchall() == [("good",), ("other",), ("r",)]
    s.close(drop=True)


def test_slot_names_never_collide_and_taken_names_are_refused(db):
    url, w, state = db
    w.execute("CREATE TABLE u (x int)")
    w.execute("ALTER TABLE u REPLICA IDENTITY FULL")
    with ivm_layer.connect(url, state_dir=state) as s:
        s.execute('CREATE INCREMENTAL VIEW "a-b" AS SELECT a FROM r')
        s.execute("CREATE INCREMENTAL VIEW a_b AS SELECT x FROM u")
        assert s._views["a-b"].slot != s._views["a_b"].slot
        w.execute("INSERT INTO r VALUES (9, 0, 0)")
        w.execute("INSERT INTO u VALUES (7)")
        s.sync()
        assert sorted(r[0] for r, _ in s.view("a-b").rows()) == [1, 2, 3, 9]    # still follows r
        assert [r for r, _ in s.view("a_b").rows()] == [(7,)]
        pubs = dict(w.execute("SELECT p.pubname, string_agg(t.tablename, ',') FROM pg_publication p "
                              "JOIN pg_publication_tables t USING (pubname) GROUP BY 1").fetchall())
        assert sorted(pubs.values()) == ["r", "u"]
        # a publication of the name the next view would use, made by someone else: refused
        # before anything changes
        from ivm_layer.session.postgres.session import slot_name
        taken = slot_name(w.info.dbname, "default", "v3")
        w.execute(f"CREATE PUBLICATION {taken} FOR TABLE u")
        with pytest.raises(CatalogError, match="publication named .* exists that this session did not create"):
            s.execute("CREATE INCREMENTAL VIEW v3 AS SELECT a FROM r")
        assert w.execute("SELECT tablename FROM pg_publication_tables WHERE pubname = %s",
                         [taken]).fetchall() == [("u",)]
        assert not w.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", [taken]).fetchone()
        assert s.views == ["a-b", "a_b"]
        s.close(drop=True)
    assert w.execute("SELECT pubname FROM pg_publication").fetchall() == [(taken,)]   # only theirs


def test_hostile_view_and_session_names(db):
    url, w, state = db
    for bad in ("../x", "a b", "", "x" * 41, "a;b"):
        with pytest.raises(IVMError, match="session name"):
            ivm_layer.connect(url, state_dir=state, session=bad)
    # (quoted names in lower case: the statement classifier folds case, see the report)
    names = ['"../../etc/passwd"', '"robert\'); drop table r; --"', '"view"', '"%s"', '"a""b"']
    with ivm_layer.connect(url, state_dir=state) as s:
        for n in names:
            s.execute(f"CREATE INCREMENTAL MATERIALIZED VIEW {n} AS SELECT a FROM r")
        w.execute("INSERT INTO r VALUES (5, 0, 0)")
        s.sync()
        for n in names:
            got = Counter(s.execute(f"SELECT * FROM {n}").fetchall())
            assert got == Counter(w.execute("SELECT a FROM r").fetchall())
        for p in state.iterdir():
            assert p.parent == state and p.name.startswith("ivm_")
        s.close(drop=True)
    assert w.execute("SELECT count(*) FROM r").fetchone()[0] == 4
    assert list(state.iterdir()) == []


def test_conninfo_strings_pg_environment_and_one_identity(pg_cluster, db, tmp_path, monkeypatch):
    url, w, _ = db
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    dbname = conninfo_to_dict(url)["dbname"]
    conninfo = f"host=127.0.0.1 port={pg_cluster.port} user={pg_cluster.user} dbname={dbname} sslmode=disable"
    assert is_postgres_target(conninfo) and is_postgres_target(url) and is_postgres_target("")
    assert not is_postgres_target("shop.duckdb") and not is_postgres_target(None)
    s = ivm_layer.connect(url)
    assert isinstance(s, PostgresSession)
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM r")
    first = s.state_dir
    s.close()
    w.execute("INSERT INTO r VALUES (4, 0, 0)")
    spellings = [conninfo, f"postgres://{pg_cluster.user}@localhost:{pg_cluster.port}/{dbname}",
                 f"PostgreSQL+psycopg://{pg_cluster.user}@127.0.0.1:{pg_cluster.port}/{dbname}?application_name=x"]
    for target in spellings:
        with warnings.catch_warnings():
            warnings.simplefilter("error")       # a resume of the same state, not a rebuild
            s = ivm_layer.connect(target)
        assert s.state_dir == first and s.views == ["v"]
        s.sync()
        assert sorted(r[0] for r, _ in s.view("v").rows()) == [1, 2, 3, 4]
        s.close()
    # all parameters from PG* variables, as psql with no arguments
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", str(pg_cluster.port))
    monkeypatch.setenv("PGUSER", pg_cluster.user)
    monkeypatch.setenv("PGDATABASE", dbname)
    monkeypatch.setenv("PGOPTIONS", "-c search_path=public")
    with ivm_layer.connect("") as s:
        assert s.state_dir == first and s.views == ["v"]
        assert s.execute("SHOW search_path").fetchone() == ("public",)
        s.close(drop=True)


@pytest.mark.parametrize("target", [
    "postgresql://app:s3cr3t-pw@127.0.0.1:1/shop",
    "postgresql://app@127.0.0.1:1/shop?password=s3cr3t-pw",
    "postgresql+psycopg://app:s3cr3t-pw@127.0.0.1:1/shop",
    "PostgreSQL://app:s3cr3t-pw@127.0.0.1:1/shop",
    "postgresql+nodriver://app:s3cr3t-pw@127.0.0.1:1/shop",
    "postgresql://app:s3cr3t-pw@127.0.0.1:1/shop?bogus_param=1",
    "host=127.0.0.1 port=1 user=app password=s3cr3t-pw dbname=shop",
    "host=127.0.0.1 port=1 password='s3cr3t-pw' dbname=shop bogus=1",
])
def test_passwords_never_appear_in_errors(target):
    with pytest.raises(IVMError) as ei:
        ivm_layer.connect(target, reconnect_seconds=0)
    text = f"{ei.value} {ei.value.__cause__ or ''} {ei.value.__context__ or ''}"
    assert "s3cr3t" not in text
    with pytest.raises(ConnectionTargetError if "nodriver" in target else IVMError):
        ivm_layer.connect(target, reconnect_seconds=0)


def test_every_value_type_survives_the_checkpoint(pg_url, tmp_path):
    w = psycopg.connect(pg_url, autocommit=True)
    w.execute("CREATE TABLE v8 (id int, ts timestamptz, t timestamp, d date, tm time, iv interval, j jsonb, "
              "u uuid, arr int[], tags text[], f float8, n numeric(12,2), b bytea, ok bool)")
    w.execute("ALTER TABLE v8 REPLICA IDENTITY FULL")
    w.execute("""INSERT INTO v8 VALUES
        (1, '2024-03-01 10:00:00.123456+05:30', '2024-03-01 10:00', '2024-02-29', '23:59:59.5', '1 day 02:03:04.5',
         '{"b": [1, 2.5, null], "a": "x"}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{1,NULL,3}', '{"a b","c"}',
         'NaN', 12.50, '\\x00ff', true),
        (2, '1999-12-31 23:59:59+00', NULL, NULL, NULL, '-3 mons', '[]', NULL, '{}', NULL, '-Infinity', -0.01, '', false),
        (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1e308, NULL, NULL, NULL)""")
    q = "SELECT * FROM v8"
    state = tmp_path / "state"
    with ivm_layer.connect(pg_url, state_dir=state) as s:
        s.execute(f"CREATE INCREMENTAL VIEW allv AS {q}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # resumed from the typed-JSON checkpoint
        s = ivm_layer.connect(pg_url, state_dir=state)
    w.execute("UPDATE v8 SET id = id + 10")                  # every row's old image must match
    s.sync()
    def norm(row):       # NaN as a marker (NaN != NaN), arrays as tuples, jsonb as its text
        return tuple("NaN" if isinstance(v, float) and math.isnan(v) else
                     tuple(v) if isinstance(v, list) else v for v in row)

    cols = [d.name for d in w.execute(q + " LIMIT 0").description]
    oracle_q = "SELECT " + ", ".join(f"{c}::text" if c == "j" else c for c in cols) + " FROM v8"
    want = Counter(norm(r) for r in w.execute(oracle_q).fetchall())
    assert Counter(norm(r) for r in bag(s, "allv").elements()) == want and sum(want.values()) == 3
    s.close(drop=True)
    w.close()


def test_password_from_pgpass_never_stored_or_printed(pg_cluster, pg_url, tmp_path, monkeypatch):
    """A role with scram authentication: the password comes from a pgpass file (libpq reads
    it for every connection the session opens, the replication ones too); it appears in no
    state file and in no error."""
    dbname = conninfo_to_dict(pg_url)["dbname"]
    hba = pg_cluster.data / "pg_hba.conf"
    line = "host all ivm_pw 127.0.0.1/32 scram-sha-256\nhost replication ivm_pw 127.0.0.1/32 scram-sha-256\n"
    original = hba.read_text()
    with psycopg.connect(pg_url, autocommit=True) as w:
        w.execute("SET password_encryption = 'scram-sha-256'")
        w.execute("CREATE ROLE ivm_pw LOGIN REPLICATION SUPERUSER PASSWORD 'pw-Secr3t-42'")
        w.execute("CREATE TABLE r (a int)")
        w.execute("ALTER TABLE r REPLICA IDENTITY FULL")
        hba.write_text(line + original)
        w.execute("SELECT pg_reload_conf()")
    try:
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"127.0.0.1:{pg_cluster.port}:*:ivm_pw:pw-Secr3t-42\n")
        passfile.chmod(0o600)
        monkeypatch.setenv("PGPASSFILE", str(passfile))
        target = f"host=127.0.0.1 port={pg_cluster.port} user=ivm_pw dbname={dbname}"
        state = tmp_path / "state"
        with ivm_layer.connect(target, state_dir=state) as s:
            s.execute("CREATE INCREMENTAL VIEW v AS SELECT a FROM r")
            s.execute("INSERT INTO r VALUES (1)")
            assert s.execute("SELECT * FROM v").fetchall() == [(1,)]
            assert "Secr3t" not in s.url + s.explain("v")
            s.close(drop=False)
        for p in state.iterdir():
            assert b"Secr3t" not in p.read_bytes()
        monkeypatch.delenv("PGPASSFILE")
        wrong = f"postgresql://ivm_pw:wrong-Secr3t-pw@127.0.0.1:{pg_cluster.port}/{dbname}"
        with pytest.raises(IVMError, match="password authentication failed") as ei:
            ivm_layer.connect(wrong, state_dir=state, reconnect_seconds=0)
        assert "Secr3t" not in str(ei.value)
        monkeypatch.setenv("PGPASSFILE", str(passfile))
        with ivm_layer.connect(target, state_dir=state) as s:
            s.close(drop=True)
    finally:
        hba.write_text(original)
        with psycopg.connect(pg_url, autocommit=True) as w:
            w.execute("SELECT pg_reload_conf()")
