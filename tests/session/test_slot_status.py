"""Issue 29 case 6: WAL held by the slots of closed PostgreSQL sessions is reported — by
``ivm status`` (with a warning, guidance and a way to drop a closed session's slots), by a
warning when the session opens again, and in ``info()`` / ``\\dv`` — on a real PostgreSQL 15."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections import Counter

import psycopg
import pytest

import ivm_layer
from ivm_layer.session.postgres.state import LagWarning


def _status(url, *args):
    return subprocess.run([sys.executable, "-m", "ivm_layer", "status", url, *args],
                          capture_output=True, text=True, timeout=120)


def test_case6_wal_held_by_a_closed_sessions_slots_is_reported_and_can_be_freed(pg_url, tmp_path):
    with psycopg.connect(pg_url, autocommit=True) as w:
        w.execute("DROP TABLE IF EXISTS big, other")
        w.execute("CREATE TABLE big (a int, pad text)")
        w.execute("CREATE TABLE other (a int, pad text)")
        state = tmp_path / "state"
        with ivm_layer.connect(pg_url, session="walc6", state_dir=state, set_replica_identity=True) as s:
            s.execute("CREATE INCREMENTAL VIEW v6 AS SELECT a FROM big")
            info = s.info("v6")[0]
            assert isinstance(info.wal_retained_bytes, int)
        # the session is closed: unrelated writes still pile up WAL behind its slot
        w.execute("INSERT INTO other SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g")
        w.execute("INSERT INTO big SELECT g, '' FROM generate_series(1, 10) g")

        r = _status(pg_url, "--warn-mb", "1")
        assert r.returncode == 3, r.stderr
        line = next(ln for ln in r.stdout.splitlines() if "session walc6, view v6" in ln)
        assert " no " in line and "MiB" in line
        assert "max_slot_wal_keep_size = " in r.stdout
        assert "WARNING: slot" in r.stderr and "walc6" in r.stderr and "HINT:" in r.stderr
        assert "--drop-slots SESSION" in r.stderr and "max_slot_wal_keep_size" in r.stderr
        assert _status(pg_url, "--warn-mb", "100000").returncode == 0

        with pytest.warns(LagWarning, match=r"held [\d,]+ MiB of WAL while session 'walc6' was closed"):
            s = ivm_layer.connect(pg_url, session="walc6", state_dir=state, lag_warning_bytes=1 << 20)
        try:
            s.sync()
            assert Counter(r for r, k in s.view("v6").rows() for _ in range(k)) == Counter((i,) for i in range(1, 11))
            busy = _status(pg_url, "--drop-slots", "walc6")
            assert busy.returncode == 1 and "is open" in busy.stderr
        finally:
            s.close()

        w.execute("INSERT INTO other SELECT g, repeat('x', 200) FROM generate_series(1, 5000) g")
        dropped = _status(pg_url, "--drop-slots", "walc6")
        assert dropped.returncode == 0, dropped.stderr
        assert "dropped slot" in dropped.stdout and "rebuilt from a fresh snapshot" in dropped.stdout
        assert "walc6" not in _status(pg_url).stdout
        w.execute("INSERT INTO big VALUES (11, '')")
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            s = ivm_layer.connect(pg_url, session="walc6", state_dir=state)
        try:
            assert any("replication slot is missing" in str(x.message) for x in rec)
            assert Counter(r for r, k in s.view("v6").rows() for _ in range(k)) == Counter((i,) for i in range(1, 12))
            s.execute("DROP VIEW v6")
        finally:
            s.close()
