"""Enumeration beside iterating a Python list of the same ``(row, k)`` pairs, on Q1.

    python -m ivm_layer.bench.enum_speed                 # n = 1414 rows per side: about 1M output pairs
    python -m ivm_layer.bench.enum_speed 1414 --runs 5 --baseline DIR

Per run, in this order and each timed on its own: iterating a list holding the pairs
(``for row, k in lst``), ``view.rows()`` (the same loop over it), ``view.rows_batches(1024)``
(the loop over every batch) and producing the batches alone. Prints the medians (seconds) and
each one's ratio to the list; ``--baseline DIR`` adds an older checkout's engine, loaded in the
same process, on the same data.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

QUERY = "SELECT * FROM R, S WHERE R.a < S.d"
SCHEMA = {"R": ["a", "b", "c"], "S": ["d", "e", "f"]}


def build(mod, n: int):
    v = mod.compile_view(QUERY, SCHEMA)
    rng = random.Random(1)
    v.apply({"R": [((rng.randrange(10 * n), rng.randrange(20), rng.randrange(1000)), 1) for _ in range(n)]})
    v.apply({"S": [((rng.randrange(10 * n), rng.randrange(20), rng.randrange(1000)), 1) for _ in range(n)]})
    return v


def timings(v, lst: list, runs: int) -> dict[str, float]:
    def t_list():
        c = 0
        for row, k in lst:
            c += 1
        return c

    def t_rows():
        c = 0
        for row, k in v.rows():
            c += 1
        return c

    def t_batches():
        c = 0
        for b in v.rows_batches(1024):
            for row, k in b:
                c += 1
        return c

    def t_produce():
        c = 0
        for b in v.rows_batches(1024):
            c += len(b)
        return c

    out: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, f in (("list", t_list), ("rows", t_rows), ("rows_batches", t_batches),
                        ("produce_batches", t_produce)):
            t0 = time.perf_counter()
            c = f()
            out.setdefault(name, []).append(time.perf_counter() - t0)
            assert c == len(lst), (name, c, len(lst))
    return {k: statistics.median(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.enum_speed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("n", nargs="?", type=int, default=1414, help="rows per side (default 1414: ~1M pairs)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--baseline", help="a checkout of an older ivm-layer to measure beside this one")
    a = p.parse_args(argv)
    import ivm_layer

    engines = [("engine", ivm_layer)]
    if a.baseline:
        from .floor import load_engine

        engines.append(("baseline", load_engine(a.baseline)))
    for label, mod in engines:
        v = build(mod, a.n)
        lst = list(v.rows())
        med = timings(v, lst, a.runs)
        base = med["list"]
        print(f"{label}: {len(lst):,} pairs; " + ", ".join(
            f"{k} {s:.3f} s (x{s / base:.2f})" for k, s in med.items()), flush=True)
        del v, lst
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
