"""``ivm shell`` end to end: the installed ``ivm`` binary, non-interactively (``-c``, ``-f``,
standard input) and interactively through a pseudo-terminal (pexpect), over DuckDB.

Served SELECTs are checked against DuckDB running the view's defining query in the same
shell (the oracle); the PostgreSQL side (``\\watch`` fed by a second connection, lag in
``\\dv``) is in ``test_shell_pg.py``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

IVM = Path(sys.executable).with_name("ivm")

TABLES = ("CREATE TABLE trans (id INT, acc INT, amount INT, note VARCHAR);"
          "CREATE TABLE accounts (acc INT, owner VARCHAR);")
DEFINITION = ("SELECT t.id, t.amount, a.owner, t.note FROM trans t JOIN accounts a ON t.acc = a.acc "
              "WHERE t.amount > 100")


def view_class() -> str:
    """The planner's class of DEFINITION, as ``\\dv`` and ``\\explain`` must report it."""
    import ivm_layer

    schema = {"trans": ["id", "acc", "amount", "note"], "accounts": ["acc", "owner"]}
    return ivm_layer.compile_view(DEFINITION, schema).query_class


def shell_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(tmp_path), IVM_HISTFILE=str(tmp_path / "history"), TERM="xterm",
               PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1", COLUMNS="120", LINES="40")
    for k in [k for k in env if k.startswith("PG")]:
        del env[k]
    return env


