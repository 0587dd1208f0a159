"""The manual builds, and its examples run as written.

- ``mkdocs build --strict`` into a temporary directory (a broken link, anchor or API reference
  fails the build);
- every ``python`` block of README.md and docs/*.md runs in a fresh interpreter, and a line
  ``print(…)  # OUTPUT`` (OUTPUT starting like a Python value, or ``class:``) must print OUTPUT
  (up to `` — `` or ``]: ``/``): `` and the words after it);
- a block preceded by ``<!-- docs-test: postgres … -->`` runs against a fresh database of the test
  cluster (its ``postgresql://app@127.0.0.1/shop`` is replaced by that database's URL); one
  preceded by ``<!-- docs-test: skip (why) -->`` is not run, visibly in the page;
- every ``pycon`` block runs as a doctest (the blocks of one page share their names).
"""

from __future__ import annotations

import doctest
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
EXAMPLE_URL = "postgresql://app@127.0.0.1/shop"
FENCE = re.compile(r"(?:^<!-- docs-test: (?P<mark>\w+)[^>]*-->\n)?^```(?P<lang>\w+)[^\n]*\n(?P<code>.*?)^```",
                   re.M | re.S)
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}


def blocks(lang: str) -> list[tuple[str, int, str, str]]:
    """``(page, index, mark, code)`` of every fenced block of ``lang`` in README.md and docs/."""
    out = []
    for page in PAGES:
        found = [m for m in FENCE.finditer(page.read_text(encoding="utf-8")) if m["lang"] == lang]
        for i, m in enumerate(found):
            out.append((str(page.relative_to(ROOT)), i, m["mark"] or "run", m["code"]))
    return out


def expected_prints(code: str) -> list[str]:
    """The outputs the block's ``print(…)  # OUTPUT`` lines announce."""
    out = []
    for line in code.splitlines():
        m = re.match(r"\s*print\(.*\)\s+#\s(?P<comment>.+)$", line)
        if m and (m["comment"][0] in "([{'\"-0123456789" or m["comment"].startswith("class: ")):
            out.append(re.split(r" — |(?<=[\])]): ", m["comment"])[0].strip())
    return out


def run_block(code: str, cwd: pathlib.Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=180,
                          env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for want in expected_prints(code):
        assert want in proc.stdout, f"expected {want!r} in the output:\n{proc.stdout[-3000:]}"
    return proc.stdout


PYTHON = blocks("python")


def test_the_pages_hold_examples_of_every_kind():
    marks = {mark for _, _, mark, _ in PYTHON}
    assert {"run", "postgres"} <= marks and len(PYTHON) >= 6
    assert sum(len(expected_prints(code)) for *_, code in PYTHON) >= 8
    assert len(blocks("pycon")) >= 3
    assert not [b for b in PYTHON if b[2] not in ("run", "postgres", "skip")]


@pytest.mark.parametrize("page,index,mark,code", [b for b in PYTHON if b[2] == "run"],
                         ids=[f"{b[0]}#{b[1]}" for b in PYTHON if b[2] == "run"])
def test_python_block_runs(page, index, mark, code, tmp_path):
    run_block(code, tmp_path)


@pytest.mark.parametrize("page,index,mark,code", [b for b in PYTHON if b[2] == "postgres"],
                         ids=[f"{b[0]}#{b[1]}" for b in PYTHON if b[2] == "postgres"])
def test_postgres_block_runs(page, index, mark, code, pg_url, tmp_path):
    assert EXAMPLE_URL in code, f"{page}: a postgres block names {EXAMPLE_URL} (the test replaces it)"
    run_block(code.replace(EXAMPLE_URL, pg_url), tmp_path)


@pytest.mark.parametrize("page", sorted({b[0] for b in blocks("pycon")}))
def test_pycon_blocks_are_doctests(page):
    text = "\n".join(code for b_page, _, _, code in blocks("pycon") if b_page == page)
    test = doctest.DocTestParser().get_doctest(text, {}, page, page, 0)  # one test: the blocks share names
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    runner.run(test, out=report.append)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted and failed == 0, "".join(report)


def test_mkdocs_builds_strict(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(site)], cwd=ROOT, capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    for name in ("compile_view", "split_filters", "keys_first", "CyclicQueryError", "fetchall"):
        assert name in reference, name
    assert "free-connex" in reference  # a rendered >>> example
    assert "<blockquote>" not in reference  # doctest lines rendered as code, not as quotes
    built = {p.relative_to(site).parts[0] for p in site.glob("*/index.html")}
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"index"}
    assert pages <= built, pages - built


def test_tables_are_not_broken_by_paragraphs():
    """A table's rows follow each other; text between two rows, or right after the last one,
    would end it (the old README had a paragraph inside its statement table)."""
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        in_fence = False
        for i, line in enumerate(lines):
            if line.startswith("```"):
                in_fence = not in_fence
            if in_fence or not line.startswith("|"):
                continue
            before = lines[i - 1] if i else ""
            after = lines[i + 1] if i + 1 < len(lines) else ""
            assert before.startswith("|") or not before.strip(), f"{page.name}:{i + 1}: text right before a table row"
            assert after.startswith("|") or not after.strip(), f"{page.name}:{i + 2}: text right after a table row"


def test_the_benchmark_results_section_is_where_the_generator_writes():
    from ivm_layer.bench import report

    text = (ROOT / report.DOCS_PAGE).read_text(encoding="utf-8")
    assert report.DOCS_PAGE == "docs/benchmarks.md"
    assert text.count(report.START) == 1 and text.count(report.END) == 1
    section = text[text.index(report.START):text.index(report.END)]
    assert "| workload | N | ivm-pull |" in section and "Run of " in section
    assert report.START not in (ROOT / "README.md").read_text(encoding="utf-8")


#: names the pages use that are not files of this repository: files a run writes, and sqlglot's test
NOT_OURS = {"results.json", "status.json", "tests/test_docs.py"}


def test_paths_the_pages_name_exist():
    """Every `path/like/this.py` or `folder/` a page names is a file or folder of the repository
    (a path may be given relative to a package folder, e.g. `planner/layout.py`)."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files += [str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")]
    dirs = {"/".join(f.split("/")[:i]) + "/" for f in files for i in range(1, f.count("/") + 1)}
    missing = []
    for page in PAGES:
        for tok in re.findall(r"`([^`\s]+)`", page.read_text(encoding="utf-8")):
            if any(c in tok for c in "~<>*{}$:=(") or tok.startswith(("-", "/", ".")) or tok in NOT_OURS:
                continue
            if re.search(r"\.(py|sql|toml|yml|yaml|md|json)$", tok) or re.fullmatch(r"[\w/]+/", tok):
                known = any(f == tok or f.endswith("/" + tok) for f in files) or any(
                    d == tok or d.endswith("/" + tok) for d in dirs)
                if not known:
                    missing.append(f"{page.name}: {tok}")
    assert not missing, missing
