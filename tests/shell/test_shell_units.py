"""In-process tests of the shell's parts: input splitting, rendering, masking, history,
completion and ``\\watch`` (fed by writes from a second DuckDB connection)."""

from __future__ import annotations

import collections
import io
import json
import threading
import time

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

import ivm_layer
from ivm_layer.shell.completion import SQLCompleter
from ivm_layer.shell.history import RedactingFileHistory, open_history
from ivm_layer.shell.redact import is_sensitive, mask
from ivm_layer.shell.render import (
    Display,
    command_tag,
    render_change,
    render_csv,
    render_json,
    render_result,
)
from ivm_layer.shell.runner import Runner
from ivm_layer.shell.script import is_complete, parse_script
from ivm_layer.shell.watch import watch


# -- input -----------------------------------------------------------------------------------
def test_parse_script_positions_strings_and_meta_commands():
    text = ("CREATE TABLE t (a INT);\n"
            "\n"
            "-- a comment; with a semicolon\n"
            "INSERT INTO t VALUES (1); SELECT 'x;\\y' AS s;\n"
            "\\dv\n"
            "SELECT a\n"
            "  FROM t; \\x on\n"
            "SELECT 2")
    items = parse_script(text, "duckdb")
    assert [(i.kind, i.line, i.column, i.number) for i in items] == [
        ("sql", 1, 1, 1), ("sql", 4, 1, 2), ("sql", 4, 27, 3), ("meta", 5, 1, 4),
        ("sql", 6, 1, 5), ("meta", 7, 11, 6), ("sql", 8, 1, 7)]
    assert items[2].text == "SELECT 'x;\\y' AS s"
    assert items[4].text == "SELECT a\n  FROM t"
    assert items[5].text == "\\x on"
    assert items[6].text == "SELECT 2"  # unterminated at the end: still run, like psql


def test_is_complete_follows_the_tokenizer():
    assert is_complete("SELECT 1;", "duckdb")
    assert is_complete("SELECT 1; -- done", "duckdb")
    assert is_complete("\\dv", "duckdb")
    assert is_complete("", "duckdb")
    assert not is_complete("SELECT 1", "duckdb")
    assert not is_complete("SELECT ';", "duckdb")            # inside a string
    assert not is_complete("SELECT 1 /* ; */", "duckdb")     # inside a comment
    assert not is_complete("SELECT $$ a; $$", "postgres")    # inside a dollar-quoted string
    assert is_complete("SELECT $$ a; $$;", "postgres")


# -- rendering ------------------------------------------------------------------------------
def test_aligned_table_null_row_count_and_numbers_right_aligned():
    out = render_result(["id", "name"], [(1, "ann"), (22, None)], Display())
    assert out.splitlines() == [" id | name", "----+------", "  1 | ann", " 22 | NULL", "(2 rows)", ""]
    coloured = render_result(["name"], [("NULL",), (None,)], Display(color=True))
    assert "\x1b[2mNULL\x1b[0m" in coloured            # the NULL is dimmed ...
    assert coloured.count("\x1b[2m") == 1               # ... the string 'NULL' is not
    assert render_result(["x"], [(None,)], Display(null="∅")).splitlines()[2] == " ∅"


def test_wide_tables_are_fitted_to_the_terminal():
    rows = [(1, "x" * 200, "short")]
    out = render_result(["id", "text", "tail"], rows, Display(width=60))
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 60
    assert "…" in lines[2] and "short" in lines[2]
    many = render_result([f"column_{i}" for i in range(20)], [tuple(range(20))], Display(width=50))
    assert max(len(ln) for ln in many.splitlines()) <= 50
    assert "columns not shown" in many and " column_0 " in many
    assert "column_19" in render_result([f"column_{i}" for i in range(20)], [tuple(range(20))],
                                        Display(width=300))
    assert "…" not in render_result(["id", "text"], rows, Display())  # not a terminal: never cut


