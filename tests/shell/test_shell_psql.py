"""psql's habits in ``ivm shell`` (issue 27) over DuckDB: the meta-commands through a
pseudo-terminal, the query buffer kept across a meta-command, pasted blocks run as one
script, EXPLAIN as lines, and psql's exit statuses for ``-c`` and ``-f``.

Each test starts as few shells as it can (a shell start costs about a second on 2 cores).
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pexpect
from test_shell import IVM, run_shell, shell_env

APP = "app"


def app_prompt(child) -> None:
    child.expect_exact("\x1b[?2004h")
    child.expect_exact(f"{APP}=>")


def test_meta_commands_variables_copy_and_watch_through_the_pty(tmp_path):
    (tmp_path / "more.tsv").write_text("4\t7\t120\n5\t8\t\\N\n")
    (tmp_path / "inc.sql").write_text("\\set limit 100\nSELECT count(*) AS over FROM trans WHERE amount > :limit;\n")
    c = pexpect.spawn(str(IVM), ["shell", f"{APP}.duckdb"], env=shell_env(tmp_path), encoding="utf-8",
                      dimensions=(40, 120), timeout=20, cwd=str(tmp_path))
    c.logfile_read = open(tmp_path / "pty.log", "w")  # noqa: SIM115 - closed below
    try:
        app_prompt(c)
        c.send("\\timing off\r")
        c.expect_exact("Timing is off.")
        app_prompt(c)
        # a meta-command on a continuation line runs alone; the statement waits, then finishes
        c.send("CREATE TABLE trans (id INT, acc INT, amount INT)\r")
        c.expect_exact(f"{APP}->")
        c.send("\\dv\r")
        c.expect_exact("List of incremental views")
        c.expect_exact("(0 rows)")
        app_prompt(c)
        c.send(";\r")
        c.expect_exact("CREATE TABLE\r\n")
        app_prompt(c)
        # \set and :var, :'var', :"var"
        c.send("\\set acc 7\r")
        app_prompt(c)
        c.send("\\set who 'ann lee'\r")
        app_prompt(c)
        c.send("\\set tbl trans\r")
        app_prompt(c)
        c.send('INSERT INTO :"tbl" VALUES (1, :acc, 500), (2, :acc, 50), (3, 8, 900);\r')
        c.expect_exact("INSERT 0 3")
        app_prompt(c)
        c.send("SELECT :'who' AS who, count(*) AS n FROM trans WHERE acc = :acc;\r")
        c.expect(r"ann lee \|\s+2\r\n\(1 row\)")
        app_prompt(c)
        c.send("\\echo :acc :'who' :nothing\r")
        c.expect_exact("7 'ann lee' :nothing")
        app_prompt(c)
        # an incremental view, fed below by \copy and watched
        c.send("CREATE INCREMENTAL VIEW big AS SELECT id, amount FROM trans WHERE amount > 100;\r")
        c.expect_exact("CREATE INCREMENTAL VIEW")
        app_prompt(c)
        # catalog listings
        c.send("CREATE MACRO twice(x) AS x * 2;\r")
        app_prompt(c)
        c.send("\\dt\r")
        c.expect(r"List of relations\s+Schema \| Name  \| Type\s+-+\+-+\+-+\s+main   \| trans \| table\s+\(1 row\)")
        app_prompt(c)
        c.send("\\dn\r")
        c.expect(r"List of schemas\s+Name\s+-+\s+main\s+\(1 row\)")
        app_prompt(c)
        c.send("\\l\r")
        c.expect(rf"List of databases\s+Name \|\s+Path\s+\|.*\s+{APP}\s+\| {tmp_path}/{APP}.duckdb")
        app_prompt(c)
        c.send("\\df tw*\r")
        c.expect(r"List of functions.*main\s+\| twice \|\s+\| x\s+\| macro\s+\(1 row\)")
        app_prompt(c)
        # EXPLAIN prints DuckDB's plan as lines, not one escaped cell
        c.send("EXPLAIN SELECT * FROM trans WHERE amount > 100;\r")
        c.expect(r"\r\n│ *Filters: *amount *> *100 *│\r\n")
        assert "explain_value" not in c.before and "\\n" not in c.before
        app_prompt(c)
        # \o FILE, \g, \g FILE, \p, \r
        c.send("\\o out.txt\r")
        app_prompt(c)
        c.send("SELECT 'into the file' AS w;\r")
        app_prompt(c)
        c.send("\\o\r")
        app_prompt(c)
        c.send("SELECT 5 AS five\r")
        c.expect_exact(f"{APP}->")
        c.send("\\g\r")
        c.expect(r"five\s+-+\s+5\s+\(1 row\)")
        app_prompt(c)
        c.send("\\g g.txt\r")
        app_prompt(c)
        c.send("SELECT 6\r")
        c.expect_exact(f"{APP}->")
        c.send("\\p\r")
        c.expect_exact("SELECT 6\r\n")
        app_prompt(c)
        c.send("\\r\r")
        c.expect_exact("Query buffer reset (cleared).")
        app_prompt(c)
        # \copy both ways; rows copied in reach the view
        c.send("\\copy trans to 'trans.tsv'\r")
        c.expect_exact("COPY 3")
        app_prompt(c)
        c.send("\\copy trans from 'more.tsv'\r")
        c.expect_exact("COPY 2")
        app_prompt(c)
        c.send("\\copy trans (id, acc, amount) from stdin\r")
        c.expect_exact(">> ")
        c.send("6\t7\t700\r")
        c.expect_exact(">> ")
        c.send("\\.\r")
        c.expect_exact("COPY 1")
        app_prompt(c)
        c.send("\\copy (SELECT id FROM big ORDER BY id) to stdout with csv header\r")
        c.expect(r"id\r\n1\r\n3\r\n4\r\n6\r\nCOPY 4")
        app_prompt(c)
        # \i FILE (its \set and :var)
        c.send("\\i inc.sql\r")
        c.expect(r"over\s+-+\s+4\s+\(1 row\)")
        app_prompt(c)
        # psql's \watch after a query: runs it every N seconds until Ctrl-C
        c.send("SELECT count(*) AS n FROM big \\watch 0.2\r")
        # on a DuckDB file: say (once) that no other process can write to it
        c.expect_exact(f"NOTICE:  this shell holds the lock on {APP}.duckdb")
        c.expect_exact("ivm serve")
        c.expect_exact("(every 0.2s)")
        c.expect(r"n\s+-+\s+4\s+\(1 row\)")
        c.expect_exact("(every 0.2s)")
        c.sendintr()
        app_prompt(c)
        c.send("\\watch big\r")
        c.expect_exact("Watching big")
        c.sendintr()
        c.expect_exact("Stopped watching big (0 changes).")
        app_prompt(c)
        # \x: every record separator as wide as the widest line
        c.send("\\x\r")
        app_prompt(c)
        c.send("SELECT id, repeat('x', id * 10) AS pad FROM trans WHERE id IN (1, 2) ORDER BY id;\r")
        c.expect(r"(-\[ RECORD 1 \]-*)\r\nid  \| 1\r\npad \| x{10}\r\n(-\[ RECORD 2 \]-*)\r\n")
        assert len(c.match.group(1)) == len(c.match.group(2)) == len("pad | " + "x" * 20)
        app_prompt(c)
        c.send("\\conninfo\r")
        c.expect_exact(f'You are connected to DuckDB database "{APP}" in {APP}.duckdb')
        app_prompt(c)
        c.send("\\q\r")
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
        c.logfile_read.close()
    assert (tmp_path / "out.txt").read_text() == " w\n---------------\n into the file\n(1 row)\n\n".replace(
        " w\n", "       w\n")
    assert "five" in (tmp_path / "g.txt").read_text()
    assert (tmp_path / "trans.tsv").read_text().splitlines() == ["1\t7\t500", "2\t7\t50", "3\t8\t900"]


def test_paste_runs_as_one_script(tmp_path):
    """Lines arriving faster than anyone types run as one script: one prompt for the block, the
    statements in order, an error reported with its line in the paste, an unfinished last line
    back at the prompt. Both ways a paste arrives: typed ahead (no bracketed paste) and
    bracketed."""
    n = 300
    lines = ["CREATE TABLE p (i INT, s VARCHAR);"]
    for i in range(n):
        lines.append(f"INSERT INTO p VALUES ({i}, 'row {i}');" if i % 50 else
                     f"INSERT INTO p\n  VALUES ({i}, 'row {i}');")
    lines[150] = "INSERT INTO nowhere VALUES (1);"           # an error in the middle
    lines += ["\\copy p from stdin", f"{n}\tcopied", "\\.", "SELECT count(*) AS total FROM p;", "SELECT 'unfin"]
    block = "\n".join(lines)
    bad_line = block.split("\n").index("INSERT INTO nowhere VALUES (1);") + 1
    c = pexpect.spawn(str(IVM), ["shell"], env=shell_env(tmp_path), encoding="utf-8",
                      dimensions=(40, 120), timeout=60)
    c.logfile_read = open(tmp_path / "pty.log", "w")  # noqa: SIM115 - closed below
    try:
        c.expect_exact("\x1b[?2004h")
        c.expect_exact("memory=>")
        # typed ahead: written in one go while the shell reads (a writer thread: the pty's
        # buffers are small and the shell prints while the text arrives)
        writer = threading.Thread(target=c.send, args=(block.replace("\n", "\r"),))
        writer.start()
        c.expect(rf"statement \d+ \(line {bad_line}, column 1\): ERROR:  Catalog Error: Table with name nowhere")
        c.expect(rf"total\s+-+\s+{n}\s+\(1 row\)")      # n - 1 INSERTs + 1 copied row
        c.expect_exact("\x1b[?2004h")
        c.expect_exact("memory=> SELECT 'unfin")        # the unfinished line comes back
        writer.join()
        between = c.before
        c.send("ished';\r")
        c.expect(r"unfinished\s+\(1 row\)")
        c.expect_exact("\x1b[?2004h")
        # bracketed paste: runs when whole lines were pasted, without waiting for Enter
        paste = "\r".join(f"INSERT INTO p VALUES ({i}, 'pasted');" for i in range(40)) + \
            "\rSELECT count(*) AS pasted FROM p WHERE s = 'pasted';\r"
        c.send("\x1b[200~" + paste + "\x1b[201~")
        c.expect(r"pasted\s+-+\s+40\s+\(1 row\)")
        c.expect_exact("\x1b[?2004h")
        c.sendeof()
        c.expect(pexpect.EOF)
    finally:
        c.close(force=True)
        c.logfile_read.close()
    log = (tmp_path / "pty.log").read_text()
    assert log.count("INSERT 0 1") == n - 1 + 40
    # the typed-ahead block was drawn once, not re-rendered prompt by prompt
    assert between.count("\x1b[?2004h") <= 3, between.count("\x1b[?2004h")


def test_c_stops_at_its_first_error_and_f_follows_on_error_stop(tmp_path):
    r = run_shell(tmp_path, "-c", "SELECT 1 AS first; SELEC 2; SELECT 3 AS third")
    assert r.returncode == 1 and "first" in r.stdout and "third" not in r.stdout
    assert r.stderr.startswith("ivm:-c:1:20: ERROR:  Parser Error")
    script = tmp_path / "s.sql"
    script.write_text("SELECT 1 AS first;\nSELECT 1/0::INT AS boom FROM nowhere;\nSELECT 3 AS third;\n")
    r = run_shell(tmp_path, "-f", str(script))            # psql: errors in a script are not fatal
    assert r.returncode == 0 and "third" in r.stdout and f"ivm:{script}:2: ERROR:" in r.stderr
    for flags in (["-v", "ON_ERROR_STOP=1"], ["--on-error-stop"], ["--set", "ON_ERROR_STOP=on"]):
        r = run_shell(tmp_path, *flags, "-f", str(script))
        assert r.returncode == 3 and "third" not in r.stdout, flags
    # several -c: each runs; the last one's status is the shell's, unless ON_ERROR_STOP
    r = run_shell(tmp_path, "-c", "SELEC 1", "-c", "SELECT 2 AS second")
    assert r.returncode == 0 and "second" in r.stdout
    r = run_shell(tmp_path, "-v", "ON_ERROR_STOP=1", "-c", "SELEC 1", "-c", "SELECT 2 AS second")
    assert r.returncode == 1 and "second" not in r.stdout
    r = run_shell(tmp_path, stdin="SELECT 1/0::INT FROM nowhere;\nSELECT 'on' AS after;\n")
    assert r.returncode == 0 and "after" in r.stdout
    r = run_shell(tmp_path, "-v", "bad-name=x", "-c", "SELECT 1")
    assert r.returncode == 1 and 'invalid variable name: "bad-name"' in r.stderr


def test_duckdb_start_up_loads_no_postgres_arrow_or_numpy(tmp_path):
    """``ivm shell -c "SELECT 1"`` on DuckDB: the modules loaded by the end of the run (the
    session's background threads included) hold no psycopg, pyarrow, numpy, pandas, Spark or
    prompt_toolkit."""
    probe = ("import runpy, sys, threading\n"
             "sys.argv = ['ivm', 'shell', '-c', 'SELECT 1']\n"
             "from ivm_layer.cli import main\n"
             "code = main(sys.argv[1:])\n"
             "for t in threading.enumerate():\n"
             "    if t is not threading.main_thread(): t.join(5)\n"
             "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
             "sys.exit(code)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       env=shell_env(tmp_path), timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stderr.split())
    assert "duckdb" in loaded and "ivm_layer" in loaded
    assert not loaded & {"psycopg", "psycopg_binary", "pyarrow", "numpy", "pandas", "pyspark",
                         "prompt_toolkit"}, sorted(loaded & {"psycopg", "pyarrow", "numpy", "pandas",
                                                           "pyspark", "prompt_toolkit"})
