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
from ivm_layer.shell.catalog import name_pattern
from ivm_layer.shell.completion import SQLCompleter
from ivm_layer.shell.copyio import options as copy_options
from ivm_layer.shell.copyio import parse as copy_parse
from ivm_layer.shell.history import RedactingFileHistory, open_history
from ivm_layer.shell.meta import split_args
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
from ivm_layer.shell.script import Scanner, is_complete, parse_script
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
    items = parse_script(text)
    assert [(i.kind, i.line, i.column, i.number) for i in items] == [
        ("sql", 1, 1, 1), ("sql", 4, 1, 2), ("sql", 4, 27, 3), ("meta", 5, 1, 4),
        ("sql", 6, 1, 5), ("meta", 7, 11, 6), ("sql", 8, 1, 7)]
    assert items[2].text == "SELECT 'x;\\y' AS s"
    assert items[4].text == "SELECT a\n  FROM t"
    assert items[5].text == "\\x on"
    assert items[6].text == "SELECT 2"  # unterminated at the end: still run, like psql


def test_scanner_keeps_the_query_buffer_across_meta_commands():
    """psql: a meta-command typed inside a statement runs alone; the statement waits."""
    s = Scanner("CREATE TABLE x (a INT)\n\\dv\n")
    assert [(i.kind, i.text) for i in s.items()] == [("meta", "\\dv")]
    assert s.pending() == "CREATE TABLE x (a INT)" and s.complete
    s = Scanner("SELECT 42 AS v \\watch 2\n")
    items = list(s.items())
    assert [(i.kind, i.text, i.column) for i in items] == [("meta", "\\watch 2", 16)]
    assert s.take() == "SELECT 42 AS v" and s.pending() == ""
    s = Scanner("\\echo a \\\\ SELECT 1; \\x \\dt")          # \\ ends a meta-command
    assert [(i.kind, i.text) for i in s.items()] == [("meta", "\\echo a"), ("sql", "SELECT 1"),
                                                     ("meta", "\\x"), ("meta", "\\dt")]
    s = Scanner("\\copy t from stdin\n1\tx\n\\.\nSELECT 2;")      # \\copy takes its data lines
    it = s.items()
    assert next(it).text == "\\copy t from stdin" and s.read_data_lines() == ["1\tx"]
    assert [i.text for i in it] == ["SELECT 2"]


def test_scanner_interpolates_variables_outside_quotes():
    values = {"n": "42", "t": "it's", "q": "1; SELECT 2"}
    s = Scanner("SELECT :n, :'t', :\"t\", :missing, a::int, ':n', \":n\" FROM x;", values.get)
    assert [i.text for i in s.items()] == \
        ["SELECT 42, 'it''s', \"it's\", :missing, a::int, ':n', \":n\" FROM x"]
    assert [i.text for i in Scanner("SELECT :q;", values.get).items()] == ["SELECT 1", "SELECT 2"]
    with pytest.raises(ivm_layer.IVMError, match="expands without end"):
        list(Scanner("SELECT :x;", {"x": ":x"}.get).items())


def test_scanner_follows_psql_lexing():
    def texts(sql):
        return [i.text for i in Scanner(sql).items()]

    assert texts("SELECT E'a\\'b;' ; SELECT 'it''s;'; SELECT \"a;\"\"b\";") == \
        ["SELECT E'a\\'b;'", "SELECT 'it''s;'", 'SELECT "a;""b"']
    assert texts("SELECT (1;\n2); /* c /* nested ; */ ; */ SELECT a$b$c, $$ x; $$;") == \
        ["SELECT (1;\n2)", "/* c /* nested ; */ ; */ SELECT a$b$c, $$ x; $$"]
    assert texts("CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; "
                 "SELECT CASE WHEN true THEN 2 END; END; SELECT 3;")[1] == "SELECT 3"
    assert texts("SELECT 1 -- done; not a statement\n, 2;") == ["SELECT 1 -- done; not a statement\n, 2"]


def test_is_complete_follows_the_lexer():
    assert is_complete("SELECT 1;")
    assert is_complete("SELECT 1; -- done")
    assert is_complete("\\dv")
    assert is_complete("")
    assert is_complete("CREATE TABLE x (a INT)\n\\dv")    # the meta-command runs, the statement waits
    assert not is_complete("\\dv\nSELECT 1")
    assert not is_complete("SELECT 1")
    assert not is_complete("SELECT ';")            # inside a string
    assert not is_complete("SELECT 1 /* ; */")     # inside a comment
    assert not is_complete("SELECT $$ a; $$")      # inside a dollar-quoted string
    assert is_complete("SELECT $$ a; $$;")


def test_meta_arguments_follow_psql():
    values = {"foo": "1", "t": "it's"}
    assert split_args("'a\\tb' \"X y\" :foo x'y'z :bar :'t' :\"t\"", values.get) == \
        ["a\tb", '"X y"', "1", "xyz", ":bar", "'it''s'", '"it\'s"']
    assert name_pattern("t*") == (None, "^(t.*)$")
    assert name_pattern('public."Mixed?"') == ("^(public)$", "^(Mixed\\?)$")
    assert name_pattern("S?.T") == ("^(s.)$", "^(t)$")


def test_copy_arguments_and_options():
    assert copy_parse("t (a, b) from 'my file.csv' with csv header") == \
        ("t (a, b)", "from", "file", "my file.csv", "with csv header")
    assert copy_parse("(SELECT 1, ';') TO stdout (FORMAT csv)") == \
        ("(SELECT 1, ';')", "to", "stdout", "", "(FORMAT csv)")
    assert copy_parse("s.t FROM pstdin")[1:3] == ("from", "pstdin")
    assert copy_options("with csv header delimiter ';' null as 'n'") == \
        "FORMAT csv, HEADER, DELIMITER ';', NULL 'n'"
    assert copy_options("(FORMAT csv, HEADER)") == "FORMAT csv, HEADER"
    with pytest.raises(ivm_layer.IVMError, match="usage"):
        copy_parse("t into 'x'")


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
    # psql: every record line as wide as the widest line, values with line breaks marked "+"
    two = render_result(["number", "text"], [(1, "abcdefghijklmnop"), (22, "x")], Display(expanded="on"))
    assert two.splitlines()[0] == "-[ RECORD 1 ]------------"   # not narrower for the short record
    assert two.splitlines()[3] == "-[ RECORD 2 ]------------"
    acl = render_result(["Name", "Access privileges"], [("t0", "=c/pg\npg=CTc/pg")], Display(expanded="on"))
    assert acl.splitlines() == ["-[ RECORD 1 ]-----+----------", "Name              | t0",
                                "Access privileges | =c/pg    +", "                  | pg=CTc/pg", ""]
    lines = render_result(["m", "n"], [("a\nbb", 1)], Display()).splitlines()
    assert lines[2:4] == [" a +| 1", " bb |"]     # as psql draws it
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
    assert errors[-1] == f"ivm:top.sql:1: ERROR:  {inc}: stopped at its first error (ON_ERROR_STOP) or a cancel"
    s.close()
