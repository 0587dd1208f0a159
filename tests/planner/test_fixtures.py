"""The planner on fixture files of query / expected-plan pairs (sqlglot's ``check_file`` is the model).

A file under ``fixtures/`` holds cases separated by blank lines. A case is ``# title: …`` and
option lines (``# allow_core: false``), other ``#`` comment lines, the query in the papers'
notation (``ivm_layer.gcqtext``), a line ``----``, and the expected ``explain()`` text — or
``ErrorClass: message`` when planning must fail. ``IVM_UPDATE_FIXTURES=1`` rewrites the expected
parts from the planner's output; the run then fails, so that the diff is reviewed before it is
committed.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from ivm_layer.errors import IVMError
from ivm_layer.gcqtext import parse_gcq
from ivm_layer.planner import plan

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
SEPARATOR = "----"


def load_cases(path: pathlib.Path) -> list[dict]:
    """The cases of one fixture file, each ``{title, options, comments, query, expected}``."""
    cases = []
    for block in path.read_text().strip().split("\n\n"):
        lines = block.splitlines()
        head = lines[:lines.index(SEPARATOR)]
        expected = "\n".join(lines[lines.index(SEPARATOR) + 1:])
        options, comments, query = {}, [], []
        for line in head:
            if line.startswith("#"):
                key, colon, value = line[1:].strip().partition(":")
                if colon and key.strip() in ("title", "allow_core"):
                    options[key.strip()] = value.strip()
                else:
                    comments.append(line)
            else:
                query.append(line.strip())
        cases.append({"title": options.pop("title", " ".join(query)), "options": options, "comments": comments,
                      "query": " ".join(query), "expected": expected, "head": head})
    return cases


def actual(case: dict) -> str:
    allow_core = case["options"].get("allow_core", "true").lower() != "false"
    try:
        return plan(parse_gcq(case["query"]), allow_core=allow_core).explain()
    except IVMError as e:
        return f"{type(e).__name__}: {e}"


def check_file(name: str, directory: pathlib.Path = FIXTURES) -> None:
    path = directory / name
    cases = load_cases(path)
    assert cases, f"{path} holds no case"
    if os.environ.get("IVM_UPDATE_FIXTURES") == "1":
        path.write_text("\n\n".join("\n".join(c["head"] + [SEPARATOR, actual(c)]) for c in cases) + "\n")
        pytest.fail(f"rewrote {path} from the planner's output: review the diff, then run again without "
                    "IVM_UPDATE_FIXTURES")
    failures = []
    for c in cases:
        got = actual(c)
        if got != c["expected"]:
            failures.append(f"--- {c['title']}\n{c['query']}\nexpected:\n{c['expected']}\ngot:\n{got}")
    assert not failures, f"{len(failures)} of {len(cases)} cases of {name} differ:\n" + "\n".join(failures)


def test_load_cases_reads_titles_options_and_expectations(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("# title: one\n# allow_core: false\n# a comment\nr(x), s(x)\n----\nline 1\nline 2\n\n"
                 "r(x)\n----\nCyclicQueryError: no\n")
    one, two = load_cases(f)
    assert one["title"] == "one" and one["options"] == {"allow_core": "false"} and one["query"] == "r(x), s(x)"
    assert one["expected"] == "line 1\nline 2" and one["comments"] == ["# a comment"]
    assert two["title"] == "r(x)" and two["expected"] == "CyclicQueryError: no"


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.txt")))
def test_fixture_file(name):
    check_file(name)


def test_a_wrong_expectation_fails(tmp_path):
    (tmp_path / "bad.txt").write_text("r(x, y), s(y, z)\n----\nclass: acyclic-not-free-connex\n")
    with pytest.raises(AssertionError, match="1 of 1 cases of bad.txt differ"):
        check_file("bad.txt", tmp_path)
