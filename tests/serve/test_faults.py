"""Faults: kill -9 under writers and subscribers and an exact restart; clients that vanish
mid-result, mid-COPY and mid-transaction leave no lock and no half-applied change; wrong
passwords, non-loopback listening without auth and SQL injection through view names are
refused; TLS, connection limits, statement timeouts and SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time

import psycopg
import pytest
import workload
from serve_process import ROOT, ServeProcess

from ivm_layer.serve import codec
from ivm_layer.serve import messages as m


def _exact(url: str, mode: str = "duckdb") -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS sync_marker (x INT)")
        c.execute("INSERT INTO sync_marker VALUES (1)")     # proxy: the next view read waits for the stream
        for name, sql in workload.ORACLE.items():
            assert workload.norm(c.execute(f"SELECT * FROM {name}").fetchall()) == \
                workload.norm(c.execute(sql).fetchall()), name
        for acc in (0, 7):                                   # parameterized views: both modes
            assert workload.norm(c.execute("SELECT * FROM by_acc WHERE acc = %s", (acc,)).fetchall()) == \
                workload.norm(c.execute(workload.PARAM_ORACLE.format(acc=acc)).fetchall())


def _raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(codec.frontend(m.Startup(m.PROTOCOL_V3, {"user": "ivm", "database": "shop"})))
    buf = b""
    while not any(k == "Z" for k, _ in codec.backend_messages(buf)):
        buf += s.recv(65536)
    return s


@pytest.mark.parametrize("mode", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_kill_9_under_writers_and_subscribers_then_an_exact_restart(tmp_path, mode, request):
    if mode == "duckdb":
        db, args = str(tmp_path / "k.duckdb"), []
    else:
        db = request.getfixturevalue("pg_cluster").create_database("kill")
        args = ["--set-replica-identity", "--state-dir", str(tmp_path / "state")]
    srv = ServeProcess(db, *args, log=tmp_path / "log").start()
    srv.mode = mode
    workload.setup(srv.url(), parameterized=True)
    stop = threading.Event()
    failures = []

    def writer(seed: int) -> None:
        while not stop.is_set():
            try:
                workload.writer(srv.url(), seed, 10, failures)
            except Exception:  # noqa: BLE001 - the server dies under it
                pass
            seed += 1000

    def subscriber() -> None:
        try:
            with psycopg.connect(srv.url(), autocommit=True) as c:
                for _ in c.cursor().stream("SUBSCRIBE acc_totals"):
                    if stop.is_set():
                        return
        except Exception:  # noqa: BLE001
            pass
    threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(4)]
    threads += [threading.Thread(target=subscriber, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(2)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join(30)
    again = ServeProcess(db, *args, log=tmp_path / "log")
    again.port = srv.port
    with again:
        _exact(again.url(), mode)
        workload.run_writers(again.url(), clients=4, statements=8, seed=5)
        _exact(again.url(), mode)
        # SIGTERM with a subscriber attached: a SUBSCRIBE never ends, so it is not waited for
        first = threading.Event()
        ended: list = []

        def follower() -> None:
            try:
                with psycopg.connect(again.url(), autocommit=True) as c:
                    for _ in c.cursor().stream("SUBSCRIBE acc_totals"):
                        first.set()
            except psycopg.Error as e:
                ended.append(e)
        t = threading.Thread(target=follower, daemon=True)
        t.start()
        assert first.wait(30)
        t0 = time.monotonic()
        assert again.stop() == 0
        assert time.monotonic() - t0 < 8          # not the 10 s grace for running statements
        t.join(10)
        assert ended and isinstance(ended[0], psycopg.errors.AdminShutdown)


@pytest.mark.slow
def test_sigterm_finishes_running_statements_and_restarts_exact(tmp_path):
    db = str(tmp_path / "t.duckdb")
    srv = ServeProcess(db, "--shutdown-grace", "20", log=tmp_path / "log").start()
    workload.setup(srv.url())
    result = {}

    def slow() -> None:
        with psycopg.connect(srv.url(), autocommit=True) as c:
            result["n"] = c.execute("SELECT count(*) FROM range(300000000) t(i) WHERE hash(i) % 7 = 0").fetchone()[0]
    t = threading.Thread(target=slow)
    t.start()
    time.sleep(1.0)
    srv.proc.send_signal(signal.SIGTERM)
    t.join(60)
    assert result.get("n", 0) > 0           # the running statement finished
    assert srv.proc.wait(60) == 0
    with ServeProcess(db, log=tmp_path / "log") as again:
        _exact(again.url())


def test_clients_that_vanish_leave_no_lock_and_no_half_applied_change(served):
    workload.setup(served.url())
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("INSERT INTO trans SELECT 100000 + i, i % 20, 70, 'bulk' FROM range(20000) t(i)")
        before = c.execute("SELECT count(*) FROM trans").fetchone()[0]
    # mid-result: read a little of a big result, then vanish
    s = _raw(served.port)
    s.sendall(codec.frontend(m.Query("SELECT * FROM big_trans")))
    s.recv(4096)
    s.close()
    # mid-COPY: start a COPY into a tracked table, send part of it, vanish
    s = _raw(served.port)
    s.sendall(codec.frontend(m.Query("COPY trans FROM STDIN")))
    time.sleep(0.3)
    s.sendall(codec.frontend(m.CopyData(b"".join(f"{200000 + i}\t1\t1\tcopy\n".encode() for i in range(1000)))))
    s.close()
    # mid-transaction: write tracked tables in a block, vanish without COMMIT
    s = _raw(served.port)
    s.sendall(codec.frontend(m.Query("BEGIN; INSERT INTO trans VALUES (300000, 7, 99, 'lost'); "
                                      "UPDATE trans SET amt = 0 WHERE acc = 3")))
    time.sleep(0.5)
    s.close()
    # nobody holds anything: a writer goes through at once, and no change of theirs is visible
    t0 = time.monotonic()
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("SET statement_timeout = '10s'")
        c.execute("INSERT INTO trans VALUES (400000, 7, 1, 'after')")
        c.execute("UPDATE trans SET amt = amt + 1 WHERE id = 400000")
        assert c.execute("SELECT count(*) FROM trans").fetchone()[0] == before + 1
        assert c.execute("SELECT count(*) FROM trans WHERE id = 300000 OR note = 'copy'").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM trans WHERE acc = 3 AND amt = 0").fetchone()[0] == \
            c.execute("SELECT count(*) FROM trans WHERE acc = 3 AND amt = 0 AND note <> 'lost'").fetchone()[0]
    assert time.monotonic() - t0 < 10
    _exact(served.url())


def test_injection_through_view_names_is_refused(served):
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS victim (x INT)")
        c.execute("CREATE INCREMENTAL VIEW IF NOT EXISTS \"odd; name\" AS SELECT x FROM victim")
        attempts = [
            'SUBSCRIBE "v; DROP TABLE victim; --"',
            "SUBSCRIBE v'; DROP TABLE victim; --",
            'EXPLAIN INCREMENTAL VIEW "x""; DROP TABLE victim; --"',
            "SELECT * FROM by_acc WHERE acc = '1; DROP TABLE victim'",
            "COPY (SUBSCRIBE \"a\") TO STDOUT; DROP TABLE victim",
        ]
        for sql in attempts:
            with pytest.raises(psycopg.Error):
                c.execute(sql)
        # the odd name is served, quoted wherever it is used
        c.execute("INSERT INTO victim VALUES (1)")
        assert c.execute('SELECT * FROM "odd; name"').fetchall() == [(1,)]
        lines = c.execute('EXPLAIN INCREMENTAL VIEW "odd; name"').fetchall()
        assert len(lines) > 1
        assert c.execute("SELECT count(*) FROM victim").fetchone() == (1,)


def test_statement_timeout_and_cancel(served):
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("SET statement_timeout = '300ms'")
        t0 = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            c.execute("SELECT sum(hash(a.i * b.i)) FROM range(100000) a(i), range(100000) b(i)")
        assert time.monotonic() - t0 < 10
        c.execute("RESET statement_timeout")
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_wrong_passwords_tls_and_connection_limits(tmp_path):
    users = tmp_path / "users"
    users.write_text(f"alice:wonderland\n# a comment\n{_scram_line('bob', 'builder')}\n")
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    log = tmp_path / "log"
    with ServeProcess(None, "--auth", "scram-sha-256", "--users", str(users), "--tls-cert", str(cert),
                      "--tls-key", str(key), "--max-connections", "2", log=log) as srv:
        for user, pw in (("alice", "wonderland"), ("bob", "builder")):
            with psycopg.connect(srv.url(user, password=pw, sslmode="require")) as c:
                assert c.execute("SELECT current_user").fetchone() == (user,)
                assert c.pgconn.ssl_in_use
        for user, pw in (("alice", "nope"), ("mallory", "wonderland"), ("bob", "Builder")):
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(srv.url(user, password=pw, sslmode="prefer"))
        a = psycopg.connect(srv.url("alice", password="wonderland"))
        b = psycopg.connect(srv.url("alice", password="wonderland"))
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            psycopg.connect(srv.url("alice", password="wonderland"))
        a.close()
        b.close()
    assert "wonderland" not in log.read_text() and "builder" not in log.read_text()


def _scram_line(user: str, password: str) -> str:
    from ivm_layer.serve.auth import format_verifier, verifier

    return f"{user}:{format_verifier(verifier(password))}"


def test_non_loopback_without_auth_is_refused(tmp_path):
    res = subprocess.run([sys.executable, "-m", "ivm_layer", "serve", "--host", "0.0.0.0", "--port", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "refusing to listen on 0.0.0.0 without authentication" in res.stderr
    res = subprocess.run([sys.executable, "-m", "ivm_layer", "serve", "--host", "0.0.0.0", "--port", "0",
                          "--auth", "scram-sha-256"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 1 and "needs --users FILE or IVM_SERVE_PASSWORD" in res.stderr


def test_a_reader_that_stops_reading_never_blocks_writers(served):
    """A client reads a little of a big served-view result and stops reading (its socket stays
    open): the server is back-pressured (bounded buffers), a writer of the view's table still
    commits at once (the stalled result is spilled), and the reader, once it reads again, gets
    the whole result as of its start."""
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("CREATE TABLE wide (id BIGINT, pad VARCHAR)")
        c.execute("INSERT INTO wide SELECT i, repeat('x', 100) || i FROM range(30000) t(i)")
        c.execute("CREATE INCREMENTAL VIEW wide_v AS SELECT id, pad FROM wide WHERE id >= 0")
    s = _raw(served.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)     # fixed: no window autotuning
    s.sendall(codec.frontend(m.Query("SELECT * FROM wide_v")))
    got = bytearray(s.recv(4096))
    time.sleep(0.5)                                  # ~3.5 MB of rows: more than the buffers hold (~1 MB)
    t0 = time.monotonic()
    with psycopg.connect(served.url(), autocommit=True) as c:
        c.execute("SET statement_timeout = '20s'")
        c.execute("INSERT INTO wide VALUES (-1, 'not in the view'), (30000, 'new')")
        assert c.execute("SELECT count(*) FROM wide_v").fetchone() == (30001,)
    assert time.monotonic() - t0 < 10
    s.settimeout(30)
    while got[-6:-1] != b"Z\x00\x00\x00\x05":          # until ReadyForQuery
        chunk = s.recv(1 << 20)
        assert chunk, "the server closed the stalled reader's connection"
        got += chunk
    s.close()
    msgs = list(codec.backend_messages(bytes(got)))
    assert sum(1 for k, _ in msgs if k == "D") == 30000      # as of the read's start
    assert any(k == "C" and b"SELECT 30000" in body for k, body in msgs)