def test_expanded_csv_json_and_auto():
    rows = [(1, None, "a,b")]
    exp = render_result(["id", "n", "s"], rows, Display(expanded="on")).splitlines()
    assert exp[0].startswith("-[ RECORD 1 ]") and exp[1:4] == ["id | 1", "n  | NULL", "s  | a,b"]
    assert render_csv(["id", "n", "s"], rows) == 'id,n,s\n1,,"a,b"\n'
    assert json.loads(render_json(["id", "n", "s"], rows)) == [{"id": 1, "n": None, "s": "a,b"}]
    wide = render_result(["a", "b"], [("x" * 80, 1)], Display(expanded="auto", width=40))
    assert wide.startswith("-[ RECORD 1 ]")
    assert render_result(["a"], [(1,)], Display(expanded="auto", width=40)).startswith(" a")


def test_command_tags_and_change_lines():
    assert command_tag("insert into t values (1), (2)", 2) == "INSERT 0 2"
    assert command_tag("/* c */ DELETE FROM t", 3) == "DELETE 3"
    assert command_tag("CREATE OR REPLACE INCREMENTAL MATERIALIZED VIEW v AS SELECT 1", -1) == \
        "CREATE INCREMENTAL MATERIALIZED VIEW"
    assert command_tag("create temp table if not exists x (a int)", -1) == "CREATE TABLE"
    assert command_tag("begin", -1) == "BEGIN"
    assert render_change(["a", "b"], (1, None), 1, Display()) == "+ 1 | NULL\n"
    assert render_change(["a", "b"], (1, "x"), -3, Display()) == "- 1 | x   (×3)\n"
    assert json.loads(render_change(["a"], (1,), -2, Display(format="json"))) == \
        {"op": "-", "count": 2, "row": {"a": 1}}


# -- credentials ----------------------------------------------------------------------------
def test_mask_and_sensitive_input():
    assert mask("postgresql://bob:s3cr%40t@db:5432/app") == "postgresql://bob:****@db:5432/app"
    assert mask("host=x password=hunter2 user=y") == "host=x password=**** user=y"
    assert mask("ALTER ROLE bob PASSWORD 'it''s'") == "ALTER ROLE bob PASSWORD '****'"
    assert mask("postgresql://bob@db/app") == "postgresql://bob@db/app"
    assert is_sensitive("ALTER ROLE bob WITH PASSWORD 'x';")
    assert is_sensitive("CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's');")
    assert is_sensitive("ATTACH 'postgresql://u:pw@h/db' AS p;")
    assert not is_sensitive("SELECT * FROM accounts;")


def test_history_file_keeps_credentials_out(tmp_path):
    path = tmp_path / "hist"
    h = open_history(str(path))
    assert isinstance(h, RedactingFileHistory)
    assert path.stat().st_mode & 0o777 == 0o600
    h.append_string("SELECT 1;")
    h.append_string("CREATE ROLE bob LOGIN PASSWORD 'hunter2';")
    h.append_string("\\i /tmp/x.sql")
    text = path.read_text()
    assert "SELECT 1;" in text and "\\i /tmp/x.sql" in text
    assert "hunter2" not in text and "PASSWORD" not in text
    assert "hunter2" not in " ".join(h.get_strings())


# -- completion -----------------------------------------------------------------------------
def _complete(c: SQLCompleter, text: str) -> list[str]:
    return [x.text for x in c.get_completions(Document(text, len(text)), CompleteEvent(completion_requested=True))]


def test_completion_names_columns_keywords_and_meta_commands():
    c = SQLCompleter()
    c.update({"trans": ["id", "acc", "amount"], "accounts": ["acc", "owner"], "fraud": ["id"]}, ["fraud"])
    assert _complete(c, "SELECT * FROM tr") == ["trans"]
    assert _complete(c, "SELECT * FROM fr") == ["fraud"]
    assert _complete(c, "SELECT t.a FROM trans t WHERE t.am") == ["amount"]
    assert _complete(c, "SELECT accounts.") == ["acc", "owner"]
    assert _complete(c, "sel") == ["select"] and _complete(c, "SEL") == ["SELECT"]
    assert "own" not in _complete(c, "ow") and "owner" in _complete(c, "ow")
    assert _complete(c, "\\exp") == ["\\explain"]
    assert _complete(c, "\\watch ") == ["fraud"]
    assert _complete(c, "\\d acc") == ["accounts"]


