"""Window functions and Top-N (issue 30): per-update cost at n and 8n, beside DuckDB recomputing.

    python -m ivm_layer.bench.window [--n 20000] [--updates 2000] [--quick] [--out bench-results]

Two views over ``t(g, x, id)`` with ``GROUPS`` partitions (so a partition holds n / GROUPS rows
and grows with n):

* **top10** — ``SELECT * FROM (SELECT g, x, id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC,
  id) AS rn FROM t) s WHERE rn <= 10``. Updates: a row with a random ``g`` and ``x`` is inserted,
  then deleted (the state stays at n rows); most land below the top 10 (O(log n), no change),
  some enter it (the rows entering and leaving the top 10 and the ranks shifting inside it).
* **row_number** — ``SELECT g, x, id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x, id) AS rn FROM
  t``. Updates that move O(1) ranks: a row with an ``x`` above its partition's largest is inserted
  (it takes the last rank; no other row's rank changes), then deleted. For contrast the JSON also
  has ``random_position_us``: a row at a random position shifts every later rank of its partition
  (the view's change is ~ n / (2 · GROUPS) rows by definition).

Each update is one ``view.diff`` (the change is computed and returned: push mode); medians and
90th percentiles in µs. DuckDB recomputes the same view after one single-row insert
(``CREATE OR REPLACE TEMP TABLE … AS <view>``, one thread), timed on a few updates per size.
The view is checked against DuckDB's at the end of every size (``agrees``). Writes
``OUT/window-<UTC time>.json`` and ``.md``. Timings are machine-dependent and never asserted.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import pathlib
import platform
import random
import statistics
import sys
import time

import duckdb

GROUPS = 50
VIEWS = {
    "top10": "SELECT * FROM (SELECT g, x, id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC, id) AS rn FROM t) s "
             "WHERE rn <= 10",
    "row_number": "SELECT g, x, id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x, id) AS rn FROM t",
}
SCHEMA = {"t": {"g": "INTEGER", "x": "INTEGER", "id": "INTEGER"}}
GROWTH_TARGET = 2.0


def _stats(samples: list[float]) -> dict:
    s = sorted(samples)
    return {"median_us": round(statistics.median(s) * 1e6, 2),
            "p90_us": round(s[int(0.9 * (len(s) - 1))] * 1e6, 2), "samples": len(s)}


def run_view(name: str, n: int, updates: int, duck_updates: int, seed: int) -> dict:
    import ivm_layer

    sql = VIEWS[name]
    rng = random.Random(f"{name}:{n}:{seed}")
    rows = [(rng.randrange(GROUPS), rng.randrange(10 * n), i) for i in range(n)]
    view = ivm_layer.compile_view(sql, SCHEMA)
    t0 = time.perf_counter()
    view.apply({"t": [(r, 1) for r in rows]})
    load_s = time.perf_counter() - t0
    top = collections.defaultdict(int)
    for g, x, _ in rows:
        top[g] = max(top[g], x)
    next_id = n
    ins, dels, changed = [], [], []
    for _ in range(updates):
        g = rng.randrange(GROUPS)
        if name == "row_number":  # past the partition's largest x: takes the last rank only
            top[g] += 1
            row = (g, top[g], next_id)
        else:
            row = (g, rng.randrange(10 * n), next_id)
        next_id += 1
        t0 = time.perf_counter()
        change = view.diff({"t": [(row, 1)]})
        t1 = time.perf_counter()
        view.diff({"t": [(row, -1)]})
        t2 = time.perf_counter()
        ins.append(t1 - t0)
        dels.append(t2 - t1)
        changed.append(len(change))
    out = {"view": name, "rows": n, "partitions": GROUPS, "updates": updates, "engine_load_s": round(load_s, 3),
           "engine_insert": _stats(ins), "engine_delete": _stats(dels),
           "engine_us_per_update": round(statistics.median(ins + dels) * 1e6, 2),
           "mean_change_rows_per_insert": round(statistics.mean(changed), 2)}
    if name == "row_number":
        rand = []
        for _ in range(max(20, updates // 20)):
            row = (rng.randrange(GROUPS), rng.randrange(10 * n), next_id)
            next_id += 1
            t0 = time.perf_counter()
            view.diff({"t": [(row, 1)]})
            rand.append(time.perf_counter() - t0)
            view.diff({"t": [(row, -1)]})
        out["random_position_us"] = _stats(rand)
    # DuckDB recomputing the view after each single-row insert (and the delete that undoes it)
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("CREATE TABLE t (g INTEGER, x INTEGER, id INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows) if n <= 2000 else _bulk(con, rows)
    duck = []
    for _ in range(duck_updates):
        row = (rng.randrange(GROUPS), rng.randrange(10 * n), next_id)
        next_id += 1
        t0 = time.perf_counter()
        con.execute("INSERT INTO t VALUES (?, ?, ?)", row)
        con.execute(f"CREATE OR REPLACE TEMP TABLE v AS {sql}")
        duck.append(time.perf_counter() - t0)
        con.execute("DELETE FROM t WHERE id = ?", [row[2]])
    out["duckdb_recompute"] = _stats(duck)
    out["duckdb_us_per_update"] = out["duckdb_recompute"]["median_us"]
    want = collections.Counter(map(tuple, con.execute(sql).fetchall()))
    got = collections.Counter(dict(view.rows()))
    out["agrees"] = want == got
    out["view_rows"] = sum(got.values())
    con.close()
    return out


def _bulk(con, rows: list[tuple]) -> None:
    try:
        import pyarrow as pa
    except ImportError:
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
        return
    tbl = pa.table({"g": [r[0] for r in rows], "x": [r[1] for r in rows], "id": [r[2] for r in rows]})
    con.register("rows_in", tbl)
    con.execute("INSERT INTO t SELECT g, x, id FROM rows_in")
    con.unregister("rows_in")


def markdown(doc: dict) -> str:
    lines = [f"# Window functions and Top-N: per-update cost at n and 8n ({doc['created']})", "",
             f"{doc['partitions']} partitions; each update is one `view.diff` (insert, then the delete that "
             f"undoes it); DuckDB recomputes the view after one insert. Load: {doc['load_before']} → "
             f"{doc['load_after']} (1-minute load average; {doc['machine']['cpu_count']} CPUs).", "",
             "| view | rows | engine µs/update (median) | p90 insert | rows changed / insert | DuckDB recompute µs "
             "| speed-up | agrees |",
             "|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        speed = r["duckdb_us_per_update"] / r["engine_us_per_update"] if r["engine_us_per_update"] else 0
        lines.append(f"| {r['view']} | {r['rows']} | {r['engine_us_per_update']} | {r['engine_insert']['p90_us']} "
                     f"| {r['mean_change_rows_per_insert']} | {r['duckdb_us_per_update']} | {speed:.0f}× "
                     f"| {r['agrees']} |")
    lines += [""]
    for v, g in doc["growth"].items():
        lines.append(f"- {v}: engine cost at 8n / at n = {g['engine']:.2f} (target ≤ {GROWTH_TARGET}); "
                     f"DuckDB {g['duckdb']:.2f}")
    rn = [r for r in doc["results"] if "random_position_us" in r]
    if rn:
        lines.append("- row_number, a row inserted at a random position (shifts every later rank): "
                     + ", ".join(f"{r['random_position_us']['median_us']} µs at n={r['rows']}" for r in rn))
    lines += ["", f"Machine: {doc['machine']['platform']}, Python {doc['machine']['python']}; "
              f"DuckDB {doc['machine']['duckdb']} (1 thread); seed {doc['seed']}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ivm_layer.bench.window", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, help="rows at the smaller size (default 20,000; quick 2,000); the other is 8n")
    ap.add_argument("--updates", type=int, help="timed updates per view and size (default 2,000; quick 300)")
    ap.add_argument("--duckdb-updates", type=int, help="updates DuckDB recomputation is timed on (default 10)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="bench-results")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args(argv)
    n = a.n or (2000 if a.quick else 20000)
    updates = a.updates or (300 if a.quick else 2000)
    duck_updates = a.duckdb_updates or (5 if a.quick else 10)
    load_before = os.getloadavg()[0]
    results = []
    for name in VIEWS:
        for size in (n, 8 * n):
            print(f"window: {name} at {size} rows …", file=sys.stderr, flush=True)
            r = run_view(name, size, updates, duck_updates, a.seed)
            results.append(r)
            print(f"  engine {r['engine_us_per_update']} µs/update, DuckDB {r['duckdb_us_per_update']} µs, "
                  f"agrees={r['agrees']}", file=sys.stderr, flush=True)
    growth = {}
    for name in VIEWS:
        small, big = [r for r in results if r["view"] == name]
        growth[name] = {"engine": round(big["engine_us_per_update"] / small["engine_us_per_update"], 3),
                        "duckdb": round(big["duckdb_us_per_update"] / small["duckdb_us_per_update"], 3)}
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"benchmark": "window", "created": created, "views": VIEWS, "partitions": GROUPS, "seed": a.seed,
           "quick": a.quick, "results": results, "growth": growth, "growth_target": GROWTH_TARGET,
           "within_target": all(g["engine"] <= GROWTH_TARGET for g in growth.values()),
           "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpu_count": os.cpu_count(), "duckdb": duckdb.__version__}}
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"window-{created.replace(':', '')}"
    pathlib.Path(f"{stem}.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    pathlib.Path(f"{stem}.md").write_text(markdown(doc))
    print(markdown(doc))
    print(f"wrote {stem}.json and {stem}.md", file=sys.stderr)
    return 0 if all(r["agrees"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
