"""The systems of the benchmark, each a function ``run(workload, stream, cfg, probe) -> record``.

* ``ivm-pull``: the engine maintains its T-representation, one ``view.apply`` per batch of B
  updates (``--engine-batch``, by default the ``--batch`` that DuckDB recomputes after; B = 1:
  ``view.insert`` / ``view.delete`` per update); the result is enumerated once at the end
  (enumeration benchmark included).
* ``ivm-push``: the engine produces the view's change after every update (``view.diff``),
  which the benchmark consumes (counts) — delta enumeration, 000 §7 push mode.
* ``duckdb``: recomputation — the updates go to DuckDB tables and the view is recomputed
  (``CREATE OR REPLACE TEMP TABLE … AS <view>``) after every batch of B updates; the per-update
  cost is the whole wall time (writes + recomputations) divided by the number of updates.
* ``naive``: first-order IVM with a materialized result (``ivm_layer/bench/naive.py``).
* ``pathway`` / ``flink``: optional peers, detected by import and run when installed
  (``ivm_layer/bench/peers.py``); otherwise reported as ``skipped: not installed``.

Records are plain dicts (JSON-ready). The runners are called in a child process by
``ivm_layer/bench/isolate.py`` (time budget, peak RSS) and directly by the tests.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import itertools
import time
import traceback
from typing import Any, Callable, Iterable, Iterator

import ivm_layer

from . import naive as naive_mod
from . import peers as peers_mod
from .workloads import Workload

ENGINE_SYSTEMS = ("ivm-pull", "ivm-push")
BASE_SYSTEM = "ivm-base"  # ivm-pull with the engine of an older checkout (ivm bench --baseline DIR)
BASELINES = ("duckdb", "naive")
PEERS = {"pathway": ("pathway", "pip install pathway"),
         "flink": ("pyflink", "pip install apache-flink")}
SYSTEMS = ENGINE_SYSTEMS + (BASE_SYSTEM,) + BASELINES + tuple(PEERS)
DEFAULT_SYSTEMS = ENGINE_SYSTEMS + BASELINES + tuple(PEERS)



class Probe:
    """What a runner reports while it runs: progress (``tick``: updates done, seconds) and the
    moment the view is maintained to the end of the stream (``maintained``: the child process
    reads its peak RSS there, before enumeration allocates anything). This one does nothing."""

    def tick(self, done: int, secs: float) -> None:
        pass

    def maintained(self, rec: dict) -> None:
        pass

AGG_PROBE = ("SELECT a, SUM(b) FROM r GROUP BY a", {"r": ["a", "b"]})
_AGG_SUPPORT: list = []


def aggregates_supported() -> tuple[bool, str]:
    """Does this engine build compile a grouped aggregate? (result, the engine's message)."""
    if not _AGG_SUPPORT:
        try:
            ivm_layer.compile_view(*AGG_PROBE)
            _AGG_SUPPORT.append((True, "ok"))
        except ivm_layer.IVMError as e:
            _AGG_SUPPORT.append((False, str(e).splitlines()[0]))
    return _AGG_SUPPORT[0]


def precheck(w: Workload, system: str) -> dict | None:
    """A record for a (workload, system) pair that cannot run at all, else None."""
    if system in PEERS:
        module, how = PEERS[system]
        if importlib.util.find_spec(module) is None:
            return {"status": "skipped", "reason": f"not installed ({how})"}
        if w.requires == "aggregates":
            return {"status": "skipped", "reason": f"GROUP BY is not translated for the {system} runner"}
        return None
    if w.requires == "aggregates":
        if system == "naive":
            return {"status": "skipped", "reason": "the naive baseline has no GROUP BY"}
        if system in ENGINE_SYSTEMS and not aggregates_supported()[0]:
            return {"status": "skipped", "reason": "aggregates not supported by this engine build"}
    return None


# ----------------------------------------------------------------------------- helpers
def _now() -> float:
    return time.perf_counter()


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _timing(rec: dict, done: int, secs: float) -> None:
    rec["updates"] = done
    rec["stream_s"] = round(secs, 6)
    if done and secs > 0:
        rec["updates_per_s"] = round(done / secs, 1)
        rec["us_per_update"] = round(secs / done * 1e6, 3)


def fingerprint(pairs: Iterable[tuple[tuple, int]]) -> str:
    """An order-independent, process-independent digest of a bag ``[(row, k)]``: the sum of
    ``k · h(row)`` mod 2^64 with ``h`` a BLAKE2 hash of ``repr(row)``."""
    acc = 0
    for row, k in pairs:
        h = int.from_bytes(hashlib.blake2b(repr(tuple(row)).encode(), digest_size=8).digest(), "big")
        acc = (acc + h * k) % (1 << 64)
    return "%016x" % acc


def _bag_checks(rec: dict, rows_fn: Callable[[], Iterator], cfg: dict) -> None:
    """Distinct rows and fingerprint, when the result is small enough (outside all timings)."""
    cap = cfg["fingerprint_cap"]
    pairs = list(itertools.islice(rows_fn(), cap + 1))
    if len(pairs) > cap:
        rec["fingerprint"] = None
        return
    rec["distinct_rows"] = len(pairs)
    rec["fingerprint"] = fingerprint(pairs)
    rec["enum_sum_k"] = sum(k for _, k in pairs)


def measure_enumeration(rows_fn: Callable[[], Iterator], cap: int) -> dict:
    """Full enumeration of ``rows_fn()`` (at most ``cap`` (row, k) pairs) against iterating a
    Python list holding the same pairs: tuples/s of both and their ratio. The first call (which
    may generate and compile the plan's enumeration code) is timed to its first pair separately
    (``first_pair_s``); the full enumeration is timed on a second call."""
    gc.collect()
    t0 = _now()
    next(iter(rows_fn()), None)
    first = _now() - t0
    it = rows_fn()
    n = 0
    t0 = _now()
    for _ in itertools.islice(it, cap):
        n += 1
    secs = _now() - t0
    truncated = n == cap and next(it, None) is not None
    del it
    out = {"tuples": n, "seconds": round(secs, 6), "truncated": truncated, "first_pair_s": round(first, 6),
           "tuples_per_s": round(n / secs, 1) if secs > 0 and n else None}
    lst = list(itertools.islice(rows_fn(), cap))
    t0 = _now()
    for _ in lst:
        pass
    lsecs = _now() - t0
    out["list_tuples_per_s"] = round(len(lst) / lsecs, 1) if lsecs > 0 and lst else None
    if out["tuples_per_s"] and out["list_tuples_per_s"]:
        out["list_speedup"] = round(out["list_tuples_per_s"] / out["tuples_per_s"], 2)
    return out


def engine_state(view: Any) -> dict:
    """The engine's own accounting of what it stores (``view.stats()``: base rows kept for
    delete validation, T-representation index entries, index entries of a materialized core,
    materialized result rows; for aggregate views also groups and multiset values)."""
    st = dict(view.stats())
    st["core_index_entries"] = st.pop("core_entries")
    st["stored_tuples"] = st.pop("stored")
    return st


def _counts(stream: list) -> dict:
    ins = sum(1 for _, _, k in stream if k > 0)
    return {"n": len(stream), "inserts": ins, "deletes": len(stream) - ins}


# ----------------------------------------------------------------------------- engine
def _compile(w: Workload, rec: dict, mod: Any = None):
    mod = mod or ivm_layer
    try:
        return mod.compile_view(w.sql, w.schema, dialect="duckdb")
    except mod.IVMError as e:
        rec.update(status="rejected", error=str(e))
        return None


def run_ivm_base(w: Workload, stream: list, cfg: dict, probe: Probe) -> dict:
    """ivm-pull with the engine of the checkout ``cfg["baseline"]`` (before/after in one run)."""
    from .floor import load_engine

    if not cfg.get("baseline"):
        return {"status": "skipped", "reason": "no --baseline checkout given"}
    rec = run_ivm_pull(w, stream, cfg, probe, load_engine(cfg["baseline"]))
    rec["baseline"] = cfg["baseline"]
    return rec


def _first_touches(stream: list) -> list[int]:
    """Indexes of the first update of each table in ``stream`` (ascending): where a view builds
    (generates and compiles) that table's update path — a once-per-view cost like compile_view."""
    seen: dict = {}
    for i, (t, _, _) in enumerate(stream):
        if t not in seen:
            seen[t] = i
    return sorted(seen.values())


def _maintain(view: Any, stream: list, B: int, probe: Probe | None, firsts: list[int]) -> tuple[int, float, float, float]:
    """Apply ``stream`` to ``view`` (batches of ``B``, or one update at a time through
    ``view.insert``/``view.delete``); returns (updates done, CPU seconds in all, CPU seconds of
    the first update of each table — B = 1 only, timed one by one —, wall seconds in all)."""
    ins, dele, apply = view.insert, view.delete, view.apply
    first_s = 0.0
    _cpu = time.process_time
    w0 = _now()
    t0 = _cpu()
    done = 0
    step = B if B > 1 else 512
    fi = 0
    for start in range(0, len(stream), step):
        end = min(len(stream), start + step)
        if B > 1:
            batch: dict = {}
            for t, row, k in stream[start:end]:
                lst = batch.get(t)
                if lst is None:
                    batch[t] = [(row, k)]
                else:
                    lst.append((row, k))
            apply(batch)
        else:
            at = start
            while fi < len(firsts) and firsts[fi] < end:  # a first touch: timed on its own
                f = firsts[fi]
                fi += 1
                for t, row, k in stream[at:f]:
                    if k > 0:
                        ins(t, row)
                    else:
                        dele(t, row)
                t, row, k = stream[f]
                t1 = _cpu()
                if k > 0:
                    ins(t, row)
                else:
                    dele(t, row)
                first_s += _cpu() - t1
                at = f + 1
            for t, row, k in stream[at:end]:
                if k > 0:
                    ins(t, row)
                else:
                    dele(t, row)
        done = end
        if probe is not None:
            probe.tick(done, _cpu() - t0)
    return done, _cpu() - t0, first_s, _now() - w0


#: ``ivm bench`` has ivm-pull repeat the maintenance (a fresh view each round) for at least
#: ``cfg["min_rounds"]`` rounds (MIN_ROUNDS from the command line; 1 when not given), more while
#: they add up to less than MIN_TIMED_S (at most MAX_ROUNDS), always within a quarter of the
#: run's budget; it reports the median round.
MIN_ROUNDS, MAX_ROUNDS, MIN_TIMED_S = 3, 9, 1.0


def run_ivm_pull(w: Workload, stream: list, cfg: dict, probe: Probe, mod: Any = None) -> dict:
    """The engine maintaining the stream, ``B`` updates per ``view.apply`` (B = 1: one
    ``view.insert``/``view.delete`` per update). The per-update cost is the steady state: the
    median of several rounds (each on a fresh view; a short stream under load measures
    noise otherwise), without the first update of each table (where the view generates its
    update code, once per view, like compile_view, which is not timed either); that first
    update is reported as ``first_updates_s``, the whole first round as ``us_per_update_all``.
    Times are the process's CPU time (on a shared machine wall time counts the time other
    processes held the CPU); the first round's wall time is ``us_per_update_wall``."""
    B = cfg.get("engine_batch") or cfg.get("batch") or 1
    rec: dict = {"status": "ok", "batch": B,
                 "mode": (f"pull: maintain in batches of {B} updates (view.apply, the granularity DuckDB "
                          "recomputes at), enumerate at the end") if B > 1 else
                         "pull: maintain one update at a time, enumerate at the end"}
    view = _compile(w, rec, mod)
    if view is None:
        return rec
    rec["query_class"] = view.query_class
    firsts = _first_touches(stream) if B == 1 else []
    least = max(1, int(cfg.get("min_rounds") or 1))
    rounds: list[float] = []
    spent = 0.0
    limit = (cfg.get("budget_s") or 120.0) / 4
    while True:
        gc.collect()
        done, secs, first_s, wall = _maintain(view, stream, B, probe if not rounds else None, firsts)
        spent += secs
        steady = done - len(firsts)
        rounds.append((secs - first_s) / steady * 1e6 if steady > 0 else secs / max(done, 1) * 1e6)
        if len(rounds) == 1:
            _timing(rec, done, secs)
            rec["us_per_update_all"] = rec.get("us_per_update")
            rec["first_updates_s"] = round(first_s, 6)
            rec["us_per_update_wall"] = round(wall / max(done, 1) * 1e6, 3)
        more = len(rounds) < least or (least > 1 and spent < MIN_TIMED_S and len(rounds) < MAX_ROUNDS)
        if not more or spent + secs > limit:
            break
        del view
        gc.collect()
        view = _compile(w, rec, mod)
    med = sorted(rounds)[len(rounds) // 2]
    rec["rounds"] = len(rounds)
    rec["us_per_update_rounds"] = [round(x, 3) for x in rounds]
    rec["us_per_update"] = round(med, 3)
    rec["updates_per_s"] = round(1e6 / med, 1) if med > 0 else None
    rec["view_size"] = len(view)
    rec["state"] = engine_state(view)
    probe.maintained(rec)  # peak RSS of the maintenance phase is read here
    if cfg.get("maintain_only"):  # a pass of a paired before/after (ivm bench --baseline)
        return rec
    rec["enum"] = measure_enumeration(view.rows, cfg["enum_cap"])
    _bag_checks(rec, view.rows, cfg)
    return rec


def merge_passes(recs: list[dict]) -> dict:
    """One record of several passes of one system (the last pass's, which enumerated): µs per
    update the median of every round of every pass."""
    rec = dict(recs[-1])
    ok = [r for r in recs if r.get("status") == "ok" and r.get("us_per_update_rounds")]
    if rec.get("status") != "ok" or not ok:
        return rec
    allr = [x for r in ok for x in r["us_per_update_rounds"]]
    med = sorted(allr)[len(allr) // 2]
    rec.update(passes=len(recs), rounds=len(allr), us_per_update_rounds=allr, us_per_update=round(med, 3),
               updates_per_s=round(1e6 / med, 1) if med > 0 else None)
    return rec


def run_ivm_push(w: Workload, stream: list, cfg: dict, probe: Probe) -> dict:
    rec: dict = {"status": "ok", "mode": "push: view.diff after every update, changes consumed"}
    view = _compile(w, rec)
    if view is None:
        return rec
    rec["query_class"] = view.query_class
    diff = view.diff
    delta_tuples = 0
    net = 0
    gc.collect()
    t0 = _now()
    done = 0
    for start in range(0, len(stream), 512):
        for t, row, k in stream[start:start + 512]:
            for _, dk in diff({t: ((row, k),)}):
                delta_tuples += dk if dk > 0 else -dk
                net += dk
        done = min(len(stream), start + 512)
        probe.tick(done, _now() - t0)
    _timing(rec, done, _now() - t0)
    rec["view_size"] = len(view)
    rec["state"] = engine_state(view)
    probe.maintained(rec)
    rec["delta_tuples"] = delta_tuples
    secs = rec["stream_s"]
    rec["delta_tuples_per_s"] = round(delta_tuples / secs, 1) if secs > 0 and delta_tuples else None
    # the changes emitted, summed, must add up to the final view (a check of delta enumeration)
    rec["deltas_sum_to_view"] = net == len(view) if not view.plan.gcq.distinct else None
    _bag_checks(rec, view.rows, cfg)
    return rec


# ----------------------------------------------------------------------------- naive
def run_naive(w: Workload, stream: list, cfg: dict, probe: Probe) -> dict:
    rec: dict = {"status": "ok", "mode": "first-order IVM, materialized result"}
    try:
        view = naive_mod.compile_view(w.sql, w.schema)
    except naive_mod.NaiveError as e:
        rec.update(status="rejected", error=str(e))
        return rec
    view.max_rows = cfg["naive_max_rows"]
    ins, dele = view.insert, view.delete
    gc.collect()
    t0 = _now()
    done = 0
    try:
        for start in range(0, len(stream), 256):
            for t, row, k in stream[start:start + 256]:
                if k > 0:
                    ins(t, row)
                else:
                    dele(t, row)
            done = min(len(stream), start + 256)
            probe.tick(done, _now() - t0)
    except naive_mod.NaiveTooLarge:
        _timing(rec, done, _now() - t0)
        rec.pop("updates_per_s", None)
        rec["partial_us_per_update"] = rec.pop("us_per_update", None)
        rec.update(status="skipped", reason=f"view too large: more than {cfg['naive_max_rows']:,} "
                                            f"materialized rows after {done:,} updates")
        return rec
    _timing(rec, done, _now() - t0)
    rec["view_size"] = len(view)
    rec["state"] = {"base_rows": sum(len(r.rows) for r in view.rels.values()),
                    "materialized_rows": len(view._result)}
    rec["state"]["stored_tuples"] = rec["state"]["base_rows"] + rec["state"]["materialized_rows"]
    probe.maintained(rec)
    rec["enum"] = measure_enumeration(view.rows, cfg["enum_cap"])
    _bag_checks(rec, view.rows, cfg)
    return rec


# ----------------------------------------------------------------------------- duckdb
def _duck_type(v: Any) -> str:
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int):
        return "BIGINT"
    if isinstance(v, float):
        return "DOUBLE"
    return "VARCHAR"


def _lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


RESULT = "__ivm_bench_result"


def _duck_write(con: Any, w: Workload, batch: list, arrow: Any) -> int:
    """Apply a batch of updates to the DuckDB tables: per table, the batch's net change — the
    rows deleted (one ``DELETE … WHERE rowid IN (… LIMIT c)`` per row) and then all rows
    inserted in one statement (an Arrow table when pyarrow is available, else a multi-row
    ``VALUES``). The tables end in the same state as applying the updates one by one; the view
    is not looked at inside a batch. Returns the number of statements."""
    net: dict[str, dict[tuple, int]] = {}
    for t, row, k in batch:
        d = net.setdefault(t, {})
        d[row] = d.get(row, 0) + k
    statements = 0
    for t, changes in net.items():
        cols = w.schema[t]
        for row, c in changes.items():
            if c < 0:
                cond = " AND ".join(f'"{col}" = {_lit(v)}' for col, v in zip(cols, row))
                con.execute(f'DELETE FROM "{t}" WHERE rowid IN (SELECT rowid FROM "{t}" WHERE {cond} LIMIT {-c})')
                statements += 1
        rows = [row for row, c in changes.items() for _ in range(c)]
        if not rows:
            continue
        if arrow is not None:
            con.register("__ivm_bench_batch", arrow.table({col: [r[i] for r in rows] for i, col in enumerate(cols)}))
            con.execute(f'INSERT INTO "{t}" SELECT * FROM __ivm_bench_batch')
            con.unregister("__ivm_bench_batch")
        else:
            con.execute(f'INSERT INTO "{t}" VALUES ' + ",".join("(" + ",".join(map(_lit, r)) + ")" for r in rows))
        statements += 1
    return statements


def run_duckdb(w: Workload, stream: list, cfg: dict, probe: Probe) -> dict:
    import duckdb

    B = cfg["batch"]
    rec: dict = {"status": "ok", "mode": f"recompute the view after every {B} updates",
                 "batch": B, "duckdb_version": duckdb.__version__}
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        if cfg.get("duckdb_threads"):
            con.execute(f"SET threads = {int(cfg['duckdb_threads'])}")
        rec["duckdb_threads"] = con.execute("SELECT current_setting('threads')").fetchone()[0]
        first: dict = {}
        for t, row, _ in stream:
            first.setdefault(t, row)
        for t, cols in w.schema.items():
            row = first.get(t)
            types = [_duck_type(row[i]) if row else "BIGINT" for i in range(len(cols))]
            con.execute(f'CREATE TABLE "{t}" (' + ", ".join(f'"{c}" {ty}' for c, ty in zip(cols, types)) + ")")
        recompute = f"CREATE OR REPLACE TEMP TABLE {RESULT} AS {w.sql}"
        con.execute(recompute)  # plan once on the empty tables (warm-up, not timed)
        try:
            import pyarrow as arrow

            con.register("__ivm_bench_batch", arrow.table({"x": [1]}))  # warm-up, not timed
            con.execute("SELECT * FROM __ivm_bench_batch").fetchall()
            con.unregister("__ivm_bench_batch")
            rec["write_method"] = "net change per batch: DELETE by rowid, INSERT … SELECT from an Arrow table"
        except ImportError:
            arrow = None
            rec["write_method"] = "net change per batch: DELETE by rowid, multi-row INSERT … VALUES (no pyarrow)"
        statements = 0
        gc.collect()
        write_s = recompute_s = 0.0
        recomputations = 0
        done = 0
        t0 = _now()
        for start in range(0, len(stream), B):
            batch = stream[start:start + B]
            a = _now()
            statements += _duck_write(con, w, batch, arrow)
            b = _now()
            con.execute(recompute)
            c = _now()
            write_s += b - a
            recompute_s += c - b
            recomputations += 1
            done = start + len(batch)
            probe.tick(done, c - t0)
        _timing(rec, done, _now() - t0)
        rec["write_s"] = round(write_s, 6)
        rec["recompute_s"] = round(recompute_s, 6)
        rec["recomputations"] = recomputations
        rec["write_statements"] = statements
        rec["view_size"] = con.execute(f"SELECT count(*) FROM {RESULT}").fetchone()[0]
        probe.maintained(rec)
        try:
            mem = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0]
            rec["duckdb_memory_mb"] = round((mem or 0) / 2**20, 3)
        except duckdb.Error:
            pass
        cap = cfg["enum_cap"]
        t0 = _now()
        got = con.execute(f"SELECT * FROM {RESULT} LIMIT {cap + 1}").fetchall()
        secs = _now() - t0
        m = min(len(got), cap)
        rec["enum"] = {"tuples": m, "seconds": round(secs, 6), "truncated": len(got) > cap,
                       "tuples_per_s": round(m / secs, 1) if secs > 0 and m else None,
                       "what": "SELECT * FROM the recomputed table + fetchall (rows, not (row, k))"}
        del got
        n_distinct = con.execute(f"SELECT count(*) FROM (SELECT DISTINCT * FROM {RESULT})").fetchone()[0]
        if n_distinct <= cfg["fingerprint_cap"]:
            pairs = con.execute(f"SELECT *, count(*) FROM {RESULT} GROUP BY ALL").fetchall()
            rec["distinct_rows"] = len(pairs)
            rec["fingerprint"] = fingerprint((p[:-1], p[-1]) for p in pairs)
            rec["enum_sum_k"] = sum(p[-1] for p in pairs)
        else:
            rec["fingerprint"] = None
    finally:
        con.close()
    return rec


# ----------------------------------------------------------------------------- peers
def _run_peer(system: str) -> Callable[[Workload, list, dict, Probe], dict]:
    """A runner for an optional peer (``ivm_layer/bench/peers.py``): the peer maintains the view and hands
    back its final result bag; timing, view size and fingerprint are computed here, as for
    every other system."""

    def runner(w: Workload, stream: list, cfg: dict, probe: Probe) -> dict:
        res = peers_mod.RUNNERS[system](w, stream, probe)
        rec = res.rec
        if res.bag is None:
            return rec
        _timing(rec, len(stream), res.secs)
        bag = res.bag
        if any(k < 0 for k in bag.values()):
            raise RuntimeError(f"{system}'s result has rows with negative multiplicity")
        rec["view_size"] = sum(bag.values())
        if len(bag) <= cfg["fingerprint_cap"]:
            rec["distinct_rows"] = len(bag)
            rec["fingerprint"] = fingerprint(bag.items())
            rec["enum_sum_k"] = rec["view_size"]
        else:
            rec["fingerprint"] = None
        return rec

    return runner


RUNNERS = {"ivm-pull": run_ivm_pull, BASE_SYSTEM: run_ivm_base, "ivm-push": run_ivm_push, "duckdb": run_duckdb,
           "naive": run_naive,
           **{p: _run_peer(p) for p in PEERS}}


def run(system: str, w: Workload, stream: list, cfg: dict, probe: Probe | None = None) -> dict:
    """Run one system on one stream; exceptions become an ``error`` record (never raised)."""
    pre = precheck(w, system)
    if pre is not None:
        return pre
    try:
        rec = RUNNERS[system](w, stream, cfg, probe or Probe())
    except Exception as e:  # noqa: BLE001 - a failing system is a result, not a crash
        rec = {"status": "error", "error": _err(e), "traceback": traceback.format_exc(limit=8)}
    rec.update(_counts(stream))
    return rec
