"""Smoke test of ``python -m ivm_layer.bench.window`` at tiny sizes: it runs, writes its JSON and
Markdown, and the engine's views agree with DuckDB's (timings are never asserted)."""

import glob
import json
import subprocess
import sys


def test_window_benchmark_writes_json_and_agrees_with_duckdb(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ivm_layer.bench.window", "--n", "300", "--updates", "40",
                           "--duckdb-updates", "2", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (js,) = glob.glob(str(tmp_path / "window-*.json"))
    (md,) = glob.glob(str(tmp_path / "window-*.md"))
    doc = json.loads(open(js).read())
    assert doc["benchmark"] == "window" and set(doc["growth"]) == {"top10", "row_number"}
    assert [r["rows"] for r in doc["results"]] == [300, 2400, 300, 2400]
    assert all(r["agrees"] for r in doc["results"])
    assert all(r["engine_us_per_update"] > 0 and r["duckdb_us_per_update"] > 0 for r in doc["results"])
    assert "row_number" in open(md).read()
