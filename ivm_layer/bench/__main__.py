"""``ivm bench`` (``python -m ivm_layer.bench``): run workloads on every system, write JSON, Markdown, PNG.

    ivm bench --quick                    # every workload at a small size (< 5 min, 2 cores)
    ivm bench paper --sizes 1000,4000    # a family, chosen sizes
    ivm bench Q4* fraud --systems ivm-pull,naive --budget 30
    ivm bench --list                     # workloads, families, systems
    ivm bench --profile paper            # Q1-Q12 at the stream sizes of 000 Table 2,
                                               # insert-only random and temporal order, with
                                               # DuckDB recompute-per-100 and the naive IVM
    ivm bench session                    # what a user of a session feels (ivm_layer/bench/session.py)
    ivm bench serve                      # ivm serve over the wire (ivm_layer/bench/serve.py)

Each (workload, stream size, system) runs in its own child process with a time budget and a
memory cap (``ivm_layer/bench/isolate.py``); the results land in ``OUT/run-<timestamp>/``: one JSON
document per run under ``runs/``, ``results.json`` (all runs + cross-checks), ``summary.md``
and ``plots/*.png``. ``ivm_layer/bench/README.md`` explains every metric. Exit status: 0, or 1 when two
systems disagree on a final view (a correctness bug), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import signal
import sys
import time

from . import report, systems
from . import workloads as wl

PAPER_SYSTEMS = ("ivm-pull", "ivm-push", "duckdb", "naive")
QUICK = dict(budget=20.0, enum_cap=50_000, fingerprint_cap=50_000, naive_max_rows=500_000)
FULL = dict(budget=120.0, enum_cap=1_000_000, fingerprint_cap=200_000, naive_max_rows=5_000_000)


def machine_info() -> dict:
    """Where the numbers come from."""
    from importlib import metadata

    info = {"platform": platform.platform(), "machine": platform.machine(),
            "python": platform.python_version(), "cpu_count": os.cpu_count()}
    try:
        info["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import psutil

    info["mem_total_mb"] = round(psutil.virtual_memory().total / 2**20)
    try:
        info["load_avg_start"] = os.getloadavg()[0]
    except OSError:
        pass
    for pkg in ("duckdb", "ivm-layer", "sqlglot"):
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[pkg] = None
    return info


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ivm bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*",
                   help="workload names, families (paper, fraud, tpch, aggregates, scaling, all) "
                        "or a query with all its streams (Q4*); default: all")
    p.add_argument("--list", action="store_true", help="list workloads and systems, then exit")
    p.add_argument("--quick", action="store_true",
                   help="every workload at its small size, short budgets (< 5 minutes on 2 cores)")
    p.add_argument("--profile", choices=["paper"],
                   help="paper: Q1-Q12 on insert-only random and temporal streams at the stream sizes "
                        "of 000 Table 2 (Q1 12k ... Q12 21k), systems ivm-pull, ivm-push, duckdb "
                        "(recompute per --batch updates) and naive unless --systems says otherwise; "
                        "workload arguments narrow it (e.g. Q1*)")
    p.add_argument("--sizes", help="comma-separated stream sizes for every selected workload "
                                   "(default: each workload's own, see --list)")
    p.add_argument("--systems", default=None,
                   help=f"comma-separated subset of {','.join(systems.SYSTEMS)} (default: all)")
    p.add_argument("--out", default="bench-results", help="output directory (default ./bench-results)")
    p.add_argument("--budget", type=float, help="seconds per system and run before it is killed "
                                                "(default 120; --quick 20)")
    p.add_argument("--mem-cap-mb", type=float, default=6144.0,
                   help="kill a run whose RSS exceeds this (default 6144)")
    p.add_argument("--seed", type=int, default=42, help="seed of every stream (default 42)")
    p.add_argument("--batch", type=int, default=100,
                   help="DuckDB recomputes the view after every B updates (default 100)")
    p.add_argument("--engine-batch", type=int, default=None,
                   help="ivm-pull applies the updates in batches of this many (one view.apply each); "
                        "1 = one update at a time (view.insert / view.delete); default: --batch")
    p.add_argument("--baseline", metavar="DIR",
                   help="also run ivm-base: ivm-pull with the engine of an older checkout in DIR (e.g. "
                        "`git worktree add DIR <commit>`), for before/after figures from one run")
    p.add_argument("--duckdb-threads", type=int, default=1,
                   help="DuckDB worker threads (default 1: the engine is single-threaded too; "
                        "0 = DuckDB's default)")
    p.add_argument("--enum-cap", type=int, help="at most this many (row, k) pairs are enumerated "
                                                "per measurement (default 1,000,000; --quick 50,000)")
    p.add_argument("--naive-max-rows", type=int,
                   help="the naive baseline gives up beyond this many materialized rows")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    return p.parse_args(argv)


#: ivm bench --baseline: passes of the ivm-pull / ivm-base pair, alternating
PAIRED_PASSES = 5


def _paired(workload: str, n: int, seed: int, cfg: dict, budget: float, mem_cap_mb: float) -> dict:
    """ivm-pull and ivm-base on one stream in PAIRED_PASSES alternating passes (one round each,
    the last pass also enumerating): {system: merged record} (systems.merge_passes)."""
    from .isolate import run_isolated

    got: dict[str, list] = {"ivm-pull": [], systems.BASE_SYSTEM: []}
    for i in range(PAIRED_PASSES):
        last = i == PAIRED_PASSES - 1
        for s in got:
            if got[s] and got[s][-1].get("status") != "ok":
                continue
            c = dict(cfg, min_rounds=1, maintain_only=not last)
            got[s].append(run_isolated(s, workload, n, seed, c, budget, mem_cap_mb))
    return {s: systems.merge_passes(recs) for s, recs in got.items()}


def _list() -> int:
    print("workloads (name, family, quick sizes, full sizes, description):")
    for w in wl.WORKLOADS.values():
        need = "  [needs GROUP BY support]" if w.requires else ""
        print(f"  {w.name:<16} {w.family:<10} {','.join(map(str, w.quick_sizes)):<16} "
              f"{','.join(map(str, w.full_sizes)):<18} {w.description}{need}")
    print(f"families: {', '.join(wl.FAMILIES)}, all")
    print("systems:")
    for s in systems.SYSTEMS:
        pre = systems.precheck(wl.get("Q1"), s) if s in systems.PEERS else None
        print(f"  {s:<9} {pre['reason'] if pre else 'available'}")
    ok, msg = systems.aggregates_supported()
    print(f"engine aggregates (GROUP BY): {'supported' if ok else 'not supported: ' + msg}")
    return 0


def _plan(args: argparse.Namespace) -> list[tuple[wl.Workload, list[int]]]:
    if args.profile == "paper":
        plan = wl.paper_profile(args.workloads)
        if not plan:
            raise ValueError("--profile paper: no paper workload (Q1-Q12, random or temporal) selected")
        return plan
    chosen = wl.select(args.workloads)
    if args.sizes:
        sizes = [int(float(s)) for s in args.sizes.split(",") if s.strip()]
        if not sizes or min(sizes) < 1:
            raise ValueError("--sizes needs positive integers")
        return [(w, sizes) for w in chosen]
    return [(w, list(w.quick_sizes if args.quick else w.full_sizes)) for w in chosen]


def _line(i: int, total: int, rec: dict) -> str:
    s = f"[{i:>3}/{total}] {rec['workload']:<16} N={rec['n_requested']:<7,} {rec['system']:<9} {rec['status']:<10}"
    if rec.get("updates_per_s"):
        s += f" {rec['updates_per_s']:>11,.0f} upd/s"
    if rec.get("peak_rss_mb") is not None:
        s += f" {rec['peak_rss_mb']:>7.1f} MB"
    if rec.get("view_size") is not None:
        s += f"  |view|={rec['view_size']:,}"
    why = rec.get("reason") or rec.get("error")
    if why:
        s += f"  ({why.splitlines()[0][:90]})"
    if rec.get("wall_s") is not None:
        s += f"  [{rec['wall_s']:.1f}s]"
    return s


def cross_checks(results: list[dict]) -> list[dict]:
    """Per (workload, N): do all systems that finished agree on the final view size and, where
    computed, on the fingerprint of the whole bag? Sets ``agrees`` on every compared record."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        if r["status"] == "ok" and r.get("view_size") is not None:
            groups.setdefault((r["workload"], r["n_requested"]), []).append(r)
    checks = []
    for (w, n), recs in groups.items():
        sizes = {r["system"]: r["view_size"] for r in recs}
        fps = {r["system"]: r["fingerprint"] for r in recs if r.get("fingerprint")}
        agree = len(set(sizes.values())) <= 1 and len(set(fps.values())) <= 1
        checks.append({"workload": w, "n": n, "view_size": sizes, "fingerprints": fps,
                       "systems": len(recs), "agree": agree})
        for r in recs:
            r["agrees"] = agree if len(recs) > 1 else None
    return checks


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["session"]:
        from . import session

        return session.main(argv[1:])
    if argv[:1] == ["serve"]:
        from . import serve

        return serve.main(argv[1:])
    args = parse_args(argv)
    if args.list:
        return _list()
    try:
        plan = _plan(args)
    except (KeyError, ValueError) as e:
        print(f"ivm bench: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    if args.systems is None:
        args.systems = ",".join(PAPER_SYSTEMS if args.profile == "paper" else systems.DEFAULT_SYSTEMS)
    chosen_systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in chosen_systems if s not in systems.SYSTEMS]
    if bad or not chosen_systems:
        print(f"ivm bench: unknown system(s) {', '.join(bad) or '(none given)'}; "
              f"choose from {', '.join(systems.SYSTEMS)}", file=sys.stderr)
        return 2
    from .isolate import run_isolated

    preset = QUICK if args.quick else FULL
    budget = args.budget if args.budget is not None else preset["budget"]
    if args.engine_batch is not None and args.engine_batch < 1:
        print("ivm bench: --engine-batch needs a positive integer", file=sys.stderr)
        return 2
    if args.baseline:
        if not os.path.isfile(os.path.join(args.baseline, "ivm_layer", "__init__.py")):
            print(f"ivm bench: --baseline {args.baseline}: no ivm_layer package there", file=sys.stderr)
            return 2
        if systems.BASE_SYSTEM not in chosen_systems:
            at = chosen_systems.index("ivm-pull") + 1 if "ivm-pull" in chosen_systems else 0
            chosen_systems.insert(at, systems.BASE_SYSTEM)
    cfg = {"batch": args.batch, "engine_batch": args.engine_batch or args.batch, "duckdb_threads": args.duckdb_threads or None,
           "budget_s": budget, "min_rounds": systems.MIN_ROUNDS,
           "baseline": os.path.abspath(args.baseline) if args.baseline else None,
           "enum_cap": args.enum_cap or preset["enum_cap"],
           "fingerprint_cap": preset["fingerprint_cap"],
           "naive_max_rows": args.naive_max_rows or preset["naive_max_rows"]}
    created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    stamp = created.replace("-", "").replace(":", "")
    out = os.path.join(args.out, f"run-{stamp}-{os.getpid()}")
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    machine = machine_info()
    config = {"quick": args.quick, "profile": args.profile, "seed": args.seed, "budget_s": budget, "mem_cap_mb": args.mem_cap_mb,
              "systems": chosen_systems, **cfg,
              "sizes": {w.name: sizes for w, sizes in plan},
              "command": "ivm bench " + " ".join(sys.argv[1:] if argv is None else argv)}
    total = sum(len(sizes) for _, sizes in plan) * len(chosen_systems)
    print(f"ivm bench: {len(plan)} workloads x {len(chosen_systems)} systems, {total} runs, "
          f"budget {budget:g}s per run -> {out}", flush=True)
    results: list[dict] = []
    gave_up: dict[tuple, str] = {}  # (workload, system) -> why a smaller size did not finish
    sql = {w.name: w.sql for w, _ in plan}

    def write_run(rec: dict) -> None:
        """One JSON document per run: the record with the machine, the configuration and the SQL."""
        name = f"{rec['workload']}__{rec['n_requested']}__{rec['system']}.json"
        with open(os.path.join(out, "runs", name), "w") as f:
            json.dump({"machine": machine, "config": {k: config[k] for k in ("seed", "budget_s", "batch", "engine_batch", "quick")},
                       "sql": sql[rec["workload"]], **rec}, f, indent=2, default=str)

    paired = bool(args.baseline) and "ivm-pull" in chosen_systems and systems.BASE_SYSTEM in chosen_systems
    pairs: dict[tuple, dict] = {}
    t_start = time.perf_counter()
    interrupted = False
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    i = 0
    try:
        for w, sizes in plan:
            for n in sizes:
                for system in chosen_systems:
                    i += 1
                    base = {"workload": w.name, "family": w.family, "order": w.order, "system": system,
                            "n_requested": n, "seed": args.seed, "created": created}
                    pre = systems.precheck(w, system)
                    if pre is None and (w.name, system) in gave_up:
                        pre = {"status": "skipped", "reason": gave_up[(w.name, system)]}
                    if pre is None and system == "ivm-pull" and paired:
                        # before/after: the two engines in alternating passes (a quiet spell
                        # or a busy one falls on both), each pass one round in its own child
                        pairs[(w.name, n)] = _paired(w.name, n, args.seed, cfg, budget, args.mem_cap_mb)
                    if pre is None and (w.name, n) in pairs and system in pairs[(w.name, n)]:
                        rec = pairs[(w.name, n)][system]
                    else:
                        rec = pre if pre is not None else run_isolated(system, w.name, n, args.seed, cfg,
                                                                       budget, args.mem_cap_mb)
                    rec = {**base, **rec}
                    if rec["status"] in ("timeout", "memory cap") or (
                            rec["status"] == "skipped" and pre is None):
                        why = rec["status"] if rec["status"] != "skipped" else rec["reason"].split(":")[0]
                        gave_up[(w.name, system)] = f"{why} at smaller N={n:,}"
                    results.append(rec)
                    write_run(rec)  # as soon as the run ends; again with the cross-check below
                    print(_line(i, total, rec), flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print(f"\ninterrupted after {len(results)} of {total} runs: writing what was measured", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    checks = cross_checks(results)
    try:
        machine["load_avg_end"] = os.getloadavg()[0]
    except OSError:
        pass
    for rec in results:
        write_run(rec)
    doc = {"benchmark": "ivm bench", "created": created, "total_s": round(time.perf_counter() - t_start, 1),
           "interrupted": interrupted, "machine": machine, "config": config,
           "engine": {"aggregates": systems.aggregates_supported()[0]},
           "workloads": {w.name: {"family": w.family, "order": w.order, "description": w.description,
                                  "sql": w.sql} for w, _ in plan},
           "results": results, "checks": checks}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=2, default=str)
    pngs = [] if args.no_plots else report.plots(doc, os.path.join(out, "plots"))
    md = report.markdown(doc, pngs, out)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(md)
    bad_checks = [c for c in checks if not c["agree"]]
    print(f"\nwrote {len(results)} run documents, results.json, summary.md and {len(pngs)} plots "
          f"to {out} in {doc['total_s']:.0f}s")
    if bad_checks:
        for c in bad_checks:
            print(f"DISAGREEMENT {c['workload']} N={c['n']}: sizes {c['view_size']} "
                  f"fingerprints {c['fingerprints']}", file=sys.stderr)
        return 1
    print(f"cross-check: all systems agree on {len(checks)} (workload, N) results")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
