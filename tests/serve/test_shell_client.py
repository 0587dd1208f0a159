"""``ivm shell postgresql://…`` against ``ivm serve`` is just another client (the shell's
client mode, :mod:`ivm_layer.shell.client`, chosen by the ``ivm_version`` setting the server
reports): statements, ``\\dv``, ``\\explain v`` and ``\\watch v`` (over SUBSCRIBE) through the
wire, in both modes of the server."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pexpect
import psycopg
import pytest
from serve_process import ROOT


def test_server_reports_ivm_version(any_served):
    from ivm_layer import __version__

    with psycopg.connect(any_served.url(), autocommit=True) as c:
        assert c.info.parameter_status("ivm_version") == __version__
        assert c.execute("SHOW ivm_version").fetchone() == (__version__,)
        with c.cursor() as cur:        # extended protocol: Parse/Describe/Execute
            cur.execute("SHOW ivm_version", prepare=True)
            assert cur.fetchone() == (__version__,)
        if any_served.mode == "duckdb":
            with pytest.raises(psycopg.errors.CantChangeRuntimeParam):
                c.execute("SET ivm_version = '0'")


def test_shell_is_a_client_of_ivm_serve(any_served):
    url = any_served.url()
    res = subprocess.run([sys.executable, "-m", "ivm_layer", "shell", url, "-c", r"\conninfo",
                          "-c", "CREATE TABLE sh (a INT, b INT)", "-c", "INSERT INTO sh VALUES (1, 2), (1, 3), (2, 5)",
                          "-c", "CREATE INCREMENTAL VIEW sh_v AS SELECT a, sum(b) AS s FROM sh GROUP BY a",
                          "-c", "SELECT * FROM sh_v ORDER BY a", "-c", r"\dv", "-c", r"\explain sh_v",
                          "-c", r"\d", "-c", r"\d SH_V"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "client of ivm serve" in res.stdout      # the shell's client mode, not a session of its own
    assert " 1 | 5" in res.stdout and " 2 | 5" in res.stdout
    assert "sh_v" in res.stdout and "q-hierarchical" in res.stdout and "GJT" in res.stdout
    # \d lists the server's incremental views as such (they were "view" before), and \d v says so
    assert re.search(r"\bsh\s+\| table\b", res.stdout), res.stdout
    assert re.search(r"\bsh_v\s+\| incremental view\b", res.stdout), res.stdout
    assert 'Incremental view "sh_v"' in res.stdout and "rows: 2" in res.stdout, res.stdout
    # the server owns the view: another client sees it
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("SELECT s FROM sh_v WHERE a = 1").fetchone() == (5,)


def test_shell_watch_follows_subscribe(served):
    url = served.url()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS wt (a INT)")
        c.execute("CREATE INCREMENTAL VIEW IF NOT EXISTS wt_v AS SELECT a, count(*) AS n FROM wt GROUP BY a")
    child = pexpect.spawn(sys.executable, ["-m", "ivm_layer", "shell", url], cwd=str(ROOT), encoding="utf-8",
                          timeout=60, env=dict(os.environ, TERM="dumb"))
    try:
        child.expect("=>|=#|>")
        child.sendline(r"\watch wt_v")
        child.expect("Watching wt_v")
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("INSERT INTO wt VALUES (42), (42)")
        child.expect(r"\+ .*42.*2")
        child.sendcontrol("c")
        child.expect("Stopped watching wt_v")
    finally:
        child.close(force=True)
