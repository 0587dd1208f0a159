"""Per-update cost of single-tuple inserts into each table of a query, at n and 8n.

    python -m ivm_layer.bench.update_cost                 # Q1, Q4, Q7 at n = 2000 and 16000
    python -m ivm_layer.bench.update_cost Q1 --n 2000 --samples 200

Each table is loaded with n random rows (one batch per table), then ``samples`` single-row
inserts into one table are timed one by one (each followed by the delete of the same row,
so the state stays at n); the median µs per insert is printed with the growth n → 8n.
The issue's target (#13): growth ≤ 2.5× on every side of Q1, Q4 and Q7. Q5, Q6 and their
projections Q8, Q9 (the chain with an equality key on one edge) give every row a key ``k`` with ``n // DEGREE`` values,
so a key group holds about DEGREE rows at every n (the papers' streams: 7k rows, 200 keys);
their keyed side costs O(deg · log n), the other sides O(log n).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

QUERIES = {
    "Q1": "SELECT * FROM R, S WHERE R.a < S.d",
    "Q4": "SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g",
    "Q7": "SELECT R.a, R.b, S.d, S.e, S.f, T.g, T.h FROM R, S, T WHERE R.a < S.d AND S.d < T.g",
    "band": "SELECT * FROM R, S WHERE R.b = S.e AND R.a < S.d AND S.d < R.a + 50",
    "Q5": "SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND R.k = S.k",
    "Q6": "SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND S.k = T.k",
    "Q8": "SELECT R.a, S.d, S.e, S.f, T.g, T.h, S.k FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND R.k = S.k",
    "Q9": "SELECT S.d, S.e, S.f, T.g, T.h, S.k FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND S.k = T.k",
}
SCHEMA = {"R": ["a", "b", "c"], "S": ["d", "e", "f"], "T": ["g", "h", "i"]}
KEYED = ("Q5", "Q6", "Q8", "Q9")  # rows get a key column k
DEGREE = 35  # rows per key value in the keyed queries


def _row(rng: random.Random, n: int, keyed: bool = False) -> tuple:
    row = (rng.randrange(10 * n), rng.randrange(20), rng.randrange(1000))
    return row + (rng.randrange(max(1, n // DEGREE)),) if keyed else row


def measure(query: str, n: int, samples: int, seed: int = 7) -> dict[str, float]:
    import ivm_layer

    sql = QUERIES[query]
    from_clause = sql.split(" FROM ")[1].split(" WHERE ")[0]
    tables = [t for t in SCHEMA if t in from_clause.replace(",", " ").split()]
    keyed = query in KEYED
    view = ivm_layer.compile_view(sql, {t: SCHEMA[t] + ["k"] * keyed for t in tables})
    rng = random.Random(f"{query}:{n}:{seed}")
    for t in tables:
        view.apply({t: [(_row(rng, n, keyed), 1) for _ in range(n)]})
    out = {}
    for t in tables:
        times = []
        for _ in range(samples):
            row = _row(rng, n, keyed)
            t0 = time.perf_counter()
            view.insert(t, row)
            times.append(time.perf_counter() - t0)
            view.delete(t, row)
        out[t] = statistics.median(times) * 1e6
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.update_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("queries", nargs="*", default=["Q1", "Q4", "Q7"])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--samples", type=int, default=60)
    a = p.parse_args(argv)
    for q in a.queries:
        small = measure(q, a.n, a.samples)
        big = measure(q, 8 * a.n, a.samples)
        for t in small:
            print(f"{q} insert into {t}: {small[t]:9.1f} µs at n={a.n}, {big[t]:9.1f} µs at n={8 * a.n}"
                  f"  (x{big[t] / small[t]:.2f})")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    raise SystemExit(main())
