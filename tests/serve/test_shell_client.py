"""``ivm shell postgresql://…`` against ``ivm serve`` is just another client: statements,
``\\dv``, ``\\explain v`` and ``\\watch v`` (over SUBSCRIBE) through the wire."""

from __future__ import annotations

import os
import subprocess
import sys

import pexpect
import psycopg
from serve_process import ROOT


def test_shell_is_a_client_of_ivm_serve(served):
    url = served.url()
    res = subprocess.run([sys.executable, "-m", "ivm_layer", "shell", url,
                          "-c", "CREATE TABLE sh (a INT, b INT)", "-c", "INSERT INTO sh VALUES (1, 2), (1, 3), (2, 5)",
                          "-c", "CREATE INCREMENTAL VIEW sh_v AS SELECT a, sum(b) AS s FROM sh GROUP BY a",
                          "-c", "SELECT * FROM sh_v ORDER BY a", "-c", r"\dv", "-c", r"\explain sh_v"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert " 1 | 5" in res.stdout and " 2 | 5" in res.stdout
    assert "sh_v" in res.stdout and "q-hierarchical" in res.stdout and "GJT" in res.stdout
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
