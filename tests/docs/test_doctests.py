"""Every doctest of the package runs (sqlglot's tests/test_docs.py is the model), and the
public engine operations and the planner's passes each have one."""

from __future__ import annotations

import doctest
import importlib
import pathlib
import pkgutil

import pytest

import ivm_layer
import ivm_layer.gcqtext
from ivm_layer import planner

PACKAGE = pathlib.Path(ivm_layer.__file__).parent


def _modules_with_examples() -> list[str]:
    """Modules whose source holds a ``>>>`` example (only those are imported: the daemon's
    Spark modules and the bench scripts stay unloaded)."""
    out = []
    for info in pkgutil.walk_packages(ivm_layer.__path__, prefix="ivm_layer."):
        if info.name.endswith("__main__"):
            continue
        rel = info.name.split(".")[1:]
        path = PACKAGE.joinpath(*rel, "__init__.py") if info.ispkg else PACKAGE.joinpath(*rel[:-1], rel[-1] + ".py")
        if ">>>" in path.read_text(encoding="utf-8"):
            out.append(info.name)
    return sorted(out)


MODULES = _modules_with_examples()


def _doctests(name: str) -> list[doctest.DocTest]:
    return [t for t in doctest.DocTestFinder().find(importlib.import_module(name)) if t.examples]


@pytest.mark.parametrize("module", MODULES)
def test_doctests(module):
    tests = _doctests(module)
    assert tests, f"{module} has '>>>' in its source but no doctest was found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    for t in tests:
        runner.run(t, out=report.append)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, "".join(report)
    assert attempted > 0


def _has_example(obj) -> bool:
    return ">>>" in (getattr(obj, "__doc__", None) or "")


def test_every_planner_pass_has_an_example():
    assert planner.RULES and all(_has_example(rule) for rule in planner.RULES), \
        [rule.__name__ for rule in planner.RULES if not _has_example(rule)]
    assert _has_example(planner.split_predicates) and _has_example(ivm_layer.gcqtext.parse_gcq)
    from ivm_layer.planner.params import plan_params
    from ivm_layer.planner.static import plan_static

    assert _has_example(planner.plan) or _has_example(planner)  # the package docstring plans Example 3
    assert _has_example(plan_static) and _has_example(plan_params)


ENGINE_OPERATIONS = ["insert", "delete", "apply", "diff", "rows", "rows_batches", "contains", "explain",
                     "subscribe", "prepare", "commit", "stats", "__len__"]


def test_every_public_engine_operation_has_an_example():
    from ivm_layer.engine.lookup import ParamView
    from ivm_layer.engine.view import View

    missing = [op for op in ENGINE_OPERATIONS if not _has_example(getattr(View, op))]
    assert not missing, f"View operations without a >>> example: {missing}"
    assert _has_example(ivm_layer.compile_view) and _has_example(ParamView.lookup)


def test_the_doctests_are_many_and_in_the_expected_modules():
    assert {"ivm_layer.compile", "ivm_layer.engine.view", "ivm_layer.engine.lookup", "ivm_layer.planner",
            "ivm_layer.planner.passes", "ivm_layer.planner.split", "ivm_layer.gcqtext"} <= set(MODULES)
    assert sum(len(t.examples) for m in MODULES for t in _doctests(m)) >= 60
