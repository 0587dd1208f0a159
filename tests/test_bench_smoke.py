"""`ivm bench` runs the engine benchmark end to end (tiny sizes); its systems agree on every workload."""

import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_engine_smoke_quick(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run([sys.executable, "-m", "ivm_layer", "bench", "--quick", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    docs = [json.load(open(p)) for p in glob.glob(str(out / "*.json"))]
    assert len(docs) == 1
    results = docs[0]["results"]
    ours = [r for r in results if r["system"] == "ivm"]
    assert {r["workload"] for r in ours} >= {"Q1", "Q2", "Q4", "Q5", "Q7", "fraud"}
    for r in ours:
        assert r["status"] == "ok", r
        assert r["updates_per_s"] > 0
        assert r["agrees_with_others"], r["workload"]
        if not r["enum"]["truncated"]:  # enumeration ran to the end: it must match len()
            assert r["enum_sum_k_matches_len"] and r["enum_rows_unique"], r["workload"]
    measured = [r for r in ours if "peak_mb" in r]
    assert measured and all(r["peak_mb"] > 0 for r in measured)
