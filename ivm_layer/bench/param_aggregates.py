"""Parameterized aggregates and Boolean lookups (issue 28 item 1): update and lookup latency at
n and 8n, with the growth factor, against the classes EXPLAIN prints.

    python -m ivm_layer.bench.param_aggregates [--n 2000] [--out bench-results/param_aggregates.json]

Views over ``r(a,b,c) ⋈ s(b,d)``, ``a`` with n/8 values, ``b`` with n/50 (so a group of a
parameterized ``GROUP BY r.b`` holds ~50/8 rows at every n and one ``s`` row touches ~8 groups):

* ``grouped``: ``SELECT r.b, count(*), sum(r.c) … WHERE r.a = $a GROUP BY r.b`` — an ``r``
  insert changes one group: O(1) (the join's guard path plus one group); a lookup is one probe
  and O(1) per group row;
* ``global``: ``SELECT count(*), sum(r.c) FROM r WHERE r.a = $a`` — O(1) update, O(1) lookup,
  an absent input answers SQL's row over no input (``count`` 0) in O(1);
* ``boolean``: ``SELECT 1 AS hit … WHERE r.a = $a AND s.d = $d`` (CQAP0, O(1) update and lookup).

Medians over repeated single operations; machine-dependent, never asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from ivm_layer import compile_view

from .report import save_json

SCHEMA = {"r": ["a", "b", "c"], "s": ["b", "d"]}
VIEWS = {
    "grouped": "SELECT r.b, count(*) AS n, sum(r.c) AS total FROM r JOIN s ON r.b = s.b WHERE r.a = $a GROUP BY r.b",
    "global": "SELECT count(*) AS n, sum(r.c) AS total FROM r WHERE r.a = $a",
    "boolean": "SELECT 1 AS hit FROM r JOIN s ON r.b = s.b WHERE r.a = $a AND s.d = $d",
}
REPS = 300


def _median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 2)


def measure(name: str, n: int, rnd: random.Random) -> dict:
    keys, bs = max(1, n // 8), max(1, n // 50)
    v = compile_view(VIEWS[name], SCHEMA)
    r = [(rnd.randrange(keys), rnd.randrange(bs), rnd.randrange(100)) for _ in range(n)]
    s = [(b, b % 7) for b in range(bs)]
    v.apply({"r": [(x, 1) for x in r], "s": [(x, 1) for x in s]})
    ins = []
    for j in range(REPS):
        row = (rnd.randrange(keys), rnd.randrange(bs), j)
        t0 = time.perf_counter()
        v.insert("r", row)
        ins.append(time.perf_counter() - t0)
        v.delete("r", row)
    args = (lambda: (rnd.randrange(keys), rnd.randrange(7))) if name == "boolean" else (
        lambda: (rnd.randrange(keys),))
    hit, miss = [], []
    for _ in range(REPS):
        a = args()
        t0 = time.perf_counter()
        list(v.lookup(*a))
        hit.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        list(v.lookup(*((-1,) + a[1:])))
        miss.append(time.perf_counter() - t0)
    return {"r_insert_us": _median_us(ins), "lookup_us": _median_us(hit), "lookup_absent_us": _median_us(miss)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", default="bench-results/param_aggregates.json")
    args = ap.parse_args(argv)
    rnd = random.Random(28)
    doc: dict = {"n": args.n, "reps": REPS, "views": VIEWS, "results": {}, "growth_8x": {}}
    for name in VIEWS:
        small, big = measure(name, args.n, rnd), measure(name, 8 * args.n, rnd)
        doc["results"][name] = {str(args.n): small, str(8 * args.n): big}
        doc["growth_8x"][name] = {k: round(big[k] / small[k], 2) for k in small}
    save_json(doc, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
