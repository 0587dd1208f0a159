"""The daemon's engine state and checkpoint (not a test): for N base rows (``--rows``, default
1M) of a 2-table join view, the state's memory (tracemalloc), the snapshot's write time, size
and decode rate, the engine load, and recovery (snapshot + a log of ``--batches`` batches of
``--batch-rows`` changes). Times are CPU seconds of this process (steadier than wall time on
a shared machine; the work is single-threaded). Prints JSON.

    .venv/bin/python ivm_layer/bench/daemon_state.py [--rows 1000000] [--batches 100] [--batch-rows 100]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sys
import tempfile
import time
import tracemalloc

from ..daemon.state import EngineState, ViewDef, open_checkpoint

SCHEMA = {"o": {"id": "integer", "cid": "integer", "note": "text"}, "c": {"cid": "integer", "name": "text"}}
VIEW = ViewDef("oc", "SELECT o.id, o.note, c.name FROM o JOIN c ON o.cid = c.cid", False, ["o", "c"])


def _decode_rate(data: bytes) -> float:
    """Rows per second decoding a dump() (the format alone, no engine). The pickle branch
    times versions before the typed-JSON checkpoint, on the dump this process just made."""
    best = None
    for _ in range(3):
        t = time.process_time()
        if data.startswith(b"\x80"):
            import pickle

            n = sum(len(r) for r in pickle.loads(data).values())
        else:
            from ..maintain import checkpoint as ckpt

            lines = [line for line in data.decode().split("\n") if line]
            _, n = ckpt.read_snapshot_lines(lines[1:], json.loads(lines[0])["tables"])
        dt = time.process_time() - t
        best = dt if best is None else min(best, dt)
    return n / best


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--batch-rows", type=int, default=100)
    args = ap.parse_args(argv)
    n, nc = args.rows, args.rows // 10
    out: dict = {"rows": n, "view": VIEW.select_sql}
    gc.collect()
    tracemalloc.start()     # before the rows exist: the state's memory includes the row tuples
    rows = {"c": {(i, f"cust{i}"): 1 for i in range(nc)},
            "o": {(i, i % nc, f"n{i % 977}"): 1 for i in range(n - nc)}}
    st = EngineState([VIEW], SCHEMA)
    st.apply(rows)
    del rows
    gc.collect()
    out["state_mib"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
    tracemalloc.stop()
    d = tempfile.mkdtemp(prefix="ivm-daemon-state-")
    try:
        store = open_checkpoint(os.path.join(d, "engine"), [VIEW])
        t = time.process_time()
        store.write_snapshot({"batch": 0}, st.base, 0)
        out["snapshot_write_cpu_s"] = round(time.process_time() - t, 3)
        out["snapshot_mib"] = round(sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d)
                                        for f in fs) / 2**20, 1)
        data = st.dump()
        out["decode_rows_per_s"] = round(_decode_rate(data))
        t = time.process_time()
        EngineState([VIEW], SCHEMA).load(data)
        out["load_into_engine_cpu_s"] = round(time.process_time() - t, 3)
        rnd = random.Random(1)
        for b in range(1, args.batches + 1):
            ch = {"o": {(n + b * args.batch_rows + j, rnd.randrange(nc), "new"): 1 for j in range(args.batch_rows)}}
            st.apply(ch)
            store.append(b, ch)
        del data
        gc.collect()
        t = time.process_time()
        fresh = EngineState([VIEW], SCHEMA)
        last, _ = fresh.recover(open_checkpoint(os.path.join(d, "engine"), [VIEW]))
        out["recover_cpu_s"] = round(time.process_time() - t, 3)
        del fresh
        gc.collect()
        tracemalloc.start()
        fresh = EngineState([VIEW], SCHEMA)
        fresh.recover(open_checkpoint(os.path.join(d, "engine"), [VIEW]))
        gc.collect()
        now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["recovered_state_mib"], out["recover_peak_mib"] = round(now / 2**20, 1), round(peak / 2**20, 1)
        assert last == args.batches and len(fresh.views["oc"]) == len(st.views["oc"])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=1))