# -- \watch ---------------------------------------------------------------------------------
def test_watch_prints_the_changes_of_writes_from_another_connection():
    """Writes through a second DuckDB connection to the same database are picked up by
    ``poll()``; the printed +/- lines add up to the view DuckDB computes from scratch."""
    s = ivm_layer.connect()
    s.execute("CREATE TABLE r (a INT, b INT); CREATE TABLE q (b INT, c VARCHAR)")
    s.execute("INSERT INTO q VALUES (1, 'one'), (2, NULL), (3, 'three')")
    definition = "SELECT r.a, q.c FROM r JOIN q ON r.b = q.b"
    s.execute(f"CREATE INCREMENTAL VIEW v AS {definition}")
    out = io.StringIO()
    runner = Runner(s, Display(format="json", quiet=True), out=out)
    stop = threading.Event()
    other = s.connection.cursor()   # a second connection to the same in-memory database
    errors = []

    def writer() -> None:
        try:
            for step in range(6):
                other.execute("INSERT INTO r VALUES (?, ?), (?, ?)", [step, step % 3 + 1, step, 2])
                if step % 2:
                    other.execute("DELETE FROM r WHERE a = ?", [step - 1])
                time.sleep(0.08)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
        finally:
            stop.set()

    t = threading.Thread(target=writer)
    t.start()
    printed = watch(runner, "v", 0.05, stop)
    t.join()
    assert not errors
    bag: collections.Counter = collections.Counter()
    for line in out.getvalue().splitlines():
        ch = json.loads(line)
        bag[(ch["row"]["a"], ch["row"]["c"])] += ch["count"] if ch["op"] == "+" else -ch["count"]
    bag = +bag
    oracle = collections.Counter(other.execute(definition).fetchall())
    assert printed > 0 and bag == oracle
    s.close()


def test_watch_of_an_unknown_view_is_an_error():
    s = ivm_layer.connect()
    with pytest.raises(ivm_layer.IVMError, match="no incremental view named 'nope'"):
        watch(Runner(s, Display(), out=io.StringIO()), "nope")
    s.close()


# -- positions of errors ---------------------------------------------------------------------
def test_errors_name_the_statement_typed_and_the_line_of_included_files(tmp_path):
    s = ivm_layer.connect()
    out, err = io.StringIO(), io.StringIO()
    runner = Runner(s, Display(), out=out, err=err, interactive=True)
    inc = tmp_path / "inc.sql"
    inc.write_text("SELECT 1 AS one;\n\nSELECT *\n  FROM nope;\n\\explain nope\n")
    assert runner.run_source(f"SELECT 2 AS two; SELECT nope;\n\\i {inc}\nSELECT 3 AS three;", None)
    errors = err.getvalue().splitlines()
    assert errors[0].startswith("statement 2 (line 1, column 18): ERROR:  Binder Error")
    assert any(e.startswith(f"ivm:{inc}:3: ERROR:  Catalog Error: Table with name nope") for e in errors)
    assert f"ivm:{inc}:5: ERROR:  no incremental view named 'nope'; views: none" in errors
    assert runner.errors == 3 and not runner.last_failed
    assert [ln.strip() for ln in out.getvalue().splitlines() if ln.strip() in ("two", "one", "three")] == \
        ["two", "one", "three"]
    s.close()


def test_on_error_stop_reaches_into_included_files(tmp_path):
    s = ivm_layer.connect()
    out, err = io.StringIO(), io.StringIO()
    runner = Runner(s, Display(), out=out, err=err, on_error_stop=True)
    inc = tmp_path / "inc.sql"
    inc.write_text("SELECT 'first' AS a;\nSELECT nope;\nSELECT 'never' AS b;\n")
    assert not runner.run_source(f"\\i {inc}\nSELECT 'after' AS c;", "top.sql")
    assert "first" in out.getvalue() and "never" not in out.getvalue() and "after" not in out.getvalue()
    errors = err.getvalue().splitlines()
    assert errors[0].startswith(f"ivm:{inc}:2: ERROR:  Binder Error")
    assert errors[-1] == f"ivm:top.sql:1: ERROR:  {inc}: stopped at its first error (--on-error-stop) or a cancel"
    s.close()
