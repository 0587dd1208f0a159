"""``python -m ivm_layer.bench.bulk_paths``: the bulk paths and the demo-shaped stream, before and
after, in one run (issue 25, items 2 and 4).

    python -m ivm_layer.bench.bulk_paths --baseline DIR [--rows 1000000] [--rounds 2]

Each round runs one child process per checkout (``--baseline DIR``: an older one, e.g. main's
tip; then this one), alternating, so that both see the same machine; every child imports its
checkout's ``ivm_layer`` and runs the measurement functions both checkouts share
(:mod:`ivm_layer.bench.bulk_load`, :func:`ivm_layer.bench.session.stream_race`):

* ``apply_rows_per_s``: ``view.apply`` of one ``--rows``-row batch into the equi-join
  ``SELECT * FROM r, s WHERE r.b = s.b`` (engine alone);
* ``create_view_rows_per_s``: ``CREATE INCREMENTAL VIEW`` of that join over ``--rows`` rows in
  DuckDB, through a session (the SQL front-end's first import included, as a user pays it);
* ``insert_select_ratio``: a 100k-row ``INSERT … SELECT`` through the session over plain DuckDB;
* ``stream_join_ratio`` / ``stream_fraud_ratio``: ``--statements`` 200-row ``INSERT … VALUES``
  with ``SELECT count(*) FROM v`` after each, DuckDB recomputing the view over the session
  (history 100k rows).

Wall-clock figures on a shared machine: the JSON (``--out``) keeps every round's figures and
``uptime`` before and after; compare the two checkouts within a round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_CHILD = r"""
import json, os, sys, gc
import ivm_layer
root = os.path.realpath(sys.argv[1])
assert os.path.realpath(ivm_layer.__file__).startswith(root + os.sep), (ivm_layer.__file__, root)
from ivm_layer.bench.bulk_load import apply_rate, data, session_figures
from ivm_layer.bench.session import stream_race
n, statements = int(sys.argv[2]), int(sys.argv[3])
out = {}
r_rows, s_rows = data(n)
apply_rate(ivm_layer, r_rows[:5000], s_rows[:500])
out["apply_rows_per_s"] = round(n / apply_rate(ivm_layer, r_rows, s_rows))
del r_rows, s_rows
gc.collect()
out.update(session_figures(n))
for view in ("join", "fraud"):
    got = stream_race(statements, view=view)
    out[f"stream_{view}"] = got
    out[f"stream_{view}_ratio"] = got["ratio"]
print("RESULT " + json.dumps(out))
"""

KEYS = ["apply_rows_per_s", "create_view_rows_per_s", "insert_select_100k_s", "insert_select_100k_plain_s",
        "insert_select_ratio", "stream_join_ratio", "stream_fraud_ratio"]


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], check=False, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"load average {os.getloadavg()}"


def child(root: str, rows: int, statements: int) -> dict:
    env = dict(os.environ, PYTHONPATH=root)
    env.pop("IVM_COMPILE", None)
    p = subprocess.run([sys.executable, "-c", _CHILD, root, str(rows), str(statements)], check=False, env=env,
                       capture_output=True, text=True, cwd=root, timeout=3600)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"the measurement in {root} failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.bulk_paths", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", required=True, help="a checkout of an older ivm-layer (before)")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--statements", type=int, default=50, help="200-row INSERTs in the stream race")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="bench-results/bulk_paths.json")
    a = p.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    roots = {"before": os.path.abspath(a.baseline), "after": here}
    doc: dict = {"benchmark": "bulk_paths", "rows": a.rows, "statements": a.statements,
                 "baseline": roots["before"], "uptime_start": uptime(), "rounds": []}
    for i in range(a.rounds):
        rnd = {}
        for label in (("before", "after") if i % 2 == 0 else ("after", "before")):
            t0 = time.perf_counter()
            rnd[label] = child(roots[label], a.rows, a.statements)
            rnd[label]["wall_s"] = round(time.perf_counter() - t0, 1)
            rnd[label]["uptime"] = uptime()
            print(label, {k: rnd[label].get(k) for k in KEYS}, rnd[label]["uptime"], flush=True)
        doc["rounds"].append(rnd)
    doc["median"] = {label: {k: statistics.median(r[label][k] for r in doc["rounds"]) for k in KEYS}
                     for label in roots}
    doc["uptime_end"] = uptime()
    print(f"{'figure':<28} {'before':>12} {'after':>12}")
    for k in KEYS:
        print(f"{k:<28} {doc['median']['before'][k]:>12} {doc['median']['after'][k]:>12}")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {a.out}; {doc['uptime_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
