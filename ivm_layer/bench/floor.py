"""``python -m ivm_layer.bench.floor``: the engine beside flat hand-written CPython on the same streams.

The *floor* is what CPython itself can do for a view's count: per join key a sorted list of
the compared values, ``bisect``/``insort`` and a dict, written by hand for one query (no
index objects, no plan, no enumeration support, no validation). It calibrates the machine:
the engine's cost over the floor's is the price of being general (any plan, any update,
constant-delay enumeration, delete validation, SQL value semantics). Measured per update,
CPU seconds (``time.process_time``), one process, the systems interleaved round by round:

* ``Q2`` (``R.a < S.d AND R.k = S.k``) and ``fraud`` (the 3-way self-join with a one-hour
  window of 000 §1): the floor, the engine (``view.insert`` / ``view.delete`` per update);
* ``FQ1`` (TPC-H Q3's joins ``customer ⋈ orders ⋈ lineitem``): the engine only (no floor);
* with ``--baseline DIR`` (a checkout of an older ivm-layer, e.g. ``git worktree add DIR
  <commit>``): that engine too, loaded in the same process under another package name, so
  before/after come from the same run.

Every system's final count is checked against the others' (a disagreement exits with 1).
Prints a table and writes JSON (``--out``). Quote the medians and the load it prints.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import sys
import time
from bisect import bisect_left, bisect_right, insort
from typing import Any, Callable

from . import workloads as wl

WORKLOADS = {"Q2": "q2", "Q2-temporal": "q2", "Q2-mixed": "q2", "fraud": "fraud", "fraud-temporal": "fraud",
             "FQ1": None}
DEFAULT = ["Q2", "Q2-mixed", "fraud", "FQ1"]
SIZES = {"fraud": 20_000, "fraud-temporal": 20_000, "FQ1": 20_000}


# -- the floors: one query each, counts only ---------------------------------------------------
def q2_floor() -> tuple[Callable[[str, tuple, int], None], Callable[[], int]]:
    """``SELECT * FROM R, S WHERE R.a < S.d AND R.k = S.k``: per k the sorted a's and d's."""
    ra: dict = {}
    sd: dict = {}
    count = [0]

    def upd(table: str, row: tuple, k: int) -> None:
        if table == "R":
            a, key = row[0], row[3]
            lst = ra.get(key)
            if k > 0:
                if lst is None:
                    ra[key] = [a]
                else:
                    insort(lst, a)
            else:
                del lst[bisect_left(lst, a)]
            s = sd.get(key)
            if s:
                count[0] += k * (len(s) - bisect_right(s, a))
        else:
            d, key = row[0], row[3]
            lst = sd.get(key)
            if k > 0:
                if lst is None:
                    sd[key] = [d]
                else:
                    insort(lst, d)
            else:
                del lst[bisect_left(lst, d)]
            r = ra.get(key)
            if r:
                count[0] += k * bisect_left(r, d)

    return upd, lambda: count[0]


def fraud_floor() -> tuple[Callable[[str, tuple, int], None], Callable[[], int]]:
    """The fraud query: per account the sorted timestamps of small (< 100) and large (> 400)
    transactions; a change counts the (S1, S2, L) triples it makes or breaks."""
    small: dict = {}
    large: dict = {}
    count = [0]
    window = 3600

    def upd(table: str, row: tuple, k: int) -> None:
        _, acc, ts, amnt = row
        if amnt < 100:
            lst = small.get(acc)
            if lst is None:
                lst = small[acc] = []
            if k < 0:
                del lst[bisect_left(lst, ts)]
            big = large.get(acc)
            if big:
                c = 0
                # as S1: S2 in (ts, ts + w), L in (S2, ts + w)
                hi = bisect_left(big, ts + window)
                for i in range(bisect_right(lst, ts), bisect_left(lst, ts + window)):
                    c += max(0, hi - bisect_right(big, lst[i]))
                # as S2: S1 in (ts - w, ts), L in (ts, S1 + w)
                lo = bisect_right(big, ts)
                for i in range(bisect_right(lst, ts - window), bisect_left(lst, ts)):
                    c += max(0, bisect_left(big, lst[i] + window) - lo)
                count[0] += k * c
            if k > 0:
                insort(lst, ts)
        elif amnt > 400:
            lst = large.get(acc)
            if lst is None:
                lst = large[acc] = []
            if k > 0:
                insort(lst, ts)
            else:
                del lst[bisect_left(lst, ts)]
            sm = small.get(acc)
            if sm:
                c = 0
                end = bisect_left(sm, ts)  # S2 < ts
                for i in range(bisect_right(sm, ts - window), end):  # S1 in (ts - w, ts)
                    c += max(0, end - bisect_right(sm, sm[i]))
                count[0] += k * c

    return upd, lambda: count[0]


FLOORS = {"q2": q2_floor, "fraud": fraud_floor}


# -- systems -----------------------------------------------------------------------------------
def load_engine(path: str, name: str = "ivm_baseline") -> Any:
    """The ``ivm_layer`` package of another checkout, imported as ``name`` beside this one."""
    if name in sys.modules:
        return sys.modules[name]
    pkg = os.path.join(os.path.abspath(path), "ivm_layer")
    if not os.path.isfile(os.path.join(pkg, "__init__.py")):
        raise SystemExit(f"--baseline {path}: no ivm_layer package there")
    root = os.path.dirname(pkg)
    if os.path.isdir(os.path.join(root, "connectors")) and root not in sys.path:
        sys.path.append(root)  # a checkout from before the one-package layout: its connectors/
    spec = importlib.util.spec_from_file_location(name, os.path.join(pkg, "__init__.py"),
                                                  submodule_search_locations=[pkg])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    lazy = getattr(mod, "_LAZY", None)
    if isinstance(lazy, dict):
        # A checkout whose names load lazily by absolute module name ("ivm_layer.compile"):
        # point them at the copy imported here, else they would load THIS checkout's engine
        # and the "baseline" would silently measure the current code.
        for attr, (module, value) in list(lazy.items()):
            if module == "ivm_layer" or module.startswith("ivm_layer."):
                lazy[attr] = (name + module[len("ivm_layer"):], value)
    compile_view = mod.compile_view
    where = getattr(sys.modules.get(compile_view.__module__), "__file__", "") or ""
    if not os.path.abspath(where).startswith(pkg + os.sep):
        raise SystemExit(f"--baseline {path}: its compile_view loads from {where or '?'}, not from "
                         f"{pkg}; the baseline would measure another engine")
    return mod


def _engine(mod: Any, w: Any) -> tuple[Callable[[str, tuple, int], None], Callable[[], int]]:
    view = mod.compile_view(w.sql, w.schema)
    ins, dele = view.insert, view.delete

    def upd(table: str, row: tuple, k: int) -> None:
        if k > 0:
            ins(table, row)
        else:
            dele(table, row)

    return upd, view.__len__


def _time(make: Callable, stream: list) -> tuple[float, int]:
    """CPU µs per update of one pass over ``stream`` (the structure built fresh), and the count."""
    upd, count = make()
    gc.collect()
    t0 = time.process_time()
    for t, row, k in stream:
        upd(t, row, k)
    secs = time.process_time() - t0
    return secs / len(stream) * 1e6, count()


def measure(name: str, n: int | None, rounds: int, baseline: Any, seed: int = 42) -> dict:
    import ivm_layer

    w = wl.get(name)
    n = n or w.paper_size or SIZES.get(name, 20_000)
    stream = w.stream(n, seed)
    systems: dict[str, Callable] = {}
    floor = WORKLOADS.get(name)
    if floor is not None:
        systems["floor"] = FLOORS[floor]
    systems["engine"] = lambda: _engine(ivm_layer, w)
    if baseline is not None:
        systems["baseline"] = lambda: _engine(baseline, w)
    times: dict[str, list[float]] = {s: [] for s in systems}
    counts: dict[str, int] = {}
    for _ in range(rounds):
        for s, make in systems.items():
            us, c = _time(make, stream)
            times[s].append(us)
            counts[s] = c
    rec: dict = {"workload": name, "n": len(stream), "rounds": rounds, "counts": counts,
                 "agree": len(set(counts.values())) == 1,
                 "us_per_update": {s: round(statistics.median(v), 3) for s, v in times.items()},
                 "us_range": {s: [round(min(v), 3), round(max(v), 3)] for s, v in times.items()}}
    med = rec["us_per_update"]
    if "floor" in med:
        rec["engine_over_floor"] = round(med["engine"] / med["floor"], 2)
        if "baseline" in med:
            rec["baseline_over_floor"] = round(med["baseline"] / med["floor"], 2)
    if "baseline" in med:
        rec["speedup_vs_baseline"] = round(med["baseline"] / med["engine"], 2)
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.floor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*", default=DEFAULT, help=f"of {', '.join(WORKLOADS)} (default "
                                                                  f"{' '.join(DEFAULT)})")
    p.add_argument("--n", type=int, help="stream size (default: the paper's for Q2, 20,000 otherwise)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per workload (default 5)")
    p.add_argument("--baseline", help="a checkout of an older ivm-layer to run beside this one")
    p.add_argument("--out", default="bench-results/floor.json")
    a = p.parse_args(argv)
    bad = [x for x in a.workloads if x not in WORKLOADS]
    if bad:
        print(f"unknown workload(s) {', '.join(bad)}; choose from {', '.join(WORKLOADS)}", file=sys.stderr)
        return 2
    baseline = load_engine(a.baseline) if a.baseline else None
    load0 = os.getloadavg()[0]
    recs = []
    print(f"{'workload':<15} {'n':>7} {'floor':>8} {'engine':>8} {'baseline':>9}  engine/floor  speed-up  "
          "(CPU µs per update, medians)")
    def cell(m: dict, s: str) -> str:
        return f"{m[s]:8.2f}" if s in m else f"{'–':>8}"

    for name in a.workloads:
        rec = measure(name, a.n, a.rounds, baseline)
        recs.append(rec)
        m = rec["us_per_update"]
        print(f"{name:<15} {rec['n']:>7,} {cell(m, 'floor')} {cell(m, 'engine')} {cell(m, 'baseline'):>9}  "
              f"{rec.get('engine_over_floor', '–')!s:>12}  {rec.get('speedup_vs_baseline', '–')!s:>8}"
              + ("" if rec["agree"] else f"  COUNTS DISAGREE {rec['counts']}"), flush=True)
    load1 = os.getloadavg()[0]
    print(f"load average (1 min): {load0:.2f} at the start, {load1:.2f} at the end")
    doc = {"benchmark": "floor", "load_avg_start": load0, "load_avg_end": load1, "baseline": a.baseline,
           "python": sys.version.split()[0], "results": recs}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
    return 0 if all(r["agree"] for r in recs) else 1


if __name__ == "__main__":
    sys.exit(main())
