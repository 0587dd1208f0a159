"""Cost of computed columns, expression leaf filters and residual filters (issue 15): a constant
factor per update, not a change of complexity.

    python -m ivm_layer.bench.sql_overhead [--sizes 1000,10000,100000] [--updates 2000]

Two tables r(a, b) and s(a, c), N rows each over N/10 join keys (about 10 rows per table and
key, so a single-row update changes ~10 join rows at every N). After a bulk load, U single-row
inserts and deletes (random table) are applied one at a time; the time per update is the
median over five slices. Views:

- ``join``      ``SELECT r.a, r.b, s.c FROM r JOIN s ON r.a = s.a`` (the baseline; ``join+diff``
  is the same view asked for its change, which the other variants always compute)
- ``computed``  ``SELECT r.a, r.b + s.c AS x, CASE WHEN r.b > 5 THEN 'hi' ELSE 'lo' END …``
- ``leaf expr`` ``… WHERE (r.b + r.a) % 2 = 0`` (one table's columns: a leaf filter)
- ``residual``  ``… WHERE r.b + s.c > 10`` (two tables, not column ± constant: a residual filter)

If the per-update time of a variant stays flat as N grows 100×, its cost is a constant factor.
A second table compares an ``OR`` of join conditions, rewritten into a ``UNION ALL`` of two
joins, with the same condition written so that it is a residual filter over the cross product.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import ivm_layer

SCHEMA = {"r": ["a", "b"], "s": ["a", "c"]}
VIEWS = {
    "join": "SELECT r.a, r.b, s.c FROM r JOIN s ON r.a = s.a",
    "computed": "SELECT r.a, r.b + s.c AS x, CASE WHEN r.b > 5 THEN 'hi' ELSE 'lo' END AS k "
                "FROM r JOIN s ON r.a = s.a",
    "leaf expr": "SELECT r.a, r.b, s.c FROM r JOIN s ON r.a = s.a WHERE (r.b + r.a) % 2 = 0",
    "residual": "SELECT r.a, r.b, s.c FROM r JOIN s ON r.a = s.a WHERE r.b + s.c > 10",
}

OR_VIEWS = {
    "or-union": "SELECT r.a, s.c FROM r, s WHERE r.a = s.a OR r.b = s.c + 100",
    "or-resid": "SELECT r.a, s.c FROM r, s WHERE r.a - s.a = 0 OR r.b - s.c = 100",
}


def _stream(n: int, updates: int, seed: int = 7):
    rng = random.Random(seed)
    keys = max(1, n // 10)
    base = {t: [(rng.randrange(keys), rng.randrange(10)) for _ in range(n)] for t in SCHEMA}
    ops = []
    live = {t: list(rows) for t, rows in base.items()}
    for _ in range(updates):
        t = rng.choice(("r", "s"))
        if rng.random() < 0.5:
            row = live[t].pop(rng.randrange(len(live[t])))
            ops.append((t, row, -1))
        else:
            row = (rng.randrange(keys), rng.randrange(10))
            live[t].append(row)
            ops.append((t, row, 1))
    return base, ops


def measure(sql: str, n: int, updates: int, want_change: bool = False) -> float:
    """Median µs per single-row update after a bulk load of ``n`` rows per table."""
    base, ops = _stream(n, updates)
    view = ivm_layer.compile_view(sql, SCHEMA)
    view.apply({t: [(r, 1) for r in rows] for t, rows in base.items()})
    slices = []
    step = max(1, len(ops) // 5)
    for i in range(0, len(ops), step):
        chunk = ops[i:i + step]
        t0 = time.perf_counter()
        for t, row, k in chunk:
            if want_change:
                view.diff({t: [(row, k)]})
            elif k > 0:
                view.insert(t, row)
            else:
                view.delete(t, row)
        slices.append((time.perf_counter() - t0) / len(chunk) * 1e6)
    return statistics.median(slices)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--updates", type=int, default=2000)
    ap.add_argument("--or-sizes", default="500,2000", help="sizes of the OR comparison ('' to skip)")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = [("join", VIEWS["join"], False), ("join+diff", VIEWS["join"], True)]
    rows += [(name, sql, False) for name, sql in VIEWS.items() if name != "join"]
    print("µs per single-row update (median of 5 slices); ratio to join+diff in brackets")
    print(f"{'view':<10}" + "".join(f"{'N=' + str(n):>22}" for n in sizes))
    ref: dict[int, float] = {}
    for name, sql, diff in rows:
        cells = []
        for n in sizes:
            us = measure(sql, n, args.updates, diff)
            if name == "join+diff":
                ref[n] = us
            ratio = f" [{us / ref[n]:.2f}x]" if n in ref else ""
            cells.append(f"{us:>12.1f}{ratio:>10}")
        print(f"{name:<10}" + "".join(cells))
    if args.or_sizes:
        # An OR whose disjuncts join the tables: rewritten into a UNION ALL of two joins (each
        # through its own index), against the same condition written so that no disjunct is a
        # column comparison (a residual filter over the cross product).
        or_sizes = [int(x) for x in args.or_sizes.split(",")]
        print("\nOR across tables, µs per single-row update")
        print(f"{'view':<10}" + "".join(f"{'N=' + str(n):>14}" for n in or_sizes))
        for name, sql in OR_VIEWS.items():
            print(f"{name:<10}" + "".join(f"{measure(sql, n, min(args.updates, 400)):>14.1f}" for n in or_sizes))


if __name__ == "__main__":
    main()
