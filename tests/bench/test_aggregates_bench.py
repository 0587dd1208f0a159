"""Smoke test of ``python -m ivm_layer.bench.aggregates`` at tiny sizes: it runs, writes the JSON and
Markdown documents with the documented shape, and the engine's final result equals DuckDB's
(no timing assertions: speed is measured by the benchmark, never asserted)."""

import glob
import json
import os
import pathlib
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RESULT_KEYS = {"scale", "rows_per_table", "keys", "join_rows_at_load", "groups", "updates", "engine_load_s",
               "join_only_us_per_update",
               "engine_us_per_update", "duckdb_updates_timed", "duckdb_us_per_update", "agrees"}


def test_aggregates_benchmark_writes_json_and_markdown_and_agrees_with_duckdb(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ivm_layer.bench.aggregates", "--sizes", "40,400", "--updates", "150",
                           "--duckdb-updates", "3", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (js,) = glob.glob(str(tmp_path / "aggregates-*.json"))
    (md,) = glob.glob(str(tmp_path / "aggregates-*.md"))
    doc = json.loads(pathlib.Path(js).read_text())
    assert doc["benchmark"] == "aggregates" and "GROUP BY r.a" in doc["sql"]
    assert [r["rows_per_table"] for r in doc["results"]] == [40, 400]
    for r in doc["results"]:
        assert RESULT_KEYS <= set(r), RESULT_KEYS - set(r)
        assert r["agrees"] is True
        assert r["engine_us_per_update"] > 0 and r["duckdb_us_per_update"] > 0
        assert r["groups"] > 0 and r["join_rows_at_load"] > 0
    assert isinstance(doc["flat"], bool) and doc["verdict"].startswith("Engine per-update cost")
    assert doc["machine"]["cpu_count"]
    text = pathlib.Path(md).read_text()
    assert "| 10.0× | 400 |" in text and doc["verdict"] in text
    assert doc["results"][1]["join_only_us_per_update"] > 0
