"""``python -m ivm_layer.bench.memory``: what a view's state costs in bytes, per base row and per index entry.

    python -m ivm_layer.bench.memory                       # Q2, fraud, FQ1, FQ2 at their default sizes
    python -m ivm_layer.bench.memory Q2 fraud --n 20000 --baseline DIR

For each workload the stream's rows are built first; then the view is compiled and fed the
stream one update at a time while ``tracemalloc`` counts the Python heap the engine holds
afterwards (the rows' own tuples are the caller's and are not counted, except where the
engine copies them). Printed: bytes in all, bytes per base row (the rows the view keeps),
bytes per index entry (``view.stats()['index_entries']``) and the ``stats()`` counts.
``--baseline DIR`` measures an older checkout's engine on the same stream, in the same process.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tracemalloc

from . import workloads as wl

DEFAULT = ["Q2", "fraud", "FQ1", "FQ2"]


def measure(mod, w, stream) -> dict:
    warm = mod.compile_view(w.sql, w.schema)  # imports and generated code paid before counting
    for t, row, k in stream[:50]:
        (warm.insert if k > 0 else warm.delete)(t, row)
    del warm
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    view = mod.compile_view(w.sql, w.schema)
    ins, dele = view.insert, view.delete
    for t, row, k in stream:
        if k > 0:
            ins(t, row)
        else:
            dele(t, row)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    st = view.stats()
    base, idx = st["base_rows"], st["index_entries"] + st.get("core_entries", 0)
    return {"bytes": held, "base_rows": base, "index_entries": idx,
            "bytes_per_base_row": round(held / base, 1) if base else None,
            "bytes_per_index_entry": round(held / idx, 1) if idx else None, "stats": st,
            "view_size": len(view)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*", default=DEFAULT)
    p.add_argument("--n", type=int, default=20_000, help="stream size (default 20,000; the paper's for Q1-Q12)")
    p.add_argument("--baseline", help="a checkout of an older ivm-layer to measure beside this one")
    a = p.parse_args(argv)
    import ivm_layer

    engines = [("engine", ivm_layer)]
    if a.baseline:
        from .floor import load_engine

        engines.append(("baseline", load_engine(a.baseline)))
    print(f"{'workload':<12} {'engine':<9} {'base rows':>9} {'entries':>9} {'MB':>7} {'B/base row':>10} "
          f"{'B/entry':>8}")
    for name in a.workloads:
        w = wl.get(name)
        stream = w.stream(w.paper_size or a.n)
        for label, mod in engines:
            r = measure(mod, w, stream)
            print(f"{name:<12} {label:<9} {r['base_rows']:>9,} {r['index_entries']:>9,} "
                  f"{r['bytes'] / 2**20:>7.1f} {r['bytes_per_base_row']!s:>10} {r['bytes_per_index_entry']!s:>8}",
                  flush=True)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
