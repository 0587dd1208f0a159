"""``python -m ivm_layer.bench.point_sql`` runs and writes its figures (DuckDB side; the figures
themselves are machine-dependent and never asserted)."""

from __future__ import annotations

import json

from ivm_layer.bench import point_sql


def test_point_sql_bench_writes_both_paths_and_the_baseline(tmp_path):
    out = tmp_path / "point_sql.json"
    assert point_sql.main(["--n", "500", "--reps", "40", "--no-postgres", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    duck = doc["duckdb"]
    for key in ("engine_lookup_us", "sql_param_us", "sql_literal_us", "sql_general_us", "plain_us"):
        assert duck[key] > 0, key
    assert duck["ratio"] == round(duck["sql_param_us"] / min(duck["plain_us"], duck["plain_again_us"]), 2)
    assert "postgres" not in doc and len(doc["loadavg_before"]) == 3
