"""``python -m ivm_layer.bench.multi_ineq``: views with several inequalities on one edge.

    python -m ivm_layer.bench.multi_ineq                         # n = 2k, 4k, 8k, 16k rows per table
    python -m ivm_layer.bench.multi_ineq --baseline DIR --out mi.json

Per query and n (rows per table, the compared columns uniform in 0..10n), for this engine and, with
``--baseline DIR`` (an older checkout, e.g. ``git worktree add DIR main``), that one in the same
process on the same data, alternating:

* ``bulk_s``: ``view.apply`` of both tables' n rows in one batch (CPU seconds of the thread;
  ``bulk_wall_s`` the wall time);
* ``update_us``: per table, the median of ``--samples`` single-row inserts (each followed by the
  delete of the same row, not timed), CPU µs;
* ``enum``: ``view.rows_batches(1)`` (one row at a time) read for up to ``--enum-cap`` rows, three
  times: the time to the first row, the largest gap between two consecutive rows (the
  enumeration delay) and the 99.9th percentile gap, CPU µs, of the read with the smallest largest
  gap (``max_gap_us_runs``: all three; ``max_gap_wall_us``: wall time, which on a loaded machine
  mostly measures the scheduler).

CPU time of the measuring thread is the figure: on a shared machine a wall-clock gap is mostly
time other processes held the CPU.

A figure whose projected time exceeds ``--budget`` seconds (the baseline's bulk load is quadratic)
is skipped, saying so, rather than run. The JSON carries the load average before and after.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time

QUERIES = {
    "2ineq": "SELECT * FROM R, S WHERE R.a < S.d AND R.b < S.e",
    "2ineq+eq": "SELECT * FROM R, S WHERE R.a < S.d AND R.b >= S.e AND R.k = S.k",
    "3ineq": "SELECT * FROM R, S WHERE R.a < S.d AND R.b < S.e AND R.c > S.f",
    "2ineq-3table": "SELECT * FROM R, S, T WHERE R.a < S.d AND R.b < S.e AND S.k = T.k",
}
SCHEMA = {"R": ["a", "b", "c", "k"], "S": ["d", "e", "f", "k"], "T": ["g", "k"]}
DEGREE = 35  # rows per key value of k


def _tables(sql: str) -> list[str]:
    return [t for t in SCHEMA if f"{t}." in sql]


def _row(rng: random.Random, table: str, n: int) -> tuple:
    k = rng.randrange(max(1, n // DEGREE))
    if table == "T":
        return (rng.randrange(10 * n), k)
    return (rng.randrange(10 * n), rng.randrange(10 * n), rng.randrange(10 * n), k)


def measure(mod, name: str, n: int, samples: int, enum_cap: int, seed: int = 7) -> dict:
    sql = QUERIES[name]
    tables = _tables(sql)
    rng = random.Random(f"{name}:{n}:{seed}")
    data = {t: [(_row(rng, t, n), 1) for _ in range(n)] for t in tables}
    v = mod.compile_view(sql, {t: SCHEMA[t] for t in tables})
    gc.collect()
    t0, c0 = time.perf_counter(), time.thread_time()
    v.apply(data)
    out: dict = {"bulk_s": round(time.thread_time() - c0, 4), "bulk_wall_s": round(time.perf_counter() - t0, 4)}
    upd = {}
    for t in tables:
        times = []
        for _ in range(samples):
            row = _row(rng, t, n)
            t0 = time.thread_time()
            v.insert(t, row)
            times.append(time.thread_time() - t0)
            v.delete(t, row)
        upd[t] = round(statistics.median(times) * 1e6, 2)
    out["update_us"] = upd
    list(zip(range(2), v.rows()))  # the enumeration code is generated once per view: not timed
    runs = [_gaps(v, enum_cap) for _ in range(3)]
    best = min(runs, key=lambda r: r["max_gap_us"])  # the quietest of three reads
    best["max_gap_us_runs"] = [r["max_gap_us"] for r in runs]
    best["view_rows"] = len(v)
    out["enum"] = best
    return out


def _gaps(v, cap: int) -> dict:
    """Read ``rows_batches(1)`` (one row per step, so a gap is the delay before one row, not a
    512-row batch of ``rows()``) for up to ``cap`` rows: CPU µs to the first row, the largest
    gap and the 99.9th percentile gap, and the wall-clock largest gap."""
    clock, wall = time.thread_time, time.perf_counter
    gaps = []
    wgap = 0.0
    start = last = clock()
    wlast = wall()
    first = None
    for batch in v.rows_batches(1):
        now, wnow = clock(), wall()
        if first is None:
            first = now - start
        else:
            gaps.append(now - last)
            wgap = max(wgap, wnow - wlast)
        last, wlast = now, wnow
        if len(gaps) + 1 >= cap:
            break
    gaps.sort()
    return {"rows_read": len(gaps) + (first is not None), "first_row_us": round((first or 0) * 1e6, 1),
            "max_gap_us": round(gaps[-1] * 1e6, 1) if gaps else 0.0,
            "p999_gap_us": round(gaps[int(len(gaps) * 0.999)] * 1e6, 1) if gaps else 0.0,
            "max_gap_wall_us": round(wgap * 1e6, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.multi_ineq", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("queries", nargs="*", default=["2ineq", "2ineq+eq"])
    p.add_argument("--sizes", default="2000,4000,8000,16000")
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--enum-cap", type=int, default=100_000)
    p.add_argument("--baseline", help="an older checkout to measure beside this one")
    p.add_argument("--budget", type=float, default=120.0, help="seconds a bulk load may be projected to take")
    p.add_argument("--out", help="write the JSON here (also printed)")
    a = p.parse_args(argv)
    import ivm_layer

    engines = [("after", ivm_layer)]
    if a.baseline:
        from .floor import load_engine

        engines.append(("before", load_engine(a.baseline)))
    sizes = [int(x) for x in a.sizes.split(",")]
    doc: dict = {"load_before": os.getloadavg(), "sizes": sizes, "queries": {}, "cpus": os.cpu_count()}
    for q in a.queries:
        res: dict = {"sql": QUERIES[q]}
        last_bulk: dict = {}
        for n in sizes:
            for label, mod in engines:
                prev = last_bulk.get(label)
                if prev is not None and prev[1] * (n / prev[0]) ** 2 > a.budget:
                    r = {"skipped": f"projected bulk load over {a.budget:.0f} s "
                                    f"({prev[1]:.1f} s at n={prev[0]}, quadratic)"}
                else:
                    r = measure(mod, q, n, a.samples, a.enum_cap)
                    last_bulk[label] = (n, r["bulk_s"])
                res.setdefault(label, {})[str(n)] = r
                print(q, n, label, json.dumps(r), flush=True)
        res["growth_8x"] = _growth(res, sizes)
        doc["queries"][q] = res
    doc["load_after"] = os.getloadavg()
    text = json.dumps(doc, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


def _growth(res: dict, sizes: list[int]) -> dict:
    """Ratios of the largest size's figures to the size 8× smaller (when both were measured)."""
    out: dict = {}
    big = max(sizes)
    small = big // 8
    if small not in sizes:
        return out
    for label in ("after", "before"):
        r1, r2 = res.get(label, {}).get(str(small)), res.get(label, {}).get(str(big))
        if not r1 or not r2 or "skipped" in r1 or "skipped" in r2:
            continue
        g = {"bulk": round(r2["bulk_s"] / r1["bulk_s"], 2),
             "max_gap": round(r2["enum"]["max_gap_us"] / max(r1["enum"]["max_gap_us"], 1e-9), 2)}
        for t in r1["update_us"]:
            g[f"update_{t}"] = round(r2["update_us"][t] / r1["update_us"][t], 2)
        out[label] = g
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    raise SystemExit(main())
