"""``python -m ivm_layer.bench.static_params --only ranges``: the range-lookup section runs at
small sizes with a baseline engine (this checkout loaded under another name) and writes a JSON
document with every engine, view and measure at every size and the growth between sizes. The
figures themselves are never asserted (machine-dependent); the answers each lookup returns are
(inside the benchmark: 5-row and empty answers)."""

import json
import os

from ivm_layer.bench import static_params

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_range_section_before_after_json(tmp_path, capsys):
    out = tmp_path / "sp.json"
    assert static_params.main(["--only", "ranges", "--range-sizes", "300,600", "--baseline", ROOT, "--budget-s", "0.01",
                               "--out", str(out)]) == 0
    doc = json.loads(out.read_text())["ranges"]
    assert doc["sizes"] == [300, 600] and doc["baseline"] == ROOT
    assert set(doc["us"]) == {"before", "after", "duckdb"}
    for eng in ("before", "after"):
        for n in ("300", "600"):
            for view in ("eq_range", "range_only"):
                m = doc["us"][eng][n][view]
                assert set(m) == {"lookup_5_rows_us", "lookup_empty_us", "insert_delete_us"}
                assert all(v > 0 for v in m.values())
    assert len(doc["growth"]["after.range_only.lookup_5_rows_us"]) == 1
    assert "after   range_only  lookup_5_rows_us" in capsys.readouterr().out
