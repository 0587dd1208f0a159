"""Paper 004's heavy/light trade-off (``WITH (epsilon = ε)``): update time and lookup delay as ε moves.

    python -m ivm_layer.bench.heavy_light [--n 2000] [--out bench-results/heavy_light.json]

The CQAP1 view ``Q(B|A) = R(A,B), S(B)`` (``SELECT r.b FROM r JOIN s ON r.b = s.b WHERE r.a = $a``)
over n and 8n rows of R with skewed B degrees (a quarter of the rows on b = 0, the rest
b = 1 + ⌊n_b·u²⌋), S holding every other b. For each ε ∈ {0, 0.25, 0.5, 0.75, 1} and, in the same run,
today's materialized answer map (no option):

* ``load_s``: the bulk load (preprocessing, O(N^{1+ε}));
* ``update_us``: median and mean over a stream of single-row updates — S toggles on the b of a
  random R row (the answer map pays that b's degree) and R inserts/deletes; the mean includes
  the moves and rebuilds (amortized O(N^ε));
* ``hub_update_us_median``: S toggles on the hub b = 0 (degree ``hub_degree``): Θ(degree) for
  the answer map and for a light hub, O(1) once the hub is heavy;
* ``boolean_hub_update_us_median``: the same toggles for the Boolean lookup
  ``SELECT 1 AS hit … WHERE r.a = $a`` (``Q(·|A)``);
* ``lookup``: per lookup of a random present a, the time to the first row, the mean delay
  (time / (rows + 1)) and the largest gap between two consecutive rows (O(N^{1−ε})).

Machine-dependent, never asserted; ``load`` is ``os.getloadavg()`` at start and end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from ivm_layer import compile_view

from .report import save_json

SQL = "SELECT r.b FROM r JOIN s ON r.b = s.b WHERE r.a = $a"
SCHEMA = {"r": ["a", "b"], "s": ["b"]}
EPSILONS = (0.0, 0.25, 0.5, 0.75, 1.0)
UPDATES = 600
LOOKUPS = 300


def _data(n: int, rnd: random.Random) -> tuple[list, list]:
    nb, na = max(4, n // 4), max(4, n // 10)
    r = list({(rnd.randrange(na), 0 if rnd.random() < 0.25 else 1 + int(nb * rnd.random() ** 2))
              for _ in range(n)})
    s = [(b,) for b in range(0, nb, 2)]
    return r, s


def _us(x: float) -> float:
    return round(x * 1e6, 2)


def measure(n: int, epsilon: float | None, seed: int = 7) -> dict:
    rnd = random.Random(seed)
    r, s = _data(n, rnd)
    view = compile_view(SQL, SCHEMA, **({} if epsilon is None else {"epsilon": epsilon}))
    t0 = time.perf_counter()
    view.apply({"r": [(row, 1) for row in r], "s": [(row, 1) for row in s]})
    load = time.perf_counter() - t0
    r_live = list(r)
    s_live = set(s)
    times = []
    for i in range(UPDATES):
        if i % 2 == 0:  # toggle S on the b of a random R row (heavy b's are likely)
            b = (rnd.choice(r_live)[1],)
            t0 = time.perf_counter()
            if b in s_live:
                view.delete("s", b)
            else:
                view.insert("s", b)
            times.append(time.perf_counter() - t0)
            s_live ^= {b}
        else:  # R churn: delete a random row or insert a new one
            if rnd.random() < 0.5 and r_live:
                row = r_live.pop(rnd.randrange(len(r_live)))
                t0 = time.perf_counter()
                view.delete("r", row)
            else:
                row = (rnd.randrange(10 ** 9), 0 if rnd.random() < 0.25 else 1 + int((n // 4) * rnd.random() ** 2))
                r_live.append(row)
                t0 = time.perf_counter()
                view.insert("r", row)
            times.append(time.perf_counter() - t0)
    hub = []  # the worst single update for the answer map: S toggles on the hub b = 0
    for _ in range(100):
        t0 = time.perf_counter()
        if (0,) in s_live:
            view.delete("s", (0,))
        else:
            view.insert("s", (0,))
        hub.append(time.perf_counter() - t0)
        s_live ^= {(0,)}
    keys = sorted({a for a, _ in r_live if a < 10 ** 9})
    firsts, delays, gaps, sizes = [], [], [], []
    for _ in range(LOOKUPS):
        a = rnd.choice(keys)
        t0 = time.perf_counter()
        last = t0
        first = None
        gap = 0.0
        count = 0
        for _row in view.lookup(a):
            now = time.perf_counter()
            if first is None:
                first = now - t0
            gap = max(gap, now - last)
            last = now
            count += 1
        end = time.perf_counter()
        gap = max(gap, end - last)
        firsts.append(first if first is not None else end - t0)
        delays.append((end - t0) / (count + 1))
        gaps.append(gap)
        sizes.append(count)
    stats = view.stats() if hasattr(view, "stats") else {}
    return {
        "load_s": round(load, 3),
        "update_us": {"median": _us(statistics.median(times)), "mean": _us(statistics.fmean(times)),
                      "max": _us(max(times))},
        "hub_update_us_median": _us(statistics.median(hub)), "hub_degree": sum(1 for _, b in r_live if b == 0),
        "lookup": {"first_row_us_median": _us(statistics.median(firsts)),
                   "delay_us_mean": _us(statistics.fmean(delays)),
                   "max_gap_us_median": _us(statistics.median(gaps)),
                   "max_gap_us_max": _us(max(gaps)),
                   "rows_mean": round(statistics.fmean(sizes), 1)},
        "heavy_keys": stats.get("heavy_keys"), "moves": stats.get("hl_moves"), "rebuilds": stats.get("hl_rebuilds"),
    }


BOOLEAN = "SELECT 1 AS hit FROM r JOIN s ON r.b = s.b WHERE r.a = $a"


def boolean_hub(n: int, epsilon: float | None, seed: int = 7) -> float:
    """Median µs of S toggles on the hub b = 0 for the Boolean lookup ``Q(·|A) = R(A,B), S(B)``."""
    r, s = _data(n, random.Random(seed))
    view = compile_view(BOOLEAN, SCHEMA, **({} if epsilon is None else {"epsilon": epsilon}))
    view.apply({"r": [(row, 1) for row in r], "s": [(row, 1) for row in s]})
    times = []
    for i in range(60):
        t0 = time.perf_counter()
        (view.delete if i % 2 == 0 else view.insert)("s", (0,))
        times.append(time.perf_counter() - t0)
    return _us(statistics.median(times))


def run(n: int) -> dict:
    """Every ε and the answer map at n and 8n (one process, same data per size)."""
    out: dict = {}
    for size in (n, 8 * n):
        row = {"answer_map": measure(size, None)}
        row["answer_map"]["boolean_hub_update_us_median"] = boolean_hub(size, None)
        for e in EPSILONS:
            row[f"epsilon={e:g}"] = measure(size, e)
            row[f"epsilon={e:g}"]["boolean_hub_update_us_median"] = boolean_hub(size, e)
        out[str(size)] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", default="bench-results/heavy_light.json")
    args = ap.parse_args(argv)
    doc: dict = {"query": SQL, "n": args.n, "updates": UPDATES, "lookups": LOOKUPS,
                 "load_start": os.getloadavg()}
    doc["results"] = run(args.n)
    doc["load_end"] = os.getloadavg()
    save_json(doc, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
