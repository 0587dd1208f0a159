"""``pip install ivm-layer`` without extras runs the README's quick start.

- In CI (cheap): the quick start runs with every installed distribution that the core
  ``dependencies`` of pyproject.toml do not pull in (their transitive requirements as
  installed, no extras) made unimportable — as in a fresh ``pip install ivm-layer`` — and the
  package list in pyproject.toml is the one top-level package.
- ``slow``: the real thing — ``pip wheel --no-deps .`` (one top-level package in it), a fresh
  virtual environment, ``pip install`` of the wheel (its dependencies from the index or pip's
  cache), the quick start run from outside the checkout.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parent.parent


def quick_start() -> str:
    text = (ROOT / "README.md").read_text()
    return re.search(r"## A session in 10 lines\n\n```python\n(.*?)```", text, re.S).group(1)


def core_closure() -> set[str]:
    """Distributions the core dependencies pull in, as installed here (no extras)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    todo = [Requirement(d) for d in deps]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        extras = req.extras or {""}
        for text in metadata.requires(req.name) or ():
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return seen


HIDE = """
import importlib.abc, sys
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            BLOCKED.add(name.split(".")[0])
            raise ModuleNotFoundError(f"No module named {name!r} (not a core dependency)", name=name)
        return None
BLOCKED = set()
sys.meta_path.insert(0, _NotInstalled())
"""


def test_the_quick_start_runs_with_only_the_core_dependencies():
    owners = metadata.packages_distributions()
    closure = core_closure()
    hidden = sorted(mod for mod, dists in owners.items()
                    if mod not in sys.stdlib_module_names and mod != "ivm_layer"
                    and not {canonicalize_name(d) for d in dists} & closure)
    assert "pandas" in hidden and "pyspark" in hidden and "pyarrow" not in hidden
    probe = (f"HIDDEN = {set(hidden)!r}\n" + HIDE + quick_start()
             + "\nimport json\nprint(json.dumps(sorted(BLOCKED)))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "(1,)" in out.stdout
    blocked = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(blocked) <= set(hidden)          # optional imports that were refused, and survived
    assert {"pyarrow", "duckdb", "sqlglot"} <= closure


def test_one_top_level_package_is_declared():
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["ivm_layer*"]
    assert not [p for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name != "ivm_layer"]


def check_wheel(wheel: pathlib.Path) -> None:
    """One top-level package, the SQL examples inside it, pyarrow among the core requirements."""
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"ivm_layer"}
    assert "ivm_layer/sql_examples/fraud.sql" in names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [ln for ln in zipfile.ZipFile(wheel).read(meta).decode().splitlines()
                if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert any(ln.split()[1].startswith("pyarrow") for ln in requires)


@pytest.mark.slow
def test_pip_install_without_extras_runs_the_quick_start(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("ivm_layer-*.whl")
    check_wheel(wheel)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                         timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    frozen = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    assert "pyspark" not in frozen and "pandas" not in frozen   # no extras came along
    run = subprocess.run([str(py), "-c", quick_start()], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "(1,)" in run.stdout
    where = subprocess.run([str(py), "-c", "import ivm_layer; print(ivm_layer.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path, check=True).stdout
    assert str(venv) in where                   # the installed copy ran, not the checkout
