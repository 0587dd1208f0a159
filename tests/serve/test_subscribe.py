"""SUBSCRIBE over the wire: the accumulated stream equals the view after every commit; resume
from an ivm_progress after a dropped connection loses and duplicates nothing; COPY (SUBSCRIBE)
and parameterized subscriptions; a stalled subscriber is dropped without blocking writers."""

from __future__ import annotations

import collections
import socket
import threading
import time

import psycopg
import pytest
import workload
from serve_process import ServeProcess

from ivm_layer.serve import codec
from ivm_layer.serve import messages as m


@pytest.fixture(scope="module")
def db(served):
    workload.setup(served.url())
    return served


@pytest.fixture(scope="module")
def both(any_served):
    workload.setup(any_served.url(), parameterized=any_served.mode == "duckdb")
    return any_served


class Follower(threading.Thread):
    """Reads ``SUBSCRIBE … WITH (PROGRESS)`` with psycopg's streaming mode and keeps the
    accumulated contents after each completed progress."""

    def __init__(self, url: str, statement: str):
        super().__init__(daemon=True)
        self.url, self.statement = url, statement
        self.acc: collections.Counter = collections.Counter()
        self.states: dict[int, collections.Counter] = {}
        self.last = None
        self.error = None
        self.ready = threading.Event()
        self.conn = None

    def run(self) -> None:
        try:
            self.conn = psycopg.connect(self.url, autocommit=True)
            for row in self.conn.cursor().stream(self.statement):
                self.ready.set()
                p, diff, rest = row[0], row[1], tuple(row[2:])
                if diff is None:          # the progress row closing a batch
                    self.states[p] = collections.Counter({k: v for k, v in self.acc.items() if v})
                    self.last = p
                    continue
                self.acc[rest] += diff
        except Exception as e:  # noqa: BLE001
            self.error = e
            self.ready.set()

    def wait_for(self, progress: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while (self.last is None or self.last < progress) and time.monotonic() < deadline:
            if self.error:
                raise self.error
            time.sleep(0.01)
        assert self.last is not None and self.last >= progress, (self.last, progress)

    def state_at(self, progress: int) -> collections.Counter:
        return self.states[max(p for p in self.states if p <= progress)]

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.cancel_safe()
        self.join(10)


def bag(rows) -> collections.Counter:
    return collections.Counter(tuple(r) for r in rows)


def progress(c) -> int:
    return c.execute("SHOW ivm_progress").fetchone()[0]


def test_stream_equals_the_view_after_every_commit(both):
    db = both
    f = Follower(db.url(), "SUBSCRIBE acc_totals WITH (PROGRESS)")
    f.start()
    assert f.ready.wait(20)
    with psycopg.connect(db.url(), autocommit=True) as c:
        checks = []
        for i in range(25):
            if i % 5 == 4:
                c.execute("BEGIN")
                c.execute(f"INSERT INTO trans VALUES ({900000 + i}, {i % 20}, 5, 'sub')")
                c.execute("ROLLBACK")
            else:
                c.execute(f"INSERT INTO trans VALUES ({900000 + i}, {i % 20}, {i}, 'sub'), "
                          f"({900100 + i}, {(i * 7) % 20}, 1.5, NULL)")
                c.execute(f"DELETE FROM trans WHERE id = {i * 3}")
            checks.append((progress(c), bag(c.execute("SELECT * FROM acc_totals").fetchall())))
        f.wait_for(checks[-1][0])
        for p, want in checks:
            assert f.state_at(p) == want, p
        # and with 4 concurrent writers: equal once they are done
        workload.run_writers(db.url(), clients=4, statements=25, seed=21)
        p = progress(c)
        f.wait_for(p)
        assert f.state_at(p) == bag(c.execute("SELECT * FROM acc_totals").fetchall())
    f.stop()
    f.join(10)


def test_resume_after_a_dropped_connection_loses_and_duplicates_nothing(both):
    db = both
    f = Follower(db.url(), "SUBSCRIBE big_trans WITH (PROGRESS)")
    f.start()
    assert f.ready.wait(20)
    with psycopg.connect(db.url(), autocommit=True) as c:
        c.execute("INSERT INTO trans VALUES (910001, 3, 99, 'r'), (910002, 4, 98, 'r')")
        p0 = progress(c)
        f.wait_for(p0)
        f.conn.pgconn.finish()                # the connection drops, no goodbye
        f.join(10)
        seen, acc = f.last, collections.Counter(f.states[f.last])
        for i in range(10):                   # commits while nobody listens
            c.execute(f"INSERT INTO trans VALUES ({910100 + i}, {i % 20}, {61 + i}, 'gap')")
            c.execute(f"DELETE FROM trans WHERE id = {910001 + (i % 2)}")
        g = Follower(db.url(), f"SUBSCRIBE big_trans WITH (RESUME FROM {seen}, PROGRESS)")
        g.acc = acc
        g.start()
        c.execute("INSERT INTO trans VALUES (910200, 5, 77, 'after')")
        p1 = progress(c)
        g.wait_for(p1)
        assert g.state_at(p1) == bag(c.execute("SELECT * FROM big_trans").fetchall())
        g.stop()
        g.join(10)
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            list(c.cursor().stream("SUBSCRIBE big_trans WITH (RESUME FROM 5)"))


def test_copy_subscribe_and_parameterized(db):
    with psycopg.connect(db.url(), autocommit=True) as c:
        want = bag(c.execute("SELECT id, amt, note FROM trans WHERE acc = 7").fetchall())
        got = collections.Counter()
        lines = []
        with psycopg.connect(db.url(), autocommit=True) as s:
            cur = s.cursor()
            stream = cur.stream("SUBSCRIBE by_acc WHERE acc = 7 WITH (PROGRESS)")
            first = None
            for row in stream:
                if row[1] is None:
                    first = row[0]
                    break
                got[tuple(row[2:])] += row[1]
            assert got == want
            c.execute("INSERT INTO trans VALUES (920001, 7, 1.25, 'p7'), (920002, 8, 1, 'p8')")
            for row in stream:
                if row[1] is None:
                    break
                assert row[0] > first
                got[tuple(row[2:])] += row[1]
            s.cancel_safe()
            with pytest.raises(psycopg.errors.QueryCanceled):
                for _ in stream:
                    pass
        assert got == bag(c.execute("SELECT id, amt, note FROM trans WHERE acc = 7").fetchall())
        with psycopg.connect(db.url(), autocommit=True) as s:
            with pytest.raises(psycopg.errors.QueryCanceled):
                with s.cursor().copy("COPY (SUBSCRIBE acc_totals) TO STDOUT") as copy:
                    for data in copy:
                        lines.extend(bytes(data).decode().splitlines())
                        if len(lines) >= 20 and not s.info.transaction_status == 0:
                            s.cancel_safe()
            assert s.execute("SELECT 1").fetchone() == (1,)
        assert len(lines) >= 20 and all(len(x.split("\t")) == 6 for x in lines)


def test_a_stalled_subscriber_is_dropped_and_writers_never_wait(tmp_path):
    with ServeProcess(str(tmp_path / "s.duckdb"), "--subscriber-backlog", "1000", "--socket-send-buffer", "16384",
                      log=tmp_path / "log") as srv:
        workload.setup(srv.url())
        sock = socket.create_connection(("127.0.0.1", srv.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(codec.frontend(m.Startup(m.PROTOCOL_V3, {"user": "ivm", "database": "shop"})))
        time.sleep(0.5)
        sock.recv(65536)
        sock.sendall(codec.frontend(m.Query("SUBSCRIBE big_trans")))   # and never read again
        slowest = 0.0
        with psycopg.connect(srv.url(), autocommit=True) as c:
            for i in range(8):        # 12,000 rows of changes: more than the socket and the outbox hold
                rows = ", ".join(f"({930000 + i * 1500 + j}, {j % 20}, {70 + j % 30}, 'stall')" for j in range(1500))
                t0 = time.perf_counter()
                c.execute(f"INSERT INTO trans VALUES {rows}")
                slowest = max(slowest, time.perf_counter() - t0)
            assert c.execute("SELECT count(*) FROM big_trans").fetchone()[0] == \
                c.execute(workload.ORACLE["big_trans"].replace("SELECT t.id, t.acc, t.amt, a.owner",
                                                               "SELECT count(*)")).fetchone()[0]
            # the subscriber is gone: its connection was closed, the backlog is free
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                backlog = {r[0]: r[6] for r in c.execute("SHOW INCREMENTAL VIEWS").fetchall()}
                if backlog["big_trans"] == 0:
                    break
                time.sleep(0.1)
            assert backlog["big_trans"] == 0
        assert slowest < 5.0           # a write never waited for the stalled subscriber
        sock.settimeout(20)
        closed = False
        try:
            while sock.recv(1 << 20):
                pass
            closed = True                     # EOF: the server closed the connection
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            pass
        sock.close()
        assert closed, "the stalled subscriber's connection was not closed"
        assert "SUBSCRIBE to 'big_trans' dropped" in (tmp_path / "log").read_text()
        assert srv.alive()
