"""`ivm bench --quick` end to end through the CLI (a few workloads, two sizes): one JSON
document per run, results.json, summary.md, PNG plots, and the README section generator."""

import glob
import json
import os
import pathlib
import subprocess
import sys

from ivm_layer.bench import report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KEYS = {"workload", "system", "mode", "n", "n_requested", "status", "updates_per_s", "peak_rss_mb",
        "view_size", "machine", "seed", "created", "sql"}


def test_quick_cli_writes_json_markdown_and_plots(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run([sys.executable, "-m", "ivm_layer", "bench", "--quick", "--sizes", "120,240",
                           "Q2", "fraud-temporal", "AQ18", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = glob.glob(str(out / "run-*"))
    docs = [json.loads(pathlib.Path(p).read_text()) for p in glob.glob(os.path.join(run, "runs", "*.json"))]
    assert len(docs) == 3 * 2 * 6  # workloads x sizes x systems
    for d in docs:
        if d["status"] == "ok":
            assert KEYS <= set(d), KEYS - set(d)
            assert d["updates_per_s"] > 0 and d["peak_rss_mb"] > 0 and d["machine"]["cpu_count"]
        else:
            assert d["status"] == "skipped" and d["reason"], d
    ours = [d for d in docs if d["system"] == "ivm-pull" and d["workload"] != "AQ18"]
    assert len(ours) == 4 and all(d["status"] == "ok" and d["agrees"] for d in ours)
    assert all(d["enum"]["list_tuples_per_s"] for d in ours if d["view_size"])
    whole = json.loads(pathlib.Path(run, "results.json").read_text())
    assert whole["checks"] and all(c["agree"] for c in whole["checks"])
    summary = pathlib.Path(run, "summary.md").read_text()
    assert "Cross-check" in summary and "| Q2 | 240 | ivm-pull | ok |" in summary
    pngs = glob.glob(os.path.join(run, "plots", "*.png"))
    assert {os.path.basename(p) for p in pngs} >= {"Q2.png", "fraud-temporal.png", "overview-throughput.png"}
    assert all(pathlib.Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\nbefore\n{report.START}\nold numbers\n{report.END}\nafter\n")
    assert report.main([run, "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# x\nbefore\n" + report.START) and text.endswith(report.END + "\nafter\n")
    assert "old numbers" not in text and "| Q2 | 240 |" in text and whole["created"] in text
