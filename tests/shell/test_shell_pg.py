"""``ivm shell`` over PostgreSQL (a throwaway PG15 cluster, ``pg_url`` fixture): ``\\watch`` fed
by writes from a second connection, ``\\dv`` with replication lag, cancelling a statement,
and libpq's ``PG*`` environment variables for a bare ``postgresql://`` URL."""

from __future__ import annotations

import collections
import re
import time
from urllib.parse import urlparse

import pexpect
import psycopg
import pytest
from test_shell import IVM, prompt, run_shell, shell_env


@pytest.fixture
def pg_repl(pg_url, tmp_path):
    child = pexpect.spawn(str(IVM), ["shell", pg_url], env=shell_env(tmp_path), encoding="utf-8",
                          dimensions=(40, 160), timeout=30)
    child.logfile_read = open(tmp_path / "pty.log", "w")  # noqa: SIM115 - closed below
    yield child, urlparse(pg_url).path.lstrip("/")
    child.close(force=True)
    child.logfile_read.close()


def test_watch_streams_writes_of_another_connection(pg_repl, pg_url):
    c, db = pg_repl
    c.expect_exact("(PostgreSQL, ")
    prompt(c, db)
    c.send("CREATE TABLE orders (id INT PRIMARY KEY, cust INT, amount INT);"
           " ALTER TABLE orders REPLICA IDENTITY FULL;"
           " CREATE TABLE cust (id INT PRIMARY KEY, name TEXT); ALTER TABLE cust REPLICA IDENTITY FULL;"
           " INSERT INTO cust VALUES (1, 'ann'), (2, NULL); INSERT INTO orders VALUES (1, 1, 10);\r")
    c.expect_exact("INSERT 0 1")
    prompt(c, db)
    definition = "SELECT o.id, c.name, o.amount FROM orders o JOIN cust c ON o.cust = c.id"
    c.send(f"CREATE INCREMENTAL VIEW big AS {definition};\r")
    c.expect_exact("CREATE INCREMENTAL VIEW")
    prompt(c, db)
    c.send("\\dv\r")
    c.expect(r"Name \|\s+Kind\s+\| Rows \|\s+Class\s+\|\s+Tables\s+\| Lag bytes \| Lag seconds")
    c.expect(r"big\s+\| incremental \|\s+1 \|[^|]+\| orders, cust\s+\|\s+\d+ \|\s+[0-9.]+")
    prompt(c, db)
    c.send("\\d orders\r")
    c.expect(r'Table "public.orders"\s+Column \|\s+Type\s+\| Nullable \| Default')
    c.expect(r"id\s+\| integer \| not null")
    prompt(c, db)
    c.send("\\explain big\r")
    c.expect_exact("GJT")
    prompt(c, db)
    c.send("\\watch big\r")
    c.expect_exact("Watching big (id, name, amount)")
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute("INSERT INTO orders VALUES (2, 2, 20), (3, 1, 30)")
        other.execute("UPDATE orders SET amount = 11 WHERE id = 1")
        other.execute("DELETE FROM orders WHERE id = 3")
        expected = collections.Counter(other.execute(definition).fetchall())
    # the shell prints the changes as the replication stream delivers them (a poll may
    # consolidate several transactions): they must add up to what PostgreSQL computes
    changes: collections.Counter = collections.Counter({(1, "ann", 10): 1})  # the state before
    lines = 0
    while +changes != expected:
        c.expect(r"([+-]) (\d+) \| (\w+) \| (\d+)(?:   \(×(\d+)\))?\r\n")
        sign, oid, name, amount, times = c.match.groups()
        row = (int(oid), None if name == "NULL" else name, int(amount))
        changes[row] += int(times or 1) * (1 if sign == "+" else -1)
        lines += 1
    c.sendintr()
    c.expect_exact(f"Stopped watching big ({lines} changes).")
    prompt(c, db)
    c.send("SELECT count(*) AS n FROM big;\r")
    c.expect(r"\bn\s+-+\s+2\s+\(1 row\)")
    prompt(c, db)
    # Ctrl-C cancels a running statement on the server; the session goes on
    c.send("SELECT pg_sleep(60);\r")
    with psycopg.connect(pg_url, autocommit=True) as other:  # wait until the server runs it
        deadline = time.monotonic() + 30
        while not other.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                "AND query LIKE 'SELECT pg_sleep(60)%'").fetchone()[0]:
            assert time.monotonic() < deadline, "the statement did not start"
            time.sleep(0.05)
    c.sendintr()
    c.expect_exact("Cancel request sent")
    c.expect_exact("canceling statement due to user request")
    prompt(c, db)
    c.send("SELECT name FROM big ORDER BY id;\r")
    c.expect(r"name\s+-+\s+ann\s+NULL\s+\(2 rows\)")
    prompt(c, db)
    c.sendeof()
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0


