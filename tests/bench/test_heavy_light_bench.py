"""``python -m ivm_layer.bench.heavy_light`` runs and writes its JSON (shape only; timings are
never asserted)."""

import json

from ivm_layer.bench import heavy_light


def test_heavy_light_bench_writes_the_curve(tmp_path):
    out = tmp_path / "hl.json"
    assert heavy_light.main(["--n", "60", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc["results"]) == {"60", "480"} and len(doc["load_start"]) == 3
    row = doc["results"]["480"]
    assert set(row) == {"answer_map", "epsilon=0", "epsilon=0.25", "epsilon=0.5", "epsilon=0.75", "epsilon=1"}
    for v in row.values():
        assert v["update_us"]["median"] > 0 and v["lookup"]["delay_us_mean"] > 0 and v["hub_degree"] > 0
    assert row["epsilon=0"]["heavy_keys"] > 0 and row["epsilon=1"]["heavy_keys"] == 0