def run_shell(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    assert IVM.exists(), f"the ivm entry point is not installed next to {sys.executable}"
    return subprocess.run([str(IVM), "shell", *args], check=False, input=stdin if stdin is not None else "",
                          capture_output=True, text=True, env=shell_env(tmp_path), timeout=60)


def csv_blocks(text: str) -> list[list[list[str]]]:
    """Consecutive CSV results (each starts with its header line, given as the first row)."""
    blocks: list[list[list[str]]] = []
    for row in csv.reader(io.StringIO(text)):
        if row and row[0] == "id":
            blocks.append([])
        blocks[-1].append(row)
    return blocks


# -- non-interactive ------------------------------------------------------------------------
def test_commands_create_a_view_serve_it_and_describe_it(tmp_path):
    db = tmp_path / "app.duckdb"
    r = run_shell(tmp_path, str(db),
                  "-c", TABLES + "INSERT INTO accounts VALUES (1, 'ann'), (2, 'bob'), (3, NULL);"
                  "INSERT INTO trans VALUES (1, 1, 50, 'x'), (2, 1, 500, NULL), (3, 2, 700, 'y');"
                  f"CREATE INCREMENTAL VIEW big AS {DEFINITION};",
                  "-c", "UPDATE trans SET amount = 900 WHERE id = 1",
                  "-c", "SELECT * FROM big ORDER BY id",
                  "-c", "\\dv", "-c", "\\d big", "-c", "\\d trans", "-c", "\\explain big")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    out = r.stdout
    assert out.count("CREATE TABLE") == 2 and "INSERT 0 3" in out and "UPDATE 1" in out
    assert "CREATE INCREMENTAL VIEW\n" in out
    served = out[out.index(" id | amount"):]
    assert served.splitlines()[2:6] == ["  1 |    900 | ann   | x", "  2 |    500 | ann   | NULL",
                                        "  3 |    700 | bob   | y", "(3 rows)"]
    dv = out[out.index("List of incremental views"):].splitlines()
    assert dv[1].split("|")[0].strip() == "Name" and "Lag" not in dv[1]   # no lag on DuckDB
    assert [c.strip() for c in dv[3].split("|")] == ["big", "incremental", "3", view_class(),
                                                     "trans, accounts"]
    assert 'Incremental view "big"' in out and " owner  | VARCHAR" in out and DEFINITION.split(" FROM")[0] in out
    assert 'Table "main.trans"' in out and " amount | INTEGER" in out
    plan = out[out.index("view columns: id, amount, owner, note"):]
    assert f"class: {view_class()}" in plan and "GJT" in plan and "└──" in plan


def test_served_selects_match_duckdb_recomputation_in_a_later_session(tmp_path):
    db = tmp_path / "app.duckdb"
    setup = run_shell(tmp_path, str(db), "-q", "-c",
                      TABLES + "INSERT INTO accounts SELECT i, 'owner' || i FROM range(20) r(i);"
                      "INSERT INTO trans SELECT i, i % 23, (i * 37) % 1000, "
                      "CASE WHEN i % 7 = 0 THEN NULL ELSE 'n' || i END FROM range(400) r(i);"
                      f"CREATE INCREMENTAL VIEW big AS {DEFINITION};")
    assert setup.returncode == 0 and setup.stdout == "", setup.stderr
    # a second process on the same file: the view is resumed from the catalog, then written to
    r = run_shell(tmp_path, "--csv", "-q", str(db), "-c",
                  "DELETE FROM trans WHERE id % 5 = 0; UPDATE trans SET amount = amount + 250 "
                  "WHERE id % 3 = 0; INSERT INTO accounts VALUES (21, 'late'), (3, 'dup');"
                  "INSERT INTO trans VALUES (1000, 21, 999, 'new');",
                  "-c", "SELECT * FROM big ORDER BY ALL",
                  "-c", f"{DEFINITION} ORDER BY ALL")
    assert r.returncode == 0, r.stderr
    served, oracle = csv_blocks(r.stdout)
    assert len(served) > 100 and served == oracle
    assert ["1000", "999", "late", "new"] in served


def test_script_errors_report_positions_and_exit_statuses(tmp_path):
    script = tmp_path / "load.sql"
    script.write_text("CREATE TABLE r (a INT, b INT);\n"
                      "INSERT INTO r VALUES (1, 2);\n"
                      "SELECT a,\n       nope FROM r;\n"
                      "CREATE INCREMENTAL VIEW w AS SELECT a, ntile(2) OVER () AS n FROM r;\n"
                      "\\d missing\n"
                      "SELECT 'still running' AS state;\n")
    r = run_shell(tmp_path, "-f", str(script))
    assert r.returncode == 0, r.stderr               # the last statement worked
    errs = r.stderr.splitlines()
    assert errs[0].startswith(f"ivm:{script}:3: ERROR:  Binder Error") and "nope" in r.stderr
    layer = [e for e in errs if e.startswith(f"ivm:{script}:5: ERROR:")]
    assert layer and "window" in layer[0].lower()     # the layer's own message
    assert any(e.startswith(f"ivm:{script}:6: ERROR:  did not find any relation named 'missing'")
               for e in errs)
    assert "still running" in r.stdout

    stop = run_shell(tmp_path, "--on-error-stop", "-f", str(script))
    assert stop.returncode == 3
    assert "INSERT 0 1" in stop.stdout and "still running" not in stop.stdout
    assert stop.stderr.count("ERROR:") == 1

    last = run_shell(tmp_path, "-c", "SELECT 1; SELECT 1 +", "-c", "\\nosuchcommand")
    assert last.returncode == 1
    assert "ivm:-c:1:11: ERROR:  Parser Error" in last.stderr
    assert "invalid command \\nosuchcommand" in last.stderr


def test_statements_from_stdin_as_json(tmp_path):
    r = run_shell(tmp_path, "--json", stdin=(
        TABLES + "\nINSERT INTO accounts VALUES (7, NULL);\n"
        "INSERT INTO trans VALUES (1, 7, 150, 'a'), (2, 7, 10, 'b');\n"
        f"CREATE INCREMENTAL MATERIALIZED VIEW big AS {DEFINITION};\n"
        "SELECT * FROM big;\n"
        "INSERT INTO trans VALUES (3, 7, 300, NULL);\n"
        "SELECT id, owner, note FROM big ORDER BY id;\n"
        "\\dv\n"))
    assert r.returncode == 0, r.stderr
    docs = [json.loads(line) for line in r.stdout.splitlines()]
    assert docs[0] == [{"id": 1, "amount": 150, "owner": None, "note": "a"}]
    assert docs[1] == [{"id": 1, "owner": None, "note": "a"}, {"id": 3, "owner": None, "note": None}]
    assert docs[2][0]["Name"] == "big" and docs[2][0]["Kind"] == "materialized" and docs[2][0]["Rows"] == 2


def test_connection_failures_never_show_the_password(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]      # nothing listens there once the socket is closed
    r = run_shell(tmp_path, f"postgresql://ivm:hunter2@127.0.0.1:{port}/app", "-c", "SELECT 1")
    assert r.returncode == 2                   # psql's status for a connection that failed
    assert "hunter2" not in r.stderr + r.stdout
    assert f"127.0.0.1:{port}/app" in r.stderr and "Connection refused" in r.stderr
    bad = run_shell(tmp_path, str(tmp_path / "data.csv"), "-c", "SELECT 1")
    assert bad.returncode == 1 and "None" not in bad.stderr
    assert f"'{tmp_path / 'data.csv'}' is not a database the shell can open; give nothing (an in-memory " \
        "DuckDB), a DuckDB file (app.duckdb" in bad.stderr and "postgresql://user@host:5432/db" in bad.stderr
    missing = run_shell(tmp_path, "-f", str(tmp_path / "missing.sql"))
    assert missing.returncode == 1 and "No such file" in missing.stderr


# -- interactive ----------------------------------------------------------------------------
@pytest.fixture
def repl(tmp_path):
    child = pexpect.spawn(str(IVM), ["shell"], env=shell_env(tmp_path), encoding="utf-8",
                          dimensions=(40, 120), timeout=20)
    child.logfile_read = open(tmp_path / "pty.log", "w")  # noqa: SIM115 - closed below
    yield child
    child.close(force=True)
    child.logfile_read.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all threads (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_busy(pid: int, seconds: float = 0.5, timeout: float = 30.0) -> None:
    """Wait until the process has used ``seconds`` more CPU time (a statement is running)."""
    start = cpu_seconds(pid)
    deadline = time.monotonic() + timeout
    while cpu_seconds(pid) - start < seconds:
        assert time.monotonic() < deadline, "the statement did not start"
        time.sleep(0.05)


def prompt(child, db: str = "memory") -> None:
    """Wait for a fresh prompt (prompt_toolkit turns bracketed paste on when it starts one;
    the text typed is echoed after a prompt too, so the prompt alone is not enough)."""
    child.expect_exact("\x1b[?2004h")
    child.expect_exact(f"{db}=>")


def test_ctrl_c_stops_watch_when_started_with_sigint_ignored(tmp_path):
    """A shell started by a non-interactive shell's ``&`` inherits SIGINT as ignored; Ctrl-C
    must still stop ``\\watch`` (before the fix it was lost between two polls, forever)."""
    c = pexpect.spawn(str(IVM), ["shell"], env=shell_env(tmp_path), encoding="utf-8",
                      dimensions=(40, 120), timeout=20,
                      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        prompt(c)
        c.send("CREATE TABLE t (id INT); CREATE INCREMENTAL VIEW v AS SELECT id FROM t;\r")
        c.expect_exact("CREATE INCREMENTAL VIEW")
        prompt(c)
        for _ in range(3):              # most of a watch is the wait between polls: hit it
            c.send("\\watch v\r")
            c.expect_exact("Ctrl-C to stop.")
            time.sleep(0.05)
            c.sendintr()
            c.expect_exact("Stopped watching v (0 changes).")
            prompt(c)
        c.send("SELECT 1 AS one \\watch 0.05\r")   # psql's \\watch of a query: Ctrl-C while it sleeps
        c.expect(r"one\s+-+\s+1\s+\(1 row\)")
        c.sendintr()
        prompt(c)
        c.send("SELECT 40 + 2 AS answer;\r")
        c.expect(r"answer\s+-+\s+42\s+\(1 row\)")
    finally:
        c.close(force=True)


def test_interactive_session(repl, tmp_path):
    c = repl
    c.expect_exact("ivm shell")
    prompt(c)
    c.send("CREATE TABLE trans (id INT, acc INT,\r")      # Enter without ';' continues the statement
    c.expect_exact("memory->")
    c.send("  amount INT, note VARCHAR);\r")
    c.expect_exact("CREATE TABLE")
    prompt(c)
    c.send("CREATE TABLE accounts (acc INT, owner VARCHAR); INSERT INTO accounts VALUES (1, 'ann');\r")
    c.expect_exact("INSERT 0 1")
    prompt(c)
    c.send(f"CREATE INCREMENTAL VIEW big AS {DEFINITION};\r")
    c.expect_exact("CREATE INCREMENTAL VIEW")
    prompt(c)
    c.send("INSERT INTO trans VALUES (1, 1, 500, NULL), (2, 1, 5, 'small');\r")
    c.expect_exact("INSERT 0 2")
    prompt(c)
    c.send("SELECT * FROM big;\r")
    c.expect(r"\s+1 \|\s+500 \| ann\s+\| .*NULL")
    c.expect_exact("(1 row)")
    c.expect(r"Time: [0-9.]+ ms")
    prompt(c)
    c.send("\\dv\r")
    c.expect(rf"big\s+\| incremental \|\s+1 \| {view_class()}")
    prompt(c)
    c.send("\\explain big\r")
    c.expect_exact(f"class: {view_class()}")
    prompt(c)
    # an error: reported, the shell stays
    c.send("SELECT * FROM nope;\r")
    c.expect_exact("ERROR:  Catalog Error: Table with name nope does not exist")
    prompt(c)
    # Ctrl-C cancels a long-running statement and the shell survives
    c.send("SELECT count(*) FROM range(100000000) a, range(100000000) b;\r")
    wait_until_busy(c.pid)         # DuckDB is running the join
    c.sendintr()
    c.expect_exact("Cancel request sent")
    c.expect_exact("Interrupted")
    prompt(c)
    c.send("SELECT 40 + 2 AS answer;\r")
    c.expect(r"answer\s+-+\s+42\s+\(1 row\)")
    prompt(c)
    # \watch: nothing changes, Ctrl-C stops it cleanly
    c.send("\\watch big\r")
    c.expect_exact("Watching big (id, amount, owner, note)")
    c.sendintr()
    c.expect_exact("Stopped watching big (0 changes).")
    prompt(c)
    # the view kept working after the cancel and the watch
    c.send("DELETE FROM trans WHERE id = 1; SELECT count(*) AS n FROM big;\r")
    c.expect(r"DELETE 1.*\bn\s+-+\s+0\s+\(1 row\)")
    prompt(c)
    # Tab completion of a table name; Ctrl-C clears a half-typed line
    c.send("SELECT owner FROM acco\t")
    c.expect_exact("unts")          # completed in place: acco|unts
    c.send(";\r")
    c.expect(r"owner\s+-+\s+ann\s+\(1 row\)")
    prompt(c)
    # a result wider than the terminal (120 columns) is cut to fit; \x shows it in full
    c.send("SELECT 1 AS n, repeat('abc', 100) AS wide;\r")
    c.expect(r"\n( +1 \| abc[abc]*…)\r\n")
    assert len(c.match.group(1)) <= 120
    prompt(c)
    c.send("\\x\r")
    c.expect_exact("Expanded display is on.")
    prompt(c)
    c.send("SELECT 1 AS n, NULL AS nothing;\r")
    c.expect(r"-\[ RECORD 1 \]-*\r\nn +\| 1\r\nnothing \| NULL\r\n")
    prompt(c)
    c.send("\\x off\r")
    c.expect_exact("Expanded display is off.")
    prompt(c)
    c.send("SELECT 'half typed")
    c.sendintr()
    prompt(c)
    c.send("SELECT 'hunter2' AS password;\r")
    c.expect(r"password\s+-+\s+hunter2\s+\(1 row\)")
    prompt(c)
    c.sendeof()
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    history = (tmp_path / "history").read_text()
    assert "SELECT 40 + 2 AS answer;" in history and "\\watch big" in history
    assert "CREATE TABLE trans (id INT, acc INT,\n+  amount INT, note VARCHAR);" in history
    assert "hunter2" not in history
    assert os.stat(tmp_path / "history").st_mode & 0o777 == 0o600


# -- the manual ----------------------------------------------------------------------------
def test_docs_shell_session_is_what_the_shell_prints(tmp_path):
    """Replays the shell transcript of docs/shell.md (its statements through standard input, then
    its script command) and compares the output, minus timings, banner and blank lines."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "shell.md").read_text()
    block = page.split("```text\n", 1)[1].split("```", 1)[0]
    runs: list[tuple[list[str], list[str], list[str]]] = []  # (argv, input lines, output lines)
    for line in block.splitlines():
        if line.startswith("$ ivm shell "):
            runs.append((shlex.split(line[len("$ ivm shell "):]), [], []))
        elif line.startswith(("app=> ", "app-> ")):
            runs[-1][1].append(line[6:])
        elif line.strip() and not line.startswith(("Time: ", "ivm shell ", "Type \\?")):
            runs[-1][2].append(line)
    assert len(runs) == 2 and runs[0][1] and runs[0][2]
    for argv, statements, expected in runs:
        r = subprocess.run([str(IVM), "shell", *argv], check=False, input="\n".join(statements) + "\n",
                           capture_output=True, text=True, env=shell_env(tmp_path), timeout=60,
                           cwd=tmp_path)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert [ln for ln in r.stdout.splitlines() if ln.strip()] == expected
