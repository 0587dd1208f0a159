"""`ivm demo` streams the fraud example through a DuckDB session and matches recomputation."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_runs_and_matches_recomputation():
    proc = subprocess.run([sys.executable, "-m", "ivm_layer", "demo", "--history", "2000", "--rows", "2000", "--batch", "20", "--plan"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "the session is" in out and "x faster" in out  # the race against DuckDB recomputation
    assert "materialized core" in out          # --plan shows the plan
    assert "pattern: account" in out           # detections are printed as they appear
    assert out.rstrip().endswith("match")      # the view equals DuckDB's recomputation
    assert "100%" in proc.stderr               # progress bar
