"""The README: short, its two commands, its session example runs, its links lead into docs/."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEXT = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_is_at_most_150_lines():
    assert len(TEXT.splitlines()) <= 150


def test_the_two_commands_and_ci_run_the_same_tests():
    commands = re.search(r"## Two commands\n\n```bash\n(.*?)```", TEXT, re.S).group(1)
    lines = [ln for ln in commands.splitlines() if ln and not ln.startswith("#")]
    assert lines == ["python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/ivm demo",
                     "bash scripts/test.sh"]
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_quick_start_runs(tmp_path):
    code = re.search(r"## A session in 10 lines\n\n```python\n(.*?)```", TEXT, re.S).group(1)
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 10
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(1,)" in proc.stdout and "fraud: [((1, 7, 100, 50, 2, 7, 200, 60, 3, 7, 300, 500), 1)]" in proc.stdout


def test_serve_example_is_the_designed_one():
    block = re.search(r"## Any PostgreSQL client: `ivm serve`.*?```bash\n(.*?)```", TEXT, re.S).group(1)
    assert [ln.split("#")[0].strip() for ln in block.splitlines()] == [
        "ivm serve app.duckdb", "psql -h 127.0.0.1 -p 5433", "SUBSCRIBE fraud;"]


def test_links_lead_to_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    assert len([ln for ln in links if ln.startswith("docs/")]) >= 10
    missing = [ln for ln in links if "://" not in ln and not (ROOT / ln).exists()]
    assert not missing, missing
