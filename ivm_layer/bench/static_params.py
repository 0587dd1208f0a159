"""Static tables (003) and parameterized views (004): per-update and per-lookup latency at n and 16n.

    python -m ivm_layer.bench.static_params [--n 2000] [--out bench-results/static_params.json]

1. *C_lin with a static dimension*: ``r(a,d) ⋈ s(a,b) ⋈ t(b,c)`` with ``t`` static (003's Q1),
   single-tuple inserts into ``r`` on a hub value of ``a`` (``s`` has n/4 rows with a = 0), beside
   the same view with every table dynamic (today's plan).
2. *CQAP0 lookups*: ``r(a,b,c) ⋈ s(a,b,d) ⋈ t(a,e) WHERE r.a = $a`` (004's Example 9): time to the
   first row of a present key and to an empty answer (absent key; and a key present in ``t`` only),
   beside DuckDB answering the same lookup with a prepared ``WHERE r.a = ?`` over the base tables.

3. *point reads through SQL* (issue 28 item 6, :mod:`ivm_layer.bench.point_sql`): ``SELECT * FROM
   v WHERE a = ?`` of a parameterized view in DuckDB and PostgreSQL sessions against the
   backend's own indexed point query on the same data (``--no-postgres``: DuckDB only).

4. *q-hierarchical hub* (issue 13): ``r0 ⋈ r1 ON a ⋈ r2 ON (a, b)``, inserts into ``r0`` on a hub
   value of ``a`` (its ``r2`` partner inserted first), now planned from the canonical variable order.

Medians over repeated single operations; machine-dependent, never asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from ivm_layer import compile_view

Q1 = "SELECT r.a, s.b, t.c FROM r JOIN s ON r.a = s.a JOIN t ON s.b = t.b"
Q1_SCHEMA = {"r": ["a", "d"], "s": ["a", "b"], "t": ["b", "c"]}
EX9 = ("SELECT r.b, r.c, s.d, t.e FROM r JOIN s ON r.a = s.a AND r.b = s.b JOIN t ON t.a = r.a "
       "WHERE r.a = $a")
EX9_SCHEMA = {"r": ["a", "b", "c"], "s": ["a", "b", "d"], "t": ["a", "e"]}
REPS = 200


def _median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 2)


def update_cost(n: int, static: tuple[str, ...], rnd: random.Random) -> float:
    v = compile_view(Q1, Q1_SCHEMA, static=static)
    v.apply({"t": [((b, c), 1) for b in range(n // 4) for c in range(2)]})
    v.apply({"s": [((0 if i < n // 4 else rnd.randrange(n), rnd.randrange(n // 4)), 1) for i in range(n)],
             "r": [((rnd.randrange(n), i), 1) for i in range(n)]})
    samples = []
    for j in range(REPS):
        t0 = time.perf_counter()
        v.insert("r", (0, n + j))
        samples.append(time.perf_counter() - t0)
    return _median_us(samples)


QH = "SELECT r0.a, r1.c FROM r0 JOIN r1 ON r0.a = r1.a JOIN r2 ON r2.a = r0.a AND r2.b = r0.b"
QH_SCHEMA = {"r0": ["a", "b"], "r1": ["a", "c"], "r2": ["a", "b"]}


def hub_insert(n: int) -> float:
    v = compile_view(QH, QH_SCHEMA)
    v.apply({t: [((1, i), 1) for i in range(n)] for t in QH_SCHEMA})
    samples = []
    for j in range(REPS):
        v.insert("r2", (1, n + j))
        t0 = time.perf_counter()
        v.insert("r0", (1, n + j))
        samples.append(time.perf_counter() - t0)
    return _median_us(samples)


def _first(it) -> None:
    next(iter(it), None)


def lookup_latency(n: int, rnd: random.Random) -> dict:
    import duckdb

    keys = max(1, n // 8)
    r = [(rnd.randrange(keys), rnd.randrange(4), i) for i in range(n)]
    s = [(rnd.randrange(keys), rnd.randrange(4), i) for i in range(n)]
    t = [(rnd.randrange(keys), i) for i in range(n)] + [(keys + 1, 0)]  # key keys+1: only in t
    v = compile_view(EX9, EX9_SCHEMA)
    v.apply({"r": [(x, 1) for x in r], "s": [(x, 1) for x in s], "t": [(x, 1) for x in t]})
    present = [k for k in range(keys) if next(iter(v.lookup(a=k)), None) is not None]
    out: dict = {"cqap0": v.cqap0, "present_keys": len(present)}

    def measure(fn) -> float:
        samples = []
        for _ in range(REPS):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        return _median_us(samples)

    out["engine_first_row_us"] = measure(lambda: _first(v.lookup(a=rnd.choice(present))))
    out["engine_empty_absent_us"] = measure(lambda: _first(v.lookup(a=-1)))
    out["engine_empty_partial_us"] = measure(lambda: _first(v.lookup(a=keys + 1)))
    con = duckdb.connect()
    con.execute("SET threads = 1")
    for name, cols in EX9_SCHEMA.items():
        con.execute(f"CREATE TABLE {name} ({', '.join(c + ' BIGINT' for c in cols)})")
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", r)
    con.executemany("INSERT INTO s VALUES (?, ?, ?)", s)
    con.executemany("INSERT INTO t VALUES (?, ?)", t)
    sql = EX9.replace("$a", "?")
    out["duckdb_first_row_us"] = measure(lambda: con.execute(sql, [rnd.choice(present)]).fetchone())
    out["duckdb_empty_absent_us"] = measure(lambda: con.execute(sql, [-1]).fetchone())
    out["duckdb_empty_partial_us"] = measure(lambda: con.execute(sql, [keys + 1]).fetchone())
    con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", default="bench-results/static_params.json")
    ap.add_argument("--no-postgres", action="store_true", help="point reads: DuckDB sessions only")
    args = ap.parse_args(argv)
    rnd = random.Random(42)
    doc: dict = {"n": args.n, "reps": REPS, "update_us": {}, "lookup": {}, "qh_hub_insert_us": {}}
    for n in (args.n, 16 * args.n):
        doc["qh_hub_insert_us"][str(n)] = hub_insert(n)
        doc["update_us"][str(n)] = {"static_t_c_lin": update_cost(n, ("t",), rnd),
                                    "all_dynamic": update_cost(n, (), rnd)}
        doc["lookup"][str(n)] = lookup_latency(n, rnd)
    from . import point_sql

    doc["point_sql"] = point_sql.run(16 * args.n, postgres=not args.no_postgres)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2))
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