def test_pg_environment_masking_and_errors(pg_url, tmp_path):
    u = urlparse(pg_url)
    db = u.path.lstrip("/")
    env = {"PGHOST": u.hostname, "PGPORT": str(u.port), "PGUSER": u.username, "PGDATABASE": db}
    import subprocess

    base = shell_env(tmp_path)
    for url in ("postgresql://", f"postgresql:///{db}"):
        r = subprocess.run([str(IVM), "shell", url, "--csv", "-c", "SELECT current_database() AS db"],
                           env={**base, **env}, check=False, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == ["db", db]
    # a password in the URL (the test cluster trusts loopback, so it is not checked) and in
    # an error message never shows
    secret_url = pg_url.replace(f"{u.username}@", f"{u.username}:hunter2@")
    r = run_shell(tmp_path, secret_url, "-c", "\\conninfo", "-c", "SELECT 'postgresql://a:hunter2@h/d'::int")
    assert r.returncode == 1
    assert "hunter2" not in r.stdout + r.stderr
    assert f"{u.username}:****@{u.hostname}:{u.port}/{db}" in r.stdout
    assert "postgresql://a:****@h/d" in r.stderr
    # connection options of PostgreSQL sessions
    r = run_shell(tmp_path, pg_url, "--set-replica-identity", "--session", "shell_test", "-c",
                  "CREATE TABLE plain (a INT PRIMARY KEY); INSERT INTO plain VALUES (1), (2);"
                  "CREATE INCREMENTAL VIEW pv AS SELECT a FROM plain WHERE a > 1", "-c", "\\dv pv")
    assert r.returncode == 0, r.stderr
    assert re.search(r"pv\s+\| incremental \|\s+1 \|", r.stdout)
    r = run_shell(tmp_path, "--set-replica-identity", "-c", "SELECT 1")
    assert r.returncode == 1 and "--set-replica-identity: only for PostgreSQL URLs" in r.stderr
    # an error on the server: position and exit status like psql
    r = run_shell(tmp_path, pg_url, "--on-error-stop", "-c", "SELECT 1; SELECT * FROM missing; SELECT 2")
    assert r.returncode == 1                  # psql -v ON_ERROR_STOP=1 -c: 1 (3 is for scripts)
    assert re.search(r"ivm:-c:1:11: ERROR:  .*relation \"missing\" does not exist", r.stderr)


def test_state_dir_warnings_notices_and_hints(pg_url, tmp_path):
    """--state-dir resumes a view a Python program made (no rebuild); without it the rebuild
    is said once as a psql-style WARNING line (no Python warning, no file path); server
    notices print as NOTICE lines; the REPLICA IDENTITY hint names the shell's option."""
    import ivm_layer

    state = tmp_path / "state"
    s = ivm_layer.connect(pg_url, state_dir=state, set_replica_identity=True)
    s.execute("CREATE TABLE o (id INT PRIMARY KEY, v INT)")
    s.execute("CREATE INCREMENTAL VIEW ov AS SELECT id, v FROM o WHERE v > 1")
    s.execute("INSERT INTO o VALUES (1, 5), (2, 0)")
    s.close()
    r = run_shell(tmp_path, pg_url, "--state-dir", str(state), "--csv", "-c", "SELECT id, v FROM ov")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines() == ["id,v", "1,5"]
    r = run_shell(tmp_path, pg_url, "--csv", "-c", "SELECT id, v FROM ov",
                  "-c", "DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$")
    assert r.returncode == 0 and r.stdout.splitlines()[:2] == ["id,v", "1,5"]
    lines = r.stderr.splitlines()
    warned = [ln for ln in lines if ln.startswith("WARNING:  incremental view 'ov'")]
    assert len(warned) == 1 and warned[0].endswith("rebuilding it from a fresh snapshot"), r.stderr
    assert "NOTICE:  hello 42" in lines
    assert "UserWarning" not in r.stderr and ".py:" not in r.stderr and len(lines) == 2, r.stderr
    r = run_shell(tmp_path, pg_url, "--state-dir", str(state), "-c", "CREATE TABLE nori (a INT)",
                  "-c", "CREATE INCREMENTAL VIEW nv AS SELECT a FROM nori")
    assert r.returncode == 1 and "ivm shell --set-replica-identity" in r.stderr


def test_copy_both_ways_through_a_session_reaches_the_view(pg_url, tmp_path):
    (tmp_path / "in.csv").write_text("id,v\n3,30\n4,0\n5,\n")
    r = run_shell(tmp_path, pg_url, "--set-replica-identity", "--state-dir", str(tmp_path / "st"),
                  "-c", "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 10)",
                  "-c", "CREATE INCREMENTAL VIEW big AS SELECT id, v FROM t WHERE v > 5",
                  "-c", f"\\copy t from '{tmp_path / 'in.csv'}' with csv header",
                  "-c", "SELECT count(*) AS n FROM big",
                  "-c", f"\\copy (SELECT * FROM big ORDER BY id) to '{tmp_path / 'out.tsv'}'")
    assert r.returncode == 0, r.stderr
    assert "COPY 3" in r.stdout and "COPY 2" in r.stdout
    assert re.search(r"\bn\s+-+\s+2\s+\(1 row\)", r.stdout)
    assert (tmp_path / "out.tsv").read_text() == "1\t10\n3\t30\n"


def test_client_mode_is_a_plain_psql_like_client(pg_url, tmp_path):
    """--client: statements go to the server unchanged over one connection; psql's catalog
    listings; no session (no slot, no ivm schema); incremental-view commands say they need
    ivm serve."""
    (tmp_path / "data.tsv").write_text("1\tann\n2\t\\N\n")
    r = run_shell(tmp_path, pg_url, "--client",
                  "-c", "CREATE TABLE c1 (a INT, b TEXT); CREATE SCHEMA side; "
                        "CREATE FUNCTION twice(x int) RETURNS int LANGUAGE sql AS 'SELECT 2 * x'",
                  "-c", f"\\copy c1 from '{tmp_path / 'data.tsv'}'",
                  "-c", "\\copy (SELECT * FROM c1 ORDER BY a) to stdout with csv header",
                  "-c", "\\dt", "-c", "\\dn", "-c", "\\df tw*", "-c", "\\l", "-c", "\\conninfo")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "COPY 2" in out and "a,b\n1,ann\n2,\n" in out
    assert re.search(r"public \| c1\s+\| table \|", out)
    assert re.search(r"List of schemas.*\n side\s+\|", out, re.DOTALL)
    assert re.search(r"public \| twice \| integer\s+\| x integer\s+\| func", out)
    db = urlparse(pg_url).path.lstrip("/")
    assert re.search(rf"List of databases\n.*\n.*\n(?:.*\n)* {db}\s+\|", out)
    assert f'You are connected to database "{db}"' in out and "plain client" in out
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_replication_slots "
                            "WHERE database = current_database()").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'ivm'").fetchone()[0] == 0
    r = run_shell(tmp_path, pg_url, "--client", "-c", "\\dv")
    assert r.returncode == 1 and "\\dv needs ivm serve" in r.stderr
    r = run_shell(tmp_path, pg_url, "--client", "-c", "SELECT 1 AS one; SELECT 1/0; SELECT 3 AS three")
    assert r.returncode == 1 and "one" in r.stdout and "three" not in r.stdout
    assert "division by zero" in r.stderr
    r = run_shell(tmp_path, "--client", "-c", "SELECT 1")
    assert r.returncode == 1 and "--client: only for PostgreSQL URLs" in r.stderr
