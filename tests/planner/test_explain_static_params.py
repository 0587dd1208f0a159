"""EXPLAIN and ``ivm explain`` for static tables and parameters (issue 28 item 8): the class
line quotes the update bound the plan derives, each phrase is said once, a cyclic refusal names
the static analysis, and the CLI takes static tables (flag or ``CREATE … WITH (static = …)``)."""

from __future__ import annotations

import re

import pytest

from ivm_layer import compile_view
from ivm_layer.cli import main
from ivm_layer.errors import CyclicQueryError

PATH3 = ("SELECT r.a, r.b, s.c, t.d FROM r JOIN s ON r.b = s.b JOIN t ON s.c = t.c",
         {"r": ["a", "b"], "s": ["b", "c"], "t": ["c", "d"]}, ("r", "t"))
Q1 = ("SELECT r.a, s.b, t.c FROM r JOIN s ON r.a = s.a JOIN t ON s.b = t.b",
      {"r": ["a", "d"], "s": ["a", "b"], "t": ["b", "c"]}, ("t",))
Q4_003 = ("SELECT r.a, r.b, s.c FROM r JOIN s ON r.a = s.a JOIN t ON t.b = r.b AND t.c = s.c",
          {"r": ["a", "b"], "s": ["a", "c"], "t": ["b", "c"]}, ("t",))


def _bounds(text: str, prefix: str) -> tuple[str, str]:
    klass = next(line for line in text.splitlines() if line.startswith(prefix))
    update = next(line for line in text.splitlines() if line.startswith("update cost:"))
    in_class = re.search(r"preprocessing, (O\([^)]*\)) update", klass).group(1)
    return in_class, update.split(":", 1)[1].strip().split(" per ")[0]


@pytest.mark.parametrize("case", [PATH3, Q1], ids=["3-path (derived join)", "003 Q1"])
def test_static_class_line_agrees_with_update_cost(case):
    sql, schema, static = case
    in_class, derived = _bounds(compile_view(sql, schema, static=static).explain(), "static class: C_lin")
    assert in_class == derived
    assert "{update bound}" not in compile_view(sql, schema, static=static).explain()


def test_param_class_line_agrees_with_update_cost():
    v = compile_view("SELECT r.b, s.c FROM r JOIN s ON r.a = s.a WHERE r.a = $a",
                     {"r": ["a", "b"], "s": ["a", "c"]})
    in_class, derived = _bounds(v.explain(), "parameter class: CQAP0")
    assert in_class == derived == "O(1)"


def test_planned_as_usual_is_said_once():
    sql = "SELECT r.a, s.b, t.c FROM r JOIN s ON r.a < s.a JOIN t ON s.b = t.b"
    text = compile_view(sql, Q1[1], static=("t",)).explain()
    assert text.count("planned as usual") == 1
    assert "inequality joins are outside paper 003" in text


@pytest.mark.parametrize("select", ["r.a, r.b, s.c", "r.b, s.c"], ids=["Q4", "Q5"])
def test_cyclic_refusal_names_the_static_analysis(select):
    sql = Q4_003[0].replace("r.a, r.b, s.c", select, 1)
    with pytest.raises(CyclicQueryError) as err:
        compile_view(sql, Q4_003[1], static=Q4_003[2])
    text = str(err.value)
    assert "Static analysis (paper 003) with static tables {t}: outside" in text
    assert "avoids" in text  # the witness path


def test_cli_explain_takes_static_tables(capsys):
    assert main(["explain", Q1[0], "--schema", "r(a,d); s(a,b); t(b,c)", "--static", "t"]) == 0
    assert "static class: C_lin (static: t)" in capsys.readouterr().out
    create = f"CREATE INCREMENTAL VIEW v WITH (static = 't') AS {Q1[0]};"
    assert main(["explain", create, "--schema", "r(a,d); s(a,b); t(b,c)"]) == 0
    assert "static class: C_lin (static: t)" in capsys.readouterr().out
    assert main(["explain", "CREATE TABLE x (a INT)", "--schema", "r(a,d)"]) != 0
    assert "CREATE INCREMENTAL VIEW" in capsys.readouterr().err


def test_cli_explain_takes_params(capsys):
    assert main(["explain", "SELECT r.a, s.c FROM r JOIN s ON r.a = s.a", "--schema", "r(a,b); s(a,c)",
                 "--params", "a"]) == 0
    out = capsys.readouterr().out
    assert "parameters: a" in out and "CQAP0" in out


def test_explain_of_parameterized_aggregates_and_boolean_lookups():
    agg = compile_view("SELECT r.b, count(*) AS n FROM r WHERE r.a = $a GROUP BY r.b", {"r": ["a", "b"]})
    text = agg.explain()
    assert "parameter class: aggregate per input value" in text and "lookup one O(1) probe" in text
    assert agg.columns == ["b", "n"] and agg.params == ["a"]
    hit = compile_view("SELECT 1 AS hit FROM r JOIN s ON r.b = s.b WHERE r.a = $a AND r.b = $b",
                       {"r": ["a", "b"], "s": ["b", "c"]})
    assert hit.columns == ["hit"] and hit.params == ["a", "b"]
    in_class, derived = _bounds(hit.explain(), "parameter class: CQAP0")
    assert in_class == derived == "O(1)"
    with pytest.raises(CyclicQueryError, match=r"Parameter analysis \(paper 004\).*not CQAP0"):
        compile_view("SELECT 1 AS hit FROM r JOIN s ON r.b = s.b JOIN t ON s.c = t.c AND t.a = r.a "
                     "WHERE r.a = $a AND r.b = $b", {"r": ["a", "b"], "s": ["b", "c"], "t": ["c", "a"]})
