"""One system, one stream, one child process: a time budget, a memory cap and peak RSS.

Each run happens in a fresh child (multiprocessing ``forkserver``: the server imports the engine
and the benchmark once, each child is a fork of it, so a run starts in milliseconds and its
memory is its own). The child builds the stream from (workload, n, seed) itself — nothing big
crosses the process boundary — and reports:

* ``rss_baseline_mb``: resident set size once the stream is built and the system's libraries
  are loaded (the engine and the naive baseline by the fork server, DuckDB and pyarrow in the
  child), before the system starts;
* ``peak_rss_mb``: the child's peak RSS (``getrusage(RUSAGE_SELF).ru_maxrss``) at the moment
  the view is maintained to the end of the stream, i.e. before enumeration allocates anything;
  ``rss_delta_mb`` = peak − baseline is what the system itself needed.

The parent waits at most ``budget`` seconds, polling the child's RSS; a child over its budget
or over ``mem_cap_mb`` is killed and recorded as ``timeout`` / ``memory cap``, with the updates
it had done (shared counters, updated every few hundred updates). Runs never hang.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from typing import Any

import psutil

_CTX: Any = None


def _context():
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(["ivm_layer.bench.systems"])
    return _CTX


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class _ChildProbe:
    def __init__(self, done, secs):
        self.done = done
        self.secs = secs

    def tick(self, done: int, secs: float) -> None:
        self.done.value = done
        self.secs.value = secs

    def maintained(self, rec: dict) -> None:
        rec["peak_rss_mb"] = round(_maxrss_mb(), 2)


def _child(conn, system: str, workload: str, n: int, seed: int, cfg: dict, done, secs) -> None:
    from . import systems, workloads

    try:
        w = workloads.get(workload)
        t0 = time.perf_counter()
        stream = w.stream(n, seed)
        gen_s = time.perf_counter() - t0
        if system == "duckdb":  # library code is not state: load it before the baseline, as the
            import duckdb  # noqa: F401  (fork server did for the engine and the naive baseline)

            try:
                import pyarrow  # noqa: F401
            except ImportError:
                pass
        elif system == systems.BASE_SYSTEM and cfg.get("baseline"):  # the older engine's modules
            from .floor import load_engine

            load_engine(cfg["baseline"])
        elif system in systems.PEERS:  # the peer's Python library (Flink's JVM starts in the run)
            import importlib

            importlib.import_module(systems.PEERS[system][0])
        base = _rss_mb()
        rec = systems.run(system, w, stream, cfg, _ChildProbe(done, secs))
        rec["stream_gen_s"] = round(gen_s, 4)
        rec["rss_baseline_mb"] = round(base, 2)
        if rec.get("peak_rss_mb") is not None:
            rec["rss_delta_mb"] = round(rec["peak_rss_mb"] - base, 2)
        conn.send(rec)
    except BaseException as e:  # noqa: BLE001 - report anything, then exit
        import traceback

        conn.send({"status": "error", "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc(limit=8)})
    finally:
        conn.close()


# Flink starts a JVM (py4j gateway) and runs two empty jobs before the timed one (cold and warm,
# see ivm_layer/bench/peers.py): ~10-30 s that are not stream processing. They are added to its budget
# (the record's ``budget_s`` says how much it had in all).
STARTUP_ALLOWANCE_S = {"flink": 60.0}


def _tree_rss_mb(proc: psutil.Process) -> float:
    """RSS of the child and of its own children (Flink's JVM), in MB."""
    total = proc.memory_info().rss
    for kid in proc.children(recursive=True):
        try:
            total += kid.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def _kill_tree(p: Any) -> None:
    """Kill the child and every process it started (a JVM must not outlive a killed run)."""
    try:
        kids = psutil.Process(p.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    p.kill()
    for kid in kids:
        try:
            kid.kill()
        except psutil.Error:
            pass


def run_isolated(system: str, workload: str, n: int, seed: int, cfg: dict, budget: float,
                 mem_cap_mb: float) -> dict:
    """Run ``system`` on the (workload, n, seed) stream in a child; always returns a record.
    The RSS polled against ``mem_cap_mb`` includes the child's own children (Flink's JVM)."""
    budget += STARTUP_ALLOWANCE_S.get(system, 0.0)
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    done = ctx.Value("q", 0, lock=False)
    secs = ctx.Value("d", 0.0, lock=False)
    p = ctx.Process(target=_child, args=(send, system, workload, n, seed, cfg, done, secs), daemon=True)
    p.start()  # (the first call also starts the fork server: not part of the budget)
    t0 = time.perf_counter()
    send.close()
    rec = None
    why = None
    seen_rss = 0.0
    try:
        proc = psutil.Process(p.pid)
    except psutil.Error:
        proc = None
    while True:
        left = t0 + budget - time.perf_counter()
        if left <= 0:
            why = "timeout"
            break
        if recv.poll(min(left, 0.2)):
            try:
                rec = recv.recv()
            except EOFError:
                rec = None
            break
        if not p.is_alive():
            if recv.poll(0):
                rec = recv.recv()
            break
        if proc is not None:
            try:
                seen_rss = max(seen_rss, _tree_rss_mb(proc))
            except psutil.Error:
                pass
            if seen_rss > mem_cap_mb:
                why = "memory"
                break
    wall = time.perf_counter() - t0
    if rec is None:
        if p.is_alive():
            _kill_tree(p)
        p.join(5)
        rec = {"updates": done.value, "partial_s": round(secs.value, 3)}
        if done.value and secs.value > 0:
            rec["partial_us_per_update"] = round(secs.value / done.value * 1e6, 3)
        if why == "timeout":
            rec.update(status="timeout", reason=f"killed at the {budget:g}s budget after "
                                                f"{done.value:,}/{n:,} updates")
        elif why == "memory":
            rec.update(status="memory cap", reason=f"killed: RSS above {mem_cap_mb:g} MB after "
                                                   f"{done.value:,}/{n:,} updates")
            rec["peak_rss_mb_at_least"] = round(seen_rss, 1)
        else:
            rec.update(status="error", error=f"child died (exit code {p.exitcode}) after "
                                             f"{done.value:,} updates")
    else:
        p.join(5)
        if p.is_alive():
            _kill_tree(p)
            p.join(5)
    recv.close()
    if system in STARTUP_ALLOWANCE_S:
        rec["budget_s"] = budget
    rec["wall_s"] = round(wall, 3)
    rec["parent_seen_rss_mb"] = round(seen_rss, 1) if seen_rss else None
    return rec
