"""Static tables (003) and parameterized views (004): per-update and per-lookup latency at n and 16n.

    python -m ivm_layer.bench.static_params [--n 2000] [--out bench-results/static_params.json]

1. *C_lin with a static dimension*: ``r(a,d) ⋈ s(a,b) ⋈ t(b,c)`` with ``t`` static (003's Q1),
   single-tuple inserts into ``r`` on a hub value of ``a`` (``s`` has n/4 rows with a = 0), beside
   the same view with every table dynamic (today's plan).
2. *CQAP0 lookups*: ``r(a,b,c) ⋈ s(a,b,d) ⋈ t(a,e) WHERE r.a = $a`` (004's Example 9): time to the
   first row of a present key and to an empty answer (absent key; and a key present in ``t`` only),
   beside DuckDB answering the same lookup with a prepared ``WHERE r.a = ?`` over the base tables.

3. *q-hierarchical hub* (issue 13): ``r0 ⋈ r1 ON a ⋈ r2 ON (a, b)``, inserts into ``r0`` on a hub
   value of ``a`` (its ``r2`` partner inserted first), now planned from the canonical variable order.
4. *Range parameters* (issue 28 item 5) at 2k / 16k / 128k rows (``--range-sizes``):
   ``WHERE t.acc = $acc AND t.ts > $since`` (16 accounts, so the rows under one account grow
   with n) and the range-only ``WHERE t.ts BETWEEN $lo AND $hi``: a lookup with a 5-row answer,
   an empty one, and a single-row insert + delete of the view; beside DuckDB's prepared query
   over the same table, and with ``--baseline DIR`` (another checkout, e.g. main's, loaded under
   another package name: ``floor.load_engine``) the same with that engine, in the same run.
   Medians of CPU time (``time.process_time``), so other processes on a shared machine count less.

    python -m ivm_layer.bench.static_params --only ranges --baseline DIR

5. *Heavy/light trade-off* (issue 28 item 7): ``Q(B|A) = R(A,B), S(B)`` with ``WITH (epsilon = ε)``
   for ε = 0 … 1 beside the answer map at n and 8n (``bench/heavy_light.py``; ``--no-heavy-light``
   skips it).

6. *Point reads through SQL* (issue 28 item 6, :mod:`ivm_layer.bench.point_sql`): ``SELECT * FROM
   v WHERE a = ?`` of a parameterized view in DuckDB and PostgreSQL sessions against the
   backend's own indexed point query on the same data, at 16n rows (``--no-postgres``: DuckDB
   only; skipped by ``--only ranges``).

Medians over repeated single operations; machine-dependent, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import time

from ivm_layer import compile_view

from .report import save_json

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


RANGE_EQ = "SELECT t.id, t.amount FROM trans t WHERE t.acc = $acc AND t.ts > $since"
RANGE_ONLY = "SELECT t.id, t.amount FROM trans t WHERE t.ts BETWEEN $lo AND $hi"
TRANS = {"trans": ["id", "acc", "ts", "amount"]}
ACCOUNTS = 16


def _trans_rows(n: int) -> list[tuple]:
    """Row i: account i % 16, ts = i (so one account's rows are every 16th ts), amount i % 97;
    every 64th row has a NULL ts (never matches) and every 32nd is loaded twice (a duplicate)."""
    return [(i, i % ACCOUNTS, None if i % 64 == 63 else i, i % 97) for i in range(n)]


BUDGET_S = 1.0  # wall seconds per measured operation (--budget-s)


def _measure_adaptive(fn, budget_s: float | None = None, least: int = 7) -> float:
    """Median CPU µs (this process's: on a shared machine wall time would count the time other
    processes held the CPU) of ``fn()``. Calls are timed in batches of about 2 ms (one call
    for slow ones) so that a sample is not one timer tick; at least ``least`` batches, more
    while they fit in ``budget_s`` of wall time (at most 200)."""
    budget_s = BUDGET_S if budget_s is None else budget_s
    clock = time.process_time
    gc.collect()  # start each measure without the garbage of the previous one
    t0 = clock()
    fn()
    once = max(clock() - t0, 1e-7)
    batch = max(1, min(200, int(0.002 / once)))
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < least or (len(samples) < 200 and time.perf_counter() - start < budget_s):
        t0 = clock()
        for _ in range(batch):
            fn()
        samples.append((clock() - t0) / batch)
    return _median_us(samples)


def _range_ops(v, label: str, n: int, rnd: random.Random) -> tuple:
    """The measured operations on one loaded range view: a 5-row lookup, an empty one, and a
    single-row insert + delete (the answers are checked, never the times)."""
    top = n - 1 - (n - 1) % 64  # a few rows below the newest, none of them NULL
    if label == "eq_range":
        def hit():
            acc = rnd.randrange(ACCOUNTS)
            last = max(i for i in range(n - ACCOUNTS, n) if i % ACCOUNTS == acc)
            got = list(v.lookup(acc=acc, since=last - 5 * ACCOUNTS))  # 5 rows (4 when one is NULL)
            assert 3 <= len(got) <= 5, (label, n, len(got))

        def empty():
            assert not list(v.lookup(acc=rnd.randrange(ACCOUNTS), since=n))
    else:
        def hit():
            lo = rnd.randrange(0, top - 8)
            got = list(v.lookup(lo=lo, hi=lo + 4))
            assert 4 <= len(got) <= 5, (label, n, len(got))

        def empty():
            assert not list(v.lookup(lo=-10, hi=-1))
    j = [n]

    def update():
        j[0] += 1
        row = (j[0], j[0] % ACCOUNTS, rnd.randrange(n), 1)
        v.insert("trans", row)
        v.delete("trans", row)

    return hit, empty, update


def range_lookups(mod, n: int, seed: int = 7) -> dict:
    """Issue 28 item 5 with the engine ``mod`` (``ivm_layer`` or an older checkout's): the
    range views loaded with n rows, then the median µs of a 5-row lookup, an empty lookup and a
    single-row insert + delete, for the equality+range and the range-only view."""
    rnd = random.Random(seed)
    rows = _trans_rows(n)
    load = [(r, 2 if r[0] % 32 == 0 else 1) for r in rows]
    out: dict = {}
    for label, sql in (("eq_range", RANGE_EQ), ("range_only", RANGE_ONLY)):
        v = mod.compile_view(sql, TRANS)
        v.apply({"trans": load})
        hit, empty, update = _range_ops(v, label, n, rnd)
        out[label] = {"lookup_5_rows_us": _measure_adaptive(hit), "lookup_empty_us": _measure_adaptive(empty),
                      "insert_delete_us": _measure_adaptive(update)}
    return out


def range_duckdb(n: int, seed: int = 7) -> dict:
    """DuckDB's prepared SELECT over the same table (no index: zone maps on ts), the yardstick."""
    import duckdb

    rnd = random.Random(seed)
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("CREATE TABLE trans (id BIGINT, acc BIGINT, ts BIGINT, amount BIGINT)")
    con.execute(f"INSERT INTO trans SELECT i, i % {ACCOUNTS}, CASE WHEN i % 64 = 63 THEN NULL ELSE i END, i % 97 "
                f"FROM range({n}) t(i)")
    con.execute("INSERT INTO trans SELECT * FROM trans WHERE id % 32 = 0")
    eq = RANGE_EQ.replace("$acc", "?").replace("$since", "?")
    only = RANGE_ONLY.replace("$lo", "?").replace("$hi", "?")

    def eq_hit():
        acc = rnd.randrange(ACCOUNTS)
        last = max(i for i in range(n - ACCOUNTS, n) if i % ACCOUNTS == acc)
        con.execute(eq, [acc, last - 5 * ACCOUNTS]).fetchall()

    def only_hit():
        lo = rnd.randrange(0, n - 8)
        con.execute(only, [lo, lo + 4]).fetchall()

    out = {"eq_range": {"lookup_5_rows_us": _measure_adaptive(eq_hit)},
           "range_only": {"lookup_5_rows_us": _measure_adaptive(only_hit)}}
    con.close()
    return out


def _growth(doc: dict, sizes: list[int]) -> dict:
    """Per engine, view and measure: the ratio of each size's median to the previous size's."""
    out: dict = {}
    for eng, per in doc.items():
        for view in per[str(sizes[0])]:
            for what in per[str(sizes[0])][view]:
                key = f"{eng}.{view}.{what}"
                out[key] = [round(per[str(b)][view][what] / max(per[str(a)][view][what], 1e-9), 2)
                            for a, b in zip(sizes, sizes[1:])]
    return out


def ranges_section(sizes: list[int], baseline: str | None) -> dict:
    import ivm_layer

    engines = [("after", ivm_layer)]
    if baseline:
        from .floor import load_engine

        engines.insert(0, ("before", load_engine(baseline)))
    load_before = os.getloadavg()
    per: dict = {label: {} for label, _ in engines}
    per["duckdb"] = {}
    for n in sizes:
        for label, mod in engines:
            per[label][str(n)] = range_lookups(mod, n)
        per["duckdb"][str(n)] = range_duckdb(n)
    return {"sizes": sizes, "baseline": os.path.abspath(baseline) if baseline else None,
            "load_before": load_before, "load_after": os.getloadavg(), "us": per, "growth": _growth(per, sizes)}


def _table(section: dict) -> str:
    """The range section as a text table: µs per size, then the growth per 8× (or per step)."""
    sizes = section["sizes"]
    lines = [f"{'engine':<7} {'view':<11} {'measure':<17} " + " ".join(f"{n:>10}" for n in sizes) + "   growth"]
    for eng, per in section["us"].items():
        for view in per[str(sizes[0])]:
            for what in per[str(sizes[0])][view]:
                vals = " ".join(f"{per[str(n)][view][what]:>10.1f}" for n in sizes)
                grow = " ".join(f"{g:.2f}x" for g in section["growth"][f"{eng}.{view}.{what}"])
                lines.append(f"{eng:<7} {view:<11} {what:<17} {vals}   {grow}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    global BUDGET_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", default="bench-results/static_params.json")
    ap.add_argument("--no-postgres", action="store_true", help="point reads: DuckDB sessions only")
    ap.add_argument("--only", choices=("all", "ranges"), default="all",
                    help="ranges: only the range-parameter section (4.)")
    ap.add_argument("--range-sizes", default="2000,16000,128000")
    ap.add_argument("--baseline", metavar="DIR",
                    help="a checkout of an older ivm-layer (e.g. main's) measured beside this one in section 4")
    ap.add_argument("--budget-s", type=float, default=BUDGET_S,
                    help="section 4: wall seconds per measured operation (at least 7 batches of ~2 ms each)")
    ap.add_argument("--no-heavy-light", action="store_true", help="skip the heavy/light trade-off curve")
    args = ap.parse_args(argv)
    BUDGET_S = args.budget_s
    rnd = random.Random(42)
    doc: dict = {"n": args.n, "reps": REPS, "update_us": {}, "lookup": {}, "qh_hub_insert_us": {}}
    if args.only == "all":
        for n in (args.n, 16 * args.n):
            doc["qh_hub_insert_us"][str(n)] = hub_insert(n)
            doc["update_us"][str(n)] = {"static_t_c_lin": update_cost(n, ("t",), rnd),
                                        "all_dynamic": update_cost(n, (), rnd)}
            doc["lookup"][str(n)] = lookup_latency(n, rnd)
        if not args.no_heavy_light:
            from .heavy_light import run as heavy_light

            doc["heavy_light"] = {"load_start": os.getloadavg(), "results": heavy_light(args.n),
                                  "load_end": os.getloadavg()}
        from . import point_sql

        doc["point_sql"] = point_sql.run(16 * args.n, postgres=not args.no_postgres)
    doc["ranges"] = ranges_section([int(x) for x in args.range_sizes.split(",")], args.baseline)
    save_json(doc, args.out, echo=False)
    if args.only == "ranges":
        print(_table(doc["ranges"]))
        print(f"load average before {doc['ranges']['load_before']}, after {doc['ranges']['load_after']}; "
              f"JSON: {args.out}")
    else:
        print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
