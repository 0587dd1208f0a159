"""Engine smoke benchmark: IEDyn engine vs. DuckDB recomputation vs. naive first-order IVM.

    python -m bench.engine_smoke [--sizes 2000,20000] [--out DIR] [--quick]

For every workload (``bench/workloads.py``) and stream size N, the same seeded stream of
single-tuple inserts is fed to each system; see ``bench/README.md`` for what each metric means.
One JSON document and one Markdown table are written per run (default ``bench-results/``).
The run never crashes on a system's failure: a rejected query, an exception, a timeout or a skip
is recorded in the result and the run carries on (exit status 0).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import importlib
import itertools
import json
import os
import platform
import sys
import threading
import time
import traceback
import tracemalloc

from . import naive as naive_mod
from . import workloads as wl

SYSTEMS = ("ivm", "duckdb", "naive")
DEFAULTS = dict(
    sizes=[2000, 20000],
    budget=20.0,  # seconds per (workload, N) run of a baseline (duckdb, naive)
    engine_budget=40.0,  # seconds per (workload, N) stream pass of the engine
    mem_budget=15.0,  # seconds per tracemalloc pass (partial peak when exceeded)
    enum_cap=1_000_000,  # at most this many tuples are enumerated per measurement
    naive_max_rows=3_000_000,  # naive materializes its view: refuse beyond this many rows
    duckdb_max_work=2e10,  # skip DuckDB if sum of view sizes over recomputations is beyond this
    every=100,  # DuckDB recomputes the view every `every` updates
)
QUICK = dict(sizes=[50, 500], budget=5.0, engine_budget=10.0, mem_budget=5.0, enum_cap=20_000,
             naive_max_rows=200_000, duckdb_max_work=1e9)


TRACE_SLOWDOWN = 12  # tracemalloc makes allocation-heavy Python ~10x slower


# --------------------------------------------------------------------------- helpers
def _memory_wanted(cfg, n, rec):
    """--quick measures memory at the smallest size only (tracemalloc is slow)."""
    if cfg.get("quick") and n > min(cfg["sizes"]):
        rec["memory_note"] = "not measured in --quick beyond the smallest size"
        return False
    return True


def _now():
    return time.perf_counter()


def _err(e):
    return f"{type(e).__name__}: {e}"


def machine_info():
    info = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "python": sys.version.split()[0],
        "python_impl": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
    }
    try:
        info["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["mem_total_mb"] = round(int(line.split()[1]) / 1024)
                    break
    except OSError:
        pass
    try:
        import duckdb

        info["duckdb"] = duckdb.__version__
    except Exception:  # noqa: BLE001
        info["duckdb"] = None
    return info


def _per_update(rec, n_done, secs):
    rec["updates"] = n_done
    rec["stream_s"] = round(secs, 6)
    if n_done and secs > 0:
        rec["updates_per_s"] = round(n_done / secs, 1)
        rec["us_per_update"] = round(secs / n_done * 1e6, 3)


def _measure_enum(rows_fn, cap):
    """Time full enumeration (capped) of ``rows_fn()`` and of a plain list of the same rows.

    Returns the "enum" dict and the sum of multiplicities / number of entries when complete.
    """
    gc.collect()
    it = itertools.islice(rows_fn(), cap + 1)
    n = 0
    t0 = _now()
    for _ in it:
        n += 1
    secs = _now() - t0
    truncated = n > cap
    if truncated:
        n = cap
        # re-time exactly `cap` tuples so that the rates are comparable
        t0 = _now()
        for _ in itertools.islice(rows_fn(), cap):
            pass
        secs = _now() - t0
    enum = {"tuples": n, "seconds": round(secs, 6), "truncated": truncated,
            "tuples_per_s": round(n / secs, 1) if secs > 0 and n else None}
    lst = list(itertools.islice(rows_fn(), cap))
    t0 = _now()
    for _ in itertools.islice(lst, cap):
        pass
    lsecs = _now() - t0
    enum["list_tuples_per_s"] = round(len(lst) / lsecs, 1) if lsecs > 0 and lst else None
    if enum["tuples_per_s"] and enum["list_tuples_per_s"]:
        # how many times slower the view's enumeration is than iterating a Python list
        enum["slowdown_vs_list"] = round(enum["list_tuples_per_s"] / enum["tuples_per_s"], 2)
    sum_k = distinct = None
    unique = None
    if not truncated:
        try:
            sum_k = sum(k for _, k in lst)
            distinct = len(lst)
            if distinct <= 500_000:
                unique = len({r for r, _ in lst}) == distinct
        except (TypeError, ValueError):
            pass
    del lst
    return enum, sum_k, distinct, unique


def _feed(view, stream, deadline, with_sizes=None, every=100):
    """Insert the whole stream; returns (updates done, seconds, timed_out)."""
    ins = view.insert
    n = len(stream)
    done = 0
    t0 = _now()
    if with_sizes is None and deadline is None:
        for t, row in stream:
            ins(t, row)
        return n, _now() - t0, False
    step = every if with_sizes is not None else 256
    for start in range(0, n, step):
        for t, row in stream[start:start + step]:
            ins(t, row)
        done = min(n, start + step)
        if with_sizes is not None:
            with_sizes.append(len(view))
        if deadline is not None and _now() > deadline and done < n:
            return done, _now() - t0, True
    return done, _now() - t0, False


def _memory_pass(make_view, stream, budget, every, deadline_exc=()):
    """Separate pass under tracemalloc: (peak MB, len trajectory, note)."""
    gc.collect()
    sizes = []
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        view = make_view()
        dl = _now() + budget
        if hasattr(view, "deadline"):
            view.deadline = dl
        done, _, to = _feed(view, stream, dl, with_sizes=sizes, every=every)
        peak = tracemalloc.get_traced_memory()[1]
        note = None if not to else (f"tracemalloc pass stopped after {done}/{len(stream)} "
                                    f"updates: peak so far")
    except deadline_exc:
        peak = tracemalloc.get_traced_memory()[1]
        note = "timed out (peak so far)"
    finally:
        tracemalloc.stop()
    view = None  # noqa: F841
    return round(peak / 2**20, 3), sizes, note


# --------------------------------------------------------------------------- systems
def run_engine(mod, w, stream, cfg, label="ivm"):
    rec = {"system": label, "status": "ok"}
    err_cls = getattr(mod, "IVMError", None)
    try:
        make = lambda: mod.compile_view(w.sql, w.schema, dialect="duckdb")  # noqa: E731
        view = make()
    except Exception as e:  # noqa: BLE001
        if err_cls is not None and isinstance(e, err_cls):
            rec.update(status="rejected", error=str(e))
        else:
            rec.update(status="error", stage="compile", error=_err(e),
                       traceback=traceback.format_exc(limit=6))
        return rec, None
    try:
        rec["explain"] = str(view.explain())[:4000]
    except Exception as e:  # noqa: BLE001
        rec["explain"] = f"explain() failed: {_err(e)}"
    try:
        gc.collect()
        done, secs, to = _feed(view, stream, _now() + cfg["engine_budget"])
        _per_update(rec, done, secs)
        if to:
            rec.update(status="timeout", reason=f"stream exceeded {cfg['engine_budget']}s "
                                                f"after {done}/{len(stream)} updates")
            rec["partial_us_per_update"] = rec.pop("us_per_update", None)
            rec.pop("updates_per_s", None)
            return rec, None
        rec["view_len"] = len(view)
        enum, sum_k, distinct, unique = _measure_enum(view.rows, cfg["enum_cap"])
        rec["enum"] = enum
        rec["distinct_rows"] = distinct
        if sum_k is not None:
            rec["enum_sum_k_matches_len"] = sum_k == rec["view_len"]
        if unique is not None:
            rec["enum_rows_unique"] = unique
    except Exception as e:  # noqa: BLE001
        rec.update(status="error", stage="stream/enumerate", error=_err(e),
                   traceback=traceback.format_exc(limit=6))
        return rec, None
    finally:
        view = None
    trajectory = None
    if cfg["memory"] and _memory_wanted(cfg, len(stream), rec):
        if rec["stream_s"] * TRACE_SLOWDOWN > 2 * cfg["mem_budget"]:
            rec["memory_note"] = "memory pass skipped (stream too slow under tracemalloc)"
        else:
            try:
                rec["peak_mb"], trajectory, note = _memory_pass(
                    make, stream, cfg["mem_budget"], cfg["every"])
                if note:
                    rec["memory_note"] = note
            except Exception as e:  # noqa: BLE001
                rec["memory_note"] = f"memory pass failed: {_err(e)}"
    return rec, trajectory


def _duck_type(v):
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int):
        return "BIGINT"
    if isinstance(v, float):
        return "DOUBLE"
    return "VARCHAR"


def _lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def _count_sql(sql):
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="duckdb")
    return tree.select(exp.Count(this=exp.Star()), append=False).sql(dialect="duckdb")


def run_duckdb(w, stream, cfg, trajectory=None):
    """DuckDB recomputation: buffer inserts, every `every` updates flush them and recount."""
    rec = {"system": "duckdb", "status": "ok", "recompute_every": cfg["every"],
           "recompute": "SELECT COUNT(*) of the view"}
    try:
        import duckdb
    except Exception as e:  # noqa: BLE001
        rec.update(status="unavailable", error=_err(e))
        return rec
    if trajectory:
        work = float(sum(trajectory))
        rec["est_work_tuples"] = work
        if work > cfg["duckdb_max_work"]:
            rec.update(status="skipped", reason=f"estimated recomputation work {work:.3g} "
                                                f"tuples > {cfg['duckdb_max_work']:.3g}")
            return rec
    every = cfg["every"]
    con = duckdb.connect()
    timer = None
    try:
        first = {}
        for t, row in stream:
            first.setdefault(t, row)
        for t, cols in w.schema.items():
            row = first.get(t)
            types = [_duck_type(row[i]) if row else "BIGINT" for i in range(len(cols))]
            con.execute(f'CREATE TABLE "{t}" ('
                        + ", ".join(f'"{c}" {ty}' for c, ty in zip(cols, types)) + ")")
        count_sql = _count_sql(w.sql)
        rec["count_sql"] = count_sql
        con.execute(count_sql).fetchall()  # warm-up on the empty tables
        deadline = _now() + cfg["budget"]
        timer = threading.Timer(cfg["budget"] + 0.05, con.interrupt)
        timer.daemon = True
        gc.collect()
        n = len(stream)
        done = 0
        count = None
        recomputes = 0
        timed_out = False
        t0 = _now()
        try:
            timer.start()
            for start in range(0, n, every):
                batch = {}
                for t, row in stream[start:start + every]:
                    batch.setdefault(t, []).append(row)
                for t, rows in batch.items():
                    con.execute(f'INSERT INTO "{t}" VALUES '
                                + ",".join("(" + ",".join(map(_lit, r)) + ")" for r in rows))
                count = con.execute(count_sql).fetchall()[0][0]
                recomputes += 1
                done = min(n, start + every)
                if _now() > deadline and done < n:
                    timed_out = True
                    break
        except duckdb.Error as e:
            if _now() >= deadline - 0.01:
                timed_out = True
            else:
                raise
        secs = _now() - t0
        timer.cancel()
        _per_update(rec, done, secs)
        rec["recomputations"] = recomputes
        if timed_out:
            rec.update(status="skipped", reason=f"timeout: {cfg['budget']}s budget exceeded "
                                                f"after {done}/{n} updates")
            rec["partial_us_per_update"] = rec.pop("us_per_update", None)
            rec.pop("updates_per_s", None)
            return rec
        rec["view_len"] = count
        # "enumeration": run the query and fetch (at most enum_cap) rows
        cap = cfg["enum_cap"]
        lim_sql = f"{w.sql} LIMIT {cap + 1}"
        t0 = _now()
        got = con.execute(lim_sql).fetchall()
        esecs = _now() - t0
        m = min(len(got), cap)
        rec["enum"] = {"tuples": m, "seconds": round(esecs, 6), "truncated": len(got) > cap,
                       "tuples_per_s": round(m / esecs, 1) if esecs > 0 and m else None,
                       "what": "query + fetchall (LIMIT cap)"}
        del got
        try:
            mem = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()
            rec["duckdb_mem_mb_end"] = round((mem[0][0] or 0) / 2**20, 3)
        except duckdb.Error:
            pass
    except Exception as e:  # noqa: BLE001
        rec.update(status="error", error=_err(e), traceback=traceback.format_exc(limit=6))
    finally:
        if timer is not None:
            timer.cancel()
        try:
            con.close()
        except Exception:  # noqa: BLE001
            pass
    return rec


def run_naive(w, stream, cfg, label="naive"):
    rec = {"system": label, "status": "ok"}
    make = lambda: naive_mod.compile_view(w.sql, w.schema)  # noqa: E731
    try:
        view = make()
    except Exception as e:  # noqa: BLE001
        rec.update(status="rejected", error=_err(e))
        return rec
    view.deadline = _now() + cfg["budget"]
    view.max_rows = cfg["naive_max_rows"]
    gc.collect()
    done = 0
    ins = view.insert
    t0 = _now()
    try:
        for t, row in stream:
            ins(t, row)
            done += 1
        secs = _now() - t0
    except naive_mod.NaiveTimeout:
        secs = _now() - t0
        _per_update(rec, done, secs)
        rec.update(status="skipped", reason=f"timeout: {cfg['budget']}s budget exceeded after "
                                            f"{done}/{len(stream)} updates")
        rec["partial_us_per_update"] = rec.pop("us_per_update", None)
        rec.pop("updates_per_s", None)
        return rec
    except naive_mod.NaiveTooLarge:
        secs = _now() - t0
        _per_update(rec, done, secs)
        rec.update(status="skipped", reason=f"view too large: > {cfg['naive_max_rows']} "
                                            f"rows after {done}/{len(stream)} updates")
        rec["partial_us_per_update"] = rec.pop("us_per_update", None)
        rec.pop("updates_per_s", None)
        return rec
    except Exception as e:  # noqa: BLE001
        rec.update(status="error", error=_err(e), traceback=traceback.format_exc(limit=6))
        return rec
    view.deadline = None
    _per_update(rec, done, secs)
    rec["view_len"] = len(view)
    enum, sum_k, distinct, unique = _measure_enum(view.rows, cfg["enum_cap"])
    rec["enum"] = enum
    rec["distinct_rows"] = distinct
    view = None  # noqa: F841
    if cfg["memory"] and _memory_wanted(cfg, len(stream), rec):
        if secs * TRACE_SLOWDOWN > 2 * cfg["mem_budget"]:
            rec["memory_note"] = "memory pass skipped (stream too slow under tracemalloc)"
        else:
            rec["peak_mb"], _, note = _memory_pass(
                make, stream, cfg["mem_budget"], cfg["every"],
                deadline_exc=(naive_mod.NaiveTimeout, naive_mod.NaiveTooLarge))
            if note:
                rec["memory_note"] = note
    return rec


# --------------------------------------------------------------------------- driver
def _load_engine(name):
    try:
        mod = importlib.import_module(name)
        if not hasattr(mod, "compile_view"):
            return None, f"{name} has no compile_view"
        return mod, None
    except Exception as e:  # noqa: BLE001
        return None, _err(e)


def run(cfg, log=print):
    engine_mod, engine_err = (None, None)
    if "ivm" in cfg["systems"]:
        engine_mod, engine_err = _load_engine(cfg["engine_module"])
    results = []
    trouble = {}  # (workload, system) -> reason a smaller size failed
    for wname in cfg["workloads"]:
        w = wl.get(wname)
        for n in cfg["sizes"]:
            stream = w.stream(n, cfg["seed"])
            base = {"workload": w.name, "n": len(stream), "n_requested": n}
            known_len = None
            trajectory = None
            for system in cfg["systems"]:
                t_start = _now()
                label = system
                if system == "ivm" and cfg["engine_module"] != "ivm_layer":
                    label = f"ivm[{cfg['engine_module']}]"
                prev = trouble.get((w.name, system))
                if prev:
                    rec = {"system": label, "status": "skipped", "reason": prev}
                elif system == "ivm":
                    if engine_mod is None:
                        rec = {"system": label, "status": "unavailable", "error": engine_err}
                    else:
                        rec, trajectory = run_engine(engine_mod, w, stream, cfg, label)
                elif system == "duckdb":
                    rec = run_duckdb(w, stream, cfg, trajectory)
                elif system == "naive":
                    if known_len is not None and known_len > cfg["naive_max_rows"]:
                        rec = {"system": label, "status": "skipped",
                               "reason": f"view too large: {known_len} rows > "
                                         f"{cfg['naive_max_rows']} (would not fit the budget)"}
                    else:
                        rec = run_naive(w, stream, cfg, label)
                else:
                    rec = {"system": label, "status": "error", "error": "unknown system"}
                rec = {**base, **rec, "wall_s": round(_now() - t_start, 3)}
                if rec.get("status") == "ok" and rec.get("view_len") is not None and known_len is None:
                    known_len = rec["view_len"]
                if rec["status"] == "skipped" and system != "ivm" and not prev:
                    # views and recomputation only grow with N: skip the larger sizes too
                    why = rec.get("reason", "").split(":")[0]
                    trouble[(w.name, system)] = f"{why} at smaller N={len(stream)}"
                results.append(rec)
                log(_one_line(rec))
    return results


def _one_line(r):
    s = f"  {r['workload']:<6} N={r['n']:<7} {r['system']:<8} {r['status']:<9}"
    if r.get("updates_per_s"):
        s += f" {r['updates_per_s']:>12,.0f} upd/s"
    if r.get("view_len") is not None:
        s += f"  |view|={r['view_len']:,}"
    if r.get("reason") or r.get("error"):
        s += f"  ({r.get('reason') or r.get('error')})"
    s += f"  [{r.get('wall_s', 0):.1f}s]"
    return s


def flatness(results, sizes):
    """Per-update cost at N and 10N for every (workload, system) where both ran."""
    out = []
    by = {(r["workload"], r["system"], r["n_requested"]): r for r in results}
    pairs = [(a, b) for a in sizes for b in sizes if b == 10 * a]
    if not pairs and len(sizes) >= 2:
        pairs = [(min(sizes), max(sizes))]
    seen = []
    for r in results:
        key = (r["workload"], r["system"])
        if key in seen:
            continue
        seen.append(key)
        for a, b in pairs:
            ra, rb = by.get(key + (a,)), by.get(key + (b,))
            if not ra or not rb:
                continue
            ua = ra.get("us_per_update")
            ub = rb.get("us_per_update")
            if ua is None and ub is None:
                continue
            ent = {"workload": key[0], "system": key[1], "n": a, "n_big": b,
                   "us_per_update_n": ua, "us_per_update_big": ub,
                   "ratio": round(ub / ua, 3) if ua and ub else None}
            if ub is None and rb.get("partial_us_per_update"):
                ent["note"] = f"N={b}: {rb.get('reason')}"
            out.append(ent)
    return out


def cross_checks(results):
    """Do the systems agree on the final view size (total multiplicity)?"""
    checks = []
    groups = {}
    for r in results:
        if r.get("status") == "ok" and r.get("view_len") is not None:
            groups.setdefault((r["workload"], r["n"]), {})[r["system"]] = r["view_len"]
    for (wname, n), lens in groups.items():
        agree = len(set(lens.values())) <= 1
        checks.append({"workload": wname, "n": n, "view_len": lens, "agree": agree})
        for r in results:
            if (r["workload"], r["n"]) == (wname, n) and r["system"] in lens:
                r["agrees_with_others"] = agree if len(lens) > 1 else None
    return checks


def _fmt(v, nd=0):
    if v is None:
        return "–"
    if isinstance(v, float):
        if abs(v) >= 100 or nd == 0:
            return f"{v:,.0f}"
        return f"{v:,.{nd}f}"
    return f"{v:,}"


def markdown(doc):
    L = []
    m = doc["machine"]
    L.append(f"# engine smoke benchmark ({doc['created']})")
    L.append("")
    L.append(f"{m['platform']}, Python {m['python']}, {m['cpu_count']} CPUs, "
             f"DuckDB {m.get('duckdb')}; seed {doc['config']['seed']}; random-order insert "
             f"streams; DuckDB recounts every {doc['config']['every']} updates; enumeration "
             f"capped at {doc['config']['enum_cap']:,} tuples.")
    L.append("")
    L.append("| workload | N | system | status | upd/s | µs/upd | enum tup/s | list/enum | "
             "view size (len) | distinct | peak MB |")
    L.append("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in doc["results"]:
        e = r.get("enum") or {}
        status = r["status"]
        if status != "ok":
            why = r.get("reason") or r.get("error") or ""
            why = why.replace("|", "/").splitlines()[0] if why else ""
            status = f"{status}: {why[:70]}" if why else status
        us = r.get("us_per_update")
        if us is None and r.get("partial_us_per_update"):
            us_s = f"({_fmt(r['partial_us_per_update'], 1)})"
        else:
            us_s = _fmt(us, 1)
        ets = _fmt(e.get("tuples_per_s"))
        if e.get("truncated"):
            ets += "*"
        distinct = r.get("distinct_rows")
        peak = _fmt(r.get("peak_mb"), 2)
        if r.get("peak_mb") is not None and "so far" in (r.get("memory_note") or ""):
            peak = "≥" + peak
        L.append(f"| {r['workload']} | {r['n']:,} | {r['system']} | {status} | "
                 f"{_fmt(r.get('updates_per_s'))} | {us_s} | {ets} | "
                 f"{_fmt(e.get('slowdown_vs_list'), 2)} | {_fmt(r.get('view_len'))} | "
                 f"{_fmt(distinct) if distinct is not None else ('>' + _fmt(e.get('tuples')) if e.get('truncated') else '–')} | "
                 f"{peak} |")
    L.append("")
    L.append("`*` enumeration stopped at the cap; `(x)` per-update cost of the part of the "
             "stream done before the baseline's budget ran out; list/enum = how many times "
             "faster iterating a plain Python list of the same rows is; `≥` peak of a "
             "tracemalloc pass stopped by its time budget.")
    if doc["flatness"]:
        L.append("")
        L.append("Per-update cost at N and 10×N (flatness: 1.0 = constant per-update cost)")
        L.append("")
        L.append("| workload | system | µs/upd @N | µs/upd @big | N → big | ratio |")
        L.append("|---|---|---:|---:|---|---:|")
        for f in doc["flatness"]:
            L.append(f"| {f['workload']} | {f['system']} | {_fmt(f['us_per_update_n'], 1)} | "
                     f"{_fmt(f['us_per_update_big'], 1)} | {f['n']:,} → {f['n_big']:,} | "
                     f"{_fmt(f['ratio'], 2)} |")
    bad = [c for c in doc["checks"] if not c["agree"]]
    L.append("")
    if bad:
        L.append("**View sizes disagree:** " + "; ".join(
            f"{c['workload']} N={c['n']}: {c['view_len']}" for c in bad))
    else:
        L.append(f"All systems that finished agree on the final view size "
                 f"({len(doc['checks'])} (workload, N) groups checked).")
    return "\n".join(L) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.engine_smoke", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", help="comma-separated stream sizes (default 2000,20000; "
                                   "quick 50,500)")
    p.add_argument("--out", default="bench-results", help="output directory (bench-results)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and budgets (seconds)")
    p.add_argument("--workloads", default=",".join(wl.names()),
                   help=f"comma-separated subset of {','.join(wl.names())}")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="comma-separated subset of ivm,duckdb,naive")
    p.add_argument("--engine-module", default="ivm_layer",
                   help="module providing compile_view for the 'ivm' system "
                        "(bench.naive to exercise the harness without the engine)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--budget", type=float, help="seconds per baseline run (default 20)")
    p.add_argument("--engine-budget", type=float, help="seconds per engine stream pass (40)")
    p.add_argument("--mem-budget", type=float, help="seconds per tracemalloc pass (15)")
    p.add_argument("--enum-cap", type=int, help="max tuples per enumeration (1,000,000)")
    p.add_argument("--naive-max-rows", type=int, help="naive view size cap (3,000,000)")
    p.add_argument("--every", type=int, help="DuckDB recomputation period in updates (100)")
    p.add_argument("--no-memory", action="store_true", help="skip the tracemalloc passes")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    cfg = dict(DEFAULTS)
    if a.quick:
        cfg.update(QUICK)
    if a.sizes:
        cfg["sizes"] = [int(float(s)) for s in a.sizes.split(",") if s.strip()]
    for k in ("budget", "engine_budget", "mem_budget", "enum_cap", "naive_max_rows", "every"):
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    cfg["workloads"] = [wl.get(x.strip()).name for x in a.workloads.split(",") if x.strip()]
    cfg["systems"] = [s.strip() for s in a.systems.split(",") if s.strip()]
    for s in cfg["systems"]:
        if s not in SYSTEMS:
            raise SystemExit(f"unknown system {s!r}; choose from {','.join(SYSTEMS)}")
    cfg["engine_module"] = a.engine_module
    cfg["seed"] = a.seed
    cfg["memory"] = not a.no_memory
    cfg["quick"] = a.quick

    created = _dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    print(f"engine_smoke: sizes={cfg['sizes']} workloads={','.join(cfg['workloads'])} "
          f"systems={','.join(cfg['systems'])}", flush=True)
    t0 = _now()
    results = run(cfg, log=lambda s: print(s, flush=True))
    doc = {
        "benchmark": "bench.engine_smoke",
        "created": created,
        "total_s": round(_now() - t0, 3),
        "machine": machine_info(),
        "config": cfg,
        "queries": {w: wl.get(w).sql for w in cfg["workloads"]},
        "results": results,
    }
    doc["flatness"] = flatness(results, cfg["sizes"])
    doc["checks"] = cross_checks(results)
    md = markdown(doc)
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "engine_smoke-" + created.replace(":", "").replace("-", "")
                        + f"-{os.getpid()}")
    with open(stem + ".json", "w") as f:
        json.dump(doc, f, indent=2, default=str)
    with open(stem + ".md", "w") as f:
        f.write(md)
    print()
    print(md)
    print(f"wrote {stem}.json and {stem}.md ({doc['total_s']:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
