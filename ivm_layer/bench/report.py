"""Markdown summaries, PNG plots and the results section of docs/benchmarks.md, from a run's results.json.

    python -m ivm_layer.bench.report [RUN_DIR]          # print the summary of a run (default: newest)
    python -m ivm_layer.bench.report [RUN_DIR] --docs   # rewrite docs/benchmarks.md between the bench-results markers

The section is generated only from a real run's ``results.json``; nothing is typed in by hand.
Only the text between ``<!-- bench-results:start -->`` and ``<!-- bench-results:end -->`` is
replaced. ``--docs FILE`` rewrites another file with those markers; ``--readme`` is the old
name of ``--docs`` (the section moved from README.md to docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

START = "<!-- bench-results:start -->"
END = "<!-- bench-results:end -->"
DOCS_PAGE = "docs/benchmarks.md"
SYSTEM_ORDER = ["ivm-pull", "ivm-base", "ivm-push", "duckdb", "naive", "pathway", "flink"]


# ----------------------------------------------------------------------------- formatting
def save_json(doc: dict, path: str, echo: bool = True) -> None:
    """Write a bench's JSON document to ``path`` (its folder made if needed) and, with ``echo``,
    print it too: what every ``python -m ivm_layer.bench.X`` ends with."""
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=2))
    if echo:
        print(json.dumps(doc, indent=2))


def _num(v, nd: int = 0) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if nd and abs(v) < 100:
            return f"{v:,.{nd}f}"
        return f"{v:,.0f}"
    return f"{v:,}"


def _status(r: dict) -> str:
    s = r["status"]
    if s == "ok":
        return "ok"
    why = (r.get("reason") or r.get("error") or "").replace("|", "/")
    why = why.splitlines()[0][:80] if why else ""
    return f"{s}: {why}" if why else s


def _by(results: list[dict]) -> dict:
    return {(r["workload"], r["n_requested"], r["system"]): r for r in results}


def _systems(doc: dict) -> list[str]:
    present = {r["system"] for r in doc["results"]}
    return [s for s in SYSTEM_ORDER if s in present] + sorted(present - set(SYSTEM_ORDER))


def _header(doc: dict) -> list[str]:
    m, c = doc["machine"], doc["config"]
    cpu = m.get("cpu_model") or m.get("machine")
    cut = " **Interrupted before the end: only the runs listed were measured.**" if doc.get("interrupted") else ""
    return [f"Run of {doc['created']} (`{c.get('command', 'ivm bench')}`), {doc['total_s']:.0f} s in all.{cut} "
            f"Machine: {cpu}, {m.get('cpu_count')} CPUs, {m.get('mem_total_mb', '?')} MB RAM, "
            f"{m.get('platform')}, Python {m.get('python')}, DuckDB {m.get('duckdb')}. "
            f"Seed {c['seed']}; budget {c['budget_s']:g} s per system and run; DuckDB recomputes "
            f"after every {c['batch']} updates with {c.get('duckdb_threads') or 'default'} thread(s); "
            f"the engine applies {_engine_batch(c)} (ivm-pull/ivm-base µs/update: CPU time, the median of "
            f"{_rounds(doc)} rounds on fresh views{_passes(doc)}, steady state: without each table's first "
            f"update, where the view generates its update code); enumeration capped at {c['enum_cap']:,} pairs."
            + _load(m)]


def _passes(doc: dict) -> str:
    ns = sorted({r["passes"] for r in doc.get("results", []) if r.get("passes")})
    if not ns:
        return ""
    return (f", ivm-pull and ivm-base in {ns[-1]} alternating passes, each in its own child process, "
            "so that a busy or a quiet spell of the machine falls on both")


def _rounds(doc: dict) -> str:
    ns = sorted({r["rounds"] for r in doc.get("results", []) if r.get("rounds")})
    if not ns:
        return "1"
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"


def _engine_batch(c: dict) -> str:
    eb = c.get("engine_batch") or c["batch"]
    return "one update at a time" if eb == 1 else f"batches of {eb} updates"


def _load(m: dict) -> str:
    if m.get("load_avg_end") is None:
        return ""
    hi = max(m["load_avg_start"], m["load_avg_end"])
    busy = (" — above the CPU count: other processes competed for the CPUs, so timings are noisy"
            if hi > (m.get("cpu_count") or 1) else "")
    return f" Load average (1 min): {m['load_avg_start']:.1f} at the start, {m['load_avg_end']:.1f} at the end{busy}."


def _main_table(doc: dict) -> list[str]:
    L = ["| workload | N | system | status | upd/s | µs/upd | enum tup/s | list ÷ enum | view size | "
         "stored tuples | peak RSS MB (Δ) | agree |",
         "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in doc["results"]:
        e = r.get("enum") or {}
        us = r.get("us_per_update")
        us_s = _num(us, 1) if us is not None else (
            f"({_num(r['partial_us_per_update'], 1)})" if r.get("partial_us_per_update") else "–")
        ets = _num(e.get("tuples_per_s")) + ("*" if e.get("truncated") else "")
        rss = "–"
        if r.get("peak_rss_mb") is not None:
            rss = f"{r['peak_rss_mb']:.1f} ({r.get('rss_delta_mb', 0):+.1f})"
        stored = (r.get("state") or {}).get("stored_tuples")
        agree = {True: "yes", False: "**NO**", None: ""}[r.get("agrees")]
        L.append(f"| {r['workload']} | {r['n_requested']:,} | {r['system']} | {_status(r)} | "
                 f"{_num(r.get('updates_per_s'))} | {us_s} | {ets} | {_num(e.get('list_speedup'), 2)} | "
                 f"{_num(r.get('view_size'))} | {_num(stored)} | {rss} | {agree} |")
    L.append("")
    L.append("µs/upd in parentheses: the part of the stream done before the run was killed. `*`: "
             "enumeration stopped at the cap. list ÷ enum: how many times faster iterating a "
             "Python list of the same (row, k) pairs is than enumerating the view. Δ: peak RSS "
             "minus the child's RSS before the system started (stream already built). stored "
             "tuples: the engine's own accounting (base rows + index entries + materialized rows); "
             "naive: base rows + materialized result rows.")
    return L


def _scaling(doc: dict) -> list[str]:
    rows = [r for r in doc["results"] if r["family"] == "scaling"]
    if not rows:
        return []
    sizes = sorted({r["n_requested"] for r in rows})
    by = _by(rows)
    L = ["| workload | system | " + " | ".join(f"µs/upd @ {n:,}" for n in sizes) + " | growth |",
         "|---|---|" + "---:|" * len(sizes) + "---:|"]
    for w in sorted({r["workload"] for r in rows}):
        for s in _systems(doc):
            cells, vals = [], []
            for n in sizes:
                r = by.get((w, n, s))
                if r is None:
                    cells.append("–")
                    continue
                if r.get("us_per_update") is not None:
                    cells.append(_num(r["us_per_update"], 1))
                    vals.append(r["us_per_update"])
                elif r.get("partial_us_per_update"):
                    cells.append(f"({_num(r['partial_us_per_update'], 1)}) {r['status']}")
                else:
                    cells.append(r["status"])
            if all(c == "skipped" for c in cells):
                continue
            growth = f"×{vals[-1] / vals[0]:.1f}" if len(vals) >= 2 and vals[0] else "–"
            L.append(f"| {w} | {s} | " + " | ".join(cells) + f" | {growth} |")
    L.append("")
    L.append("growth: per-update cost at the largest finished size ÷ at the smallest (1.0 = flat).")
    return L


def _enumeration(doc: dict) -> list[str]:
    rows = [r for r in doc["results"] if r["system"] == "ivm-pull" and (r.get("enum") or {}).get("tuples")]
    if not rows:
        return []
    ratios = sorted(r["enum"]["list_speedup"] for r in rows if r["enum"].get("list_speedup"))
    med = ratios[len(ratios) // 2] if ratios else None
    L = [f"Enumeration of the full result from the T-representation (ivm-pull) vs iterating a Python "
         f"list of the same (row, k) pairs, over {len(rows)} runs with a non-empty result: the list "
         f"is {_num(med, 2)}× faster at the median (min {_num(ratios[0], 2) if ratios else '–'}, "
         f"max {_num(ratios[-1], 2) if ratios else '–'})."]
    best = sorted(rows, key=lambda r: -r["enum"]["tuples"])[:6]
    L += ["", "| workload | N | pairs enumerated | view tuples/s | list tuples/s | list ÷ enum |",
          "|---|---:|---:|---:|---:|---:|"]
    for r in best:
        e = r["enum"]
        L.append(f"| {r['workload']} | {r['n_requested']:,} | {e['tuples']:,}{'*' if e['truncated'] else ''} | "
                 f"{_num(e['tuples_per_s'])} | {_num(e.get('list_tuples_per_s'))} | {_num(e.get('list_speedup'), 2)} |")
    return L


def _checks(doc: dict) -> list[str]:
    bad = [c for c in doc["checks"] if not c["agree"]]
    multi = [c for c in doc["checks"] if c["systems"] > 1]
    if bad:
        return ["**Systems disagree:** " + "; ".join(
            f"{c['workload']} N={c['n']:,}: {c['view_size']}" for c in bad)]
    return [f"Cross-check: on all {len(multi)} (workload, N) results computed by two or more systems, "
            f"every system that finished reports the same final view size and the same fingerprint "
            f"of the whole result bag (where it was small enough to hash)."]


def _skips(doc: dict) -> list[str]:
    seen, L = set(), []
    for r in doc["results"]:
        if r["status"] == "skipped" and (r["system"], r.get("reason")) not in seen:
            seen.add((r["system"], r.get("reason")))
            n = sum(1 for x in doc["results"] if x["system"] == r["system"] and x.get("reason") == r.get("reason"))
            L.append(f"- {r['system']}: skipped {n}× — {r.get('reason')}")
    return L


def markdown(doc: dict, pngs: list[str] | None = None, base: str | None = None) -> str:
    L = ["# ivm bench results", ""] + _header(doc) + ["", "## All runs", ""] + _main_table(doc)
    vb = _vs_baseline(doc)
    if vb:
        L += ["", "## Before / after", ""] + vb
    sc = _scaling(doc)
    if sc:
        L += ["", "## Scaling: per-update cost at 1×, 10×, 100× input", ""] + sc
    en = _enumeration(doc)
    if en:
        L += ["", "## Enumeration", ""] + en
    L += ["", "## Correctness cross-check", ""] + _checks(doc)
    sk = _skips(doc)
    if sk:
        L += ["", "## Skipped", ""] + sk
    if pngs:
        L += ["", "## Plots", ""]
        for p in pngs:
            rel = os.path.relpath(p, base) if base else p
            L.append(f"![{os.path.basename(p)}]({rel})")
    return "\n".join(L) + "\n"


def _vs_duckdb(doc: dict) -> list[str]:
    """Per workload: µs per update of the engine (ivm-pull) and of DuckDB recomputing, and their
    ratio. A DuckDB run killed at the budget gives a lower bound: its µs per update over the
    updates it finished (the first, cheapest part of the stream)."""
    by = _by(doc["results"])
    rows = []
    for w in dict.fromkeys(r["workload"] for r in doc["results"]):
        for n in dict.fromkeys(r["n_requested"] for r in doc["results"] if r["workload"] == w):
            e, d = by.get((w, n, "ivm-pull")), by.get((w, n, "duckdb"))
            if e is None or d is None or e["status"] != "ok" or not e.get("us_per_update"):
                continue
            eu = e["us_per_update"]
            if d["status"] == "ok" and d.get("us_per_update"):
                rows.append(f"| {w} | {n:,} | {eu:,.1f} | {d['us_per_update']:,.1f} | ×{d['us_per_update'] / eu:,.1f} |")
            elif d.get("partial_us_per_update") and d.get("updates"):
                du = d["partial_us_per_update"]
                rows.append(f"| {w} | {n:,} | {eu:,.1f} | ≥ {du:,.1f} ({d['status']} after {d['updates']:,} updates) "
                            f"| ≥ ×{du / eu:,.1f} |")
            else:
                rows.append(f"| {w} | {n:,} | {eu:,.1f} | {d['status']} | – |")
    if not rows:
        return []
    c = doc.get("config", {})
    batch = c.get("batch", "B")
    eb = c.get("engine_batch") or batch
    if eb == 1:
        how = (f"Engine (ivm-pull) one update at a time (`view.insert` / `view.delete`) vs DuckDB "
               f"recomputing the view after every {batch} updates; µs per update and the ratio "
               "(DuckDB stopped at the budget: its cost over the updates it finished, a lower bound).")
    else:
        how = (f"Engine (ivm-pull) vs DuckDB: ivm-pull applies each {eb} updates as one batch "
               f"(`view.apply`), DuckDB recomputes the view after every {batch}; µs per update and "
               "the ratio (DuckDB stopped at the budget: its cost over the updates it finished, a lower "
               "bound). One update at a time, the engine's single-tuple costs are those of "
               "`ivm bench --engine-batch 1`.")
    return ([how, "",
             "| workload | N | ivm-pull µs/update | duckdb µs/update | duckdb / ivm-pull |",
             "|---|---:|---:|---:|---:|"] + rows)


def _vs_baseline(doc: dict) -> list[str]:
    """Per workload: µs per update of this engine (ivm-pull) and of the baseline checkout's
    (ivm-base, ``--baseline``), from the same run, and the speed-up; enumeration likewise."""
    by = _by(doc["results"])
    rows = []
    for w in dict.fromkeys(r["workload"] for r in doc["results"]):
        for n in dict.fromkeys(r["n_requested"] for r in doc["results"] if r["workload"] == w):
            e, b = by.get((w, n, "ivm-pull")), by.get((w, n, "ivm-base"))
            if e is None or b is None or not e.get("us_per_update") or not b.get("us_per_update"):
                continue
            eu, bu = e["us_per_update"], b["us_per_update"]
            ee, be = (e.get("enum") or {}).get("tuples_per_s"), (b.get("enum") or {}).get("tuples_per_s")
            enum = f"×{ee / be:,.2f}" if ee and be else "–"
            rows.append(f"| {w} | {n:,} | {bu:,.1f} | {eu:,.1f} | ×{bu / eu:,.2f} | {enum} |")
    if not rows:
        return []
    base = (doc.get("config") or {}).get("baseline") or "the baseline checkout"
    return [f"Before/after in this run: ivm-base is the same runner with the engine of `{base}`; µs per "
            "update, the speed-up, and the speed-up of full enumeration (`rows()`, tuples per second).", "",
            "| workload | N | before (ivm-base) µs/update | after (ivm-pull) µs/update | speed-up | enumeration |",
            "|---|---:|---:|---:|---:|---:|"] + rows


def results_section(doc: dict) -> str:
    """The compact section for docs/benchmarks.md: per workload and system, updates/s and memory."""
    syss = [s for s in _systems(doc) if any(r["system"] == s and r["status"] != "skipped" for r in doc["results"])]
    by = _by(doc["results"])
    fam_sizes: dict[str, set] = {}
    for r in doc["results"]:
        fam_sizes.setdefault(r["family"], set()).add(r["n_requested"])
    sizes = "; ".join(f"{f}: N = {', '.join(f'{n:,}' for n in sorted(v))}" for f, v in fam_sizes.items())
    L = ["", "Generated by `python -m ivm_layer.bench.report --docs` from the run described here (do not edit "
             "by hand).", ""] + _header(doc) + ["", f"Stream sizes — {sizes}.", ""]
    L.append("Updates per second (higher is better) and, in parentheses, the peak-RSS growth in MB "
             "of the child process running the system; `timeout` = killed at the budget.")
    L.append("")
    L.append("| workload | N | " + " | ".join(syss) + " | view size | agree |")
    L.append("|---|---:|" + "---:|" * len(syss) + "---:|---|")
    for w in dict.fromkeys(r["workload"] for r in doc["results"]):
        for n in dict.fromkeys(r["n_requested"] for r in doc["results"] if r["workload"] == w):
            cells, size, agree = [], None, None
            for s in syss:
                r = by.get((w, n, s))
                if r is None:
                    cells.append("–")
                elif r["status"] == "ok":
                    mem = f" ({r['rss_delta_mb']:+.1f})" if r.get("rss_delta_mb") is not None else ""
                    cells.append(f"{_num(r.get('updates_per_s'))}{mem}")
                    size = r.get("view_size") if size is None else size
                    agree = r.get("agrees") if agree is None else agree
                else:
                    cells.append(r["status"] if r["status"] != "skipped" else "skipped")
            L.append(f"| {w} | {n:,} | " + " | ".join(cells) + f" | {_num(size)} | "
                     f"{ {True: 'yes', False: '**NO**', None: ''}[agree] } |")
    vs = _vs_duckdb(doc)
    if vs:
        L += [""] + vs
    vb = _vs_baseline(doc)
    if vb:
        L += [""] + vb
    sc = _scaling(doc)
    if sc:
        L += ["", "Scaling (µs per update; the same query on 1×, 10×, 100× input):", ""] + sc
    en = _enumeration(doc)
    if en:
        L += [""] + en[:1]
    L += [""] + _checks(doc)
    sk = _skips(doc)
    if sk:
        L += ["", "Skipped:", ""] + sk
    return "\n".join(L) + "\n"


def rewrite_section(path: str, section: str) -> None:
    """Replace the text between the bench-results markers of ``path`` (and nothing else)."""
    with open(path) as f:
        text = f.read()
    a, b = text.find(START), text.find(END)
    if a < 0 or b < 0 or b < a:
        raise SystemExit(f"{path}: markers {START} … {END} not found")
    with open(path, "w") as f:
        f.write(text[:a + len(START)] + "\n" + section.strip("\n") + "\n" + text[b:])


# ----------------------------------------------------------------------------- plots
def plots(doc: dict, outdir: str) -> list[str]:
    """PNG plots: per workload with several sizes, time (µs/update) and peak-RSS growth vs
    stream size, one line per system; plus an overview of updates/s at the smallest size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(outdir, exist_ok=True)
    out = []
    results = doc["results"]
    syss = _systems(doc)
    for w in dict.fromkeys(r["workload"] for r in results):
        rows = [r for r in results if r["workload"] == w]
        sizes = sorted({r["n_requested"] for r in rows})
        if len(sizes) < 2:
            continue
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        drawn = False
        for s in syss:
            pts = sorted((r["n_requested"], r["us_per_update"], r.get("rss_delta_mb"))
                         for r in rows if r["system"] == s and r.get("us_per_update"))
            if not pts:
                continue
            drawn = True
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
            mem = [(p[0], max(p[2], 0.01)) for p in pts if p[2] is not None]
            if mem:
                ax2.plot([p[0] for p in mem], [p[1] for p in mem], marker="o", label=s)
        if not drawn:
            plt.close(fig)
            continue
        for ax, title in ((ax1, "time per update (µs)"), (ax2, "peak RSS growth (MB)")):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("stream size (updates)")
            ax.set_title(f"{w}: {title}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(outdir, f"{w}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        out.append(path)
    # overview: updates/s per workload at its smallest size, one bar per system
    names = list(dict.fromkeys(r["workload"] for r in results))
    if names:
        first = {w: min(r["n_requested"] for r in results if r["workload"] == w) for w in names}
        by = _by(results)
        drawn = [s for s in syss if any((by.get((w, first[w], s)) or {}).get("updates_per_s") for w in names)]
        fig, ax = plt.subplots(figsize=(min(40, max(10, 0.3 * len(names) + 2)), 5.5))
        width = 0.8 / max(1, len(drawn))
        for j, s in enumerate(drawn):
            ys = [(by.get((w, first[w], s)) or {}).get("updates_per_s") or 0 for w in names]
            if not any(ys):
                continue
            ax.bar([i + j * width for i in range(len(names))], ys, width=width, label=s)
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels([f"{w}\n{first[w]:,}" for w in names], rotation=90, fontsize=7)
        ax.set_ylabel("updates per second")
        ax.set_title("throughput by workload (smallest size of each)")
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        fig.tight_layout()
        path = os.path.join(outdir, "overview-throughput.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        out.append(path)
    return out


# ----------------------------------------------------------------------------- CLI
def latest_run(root: str = "bench-results") -> str | None:
    runs = sorted(glob.glob(os.path.join(root, "run-*", "results.json")), key=os.path.getmtime)
    return os.path.dirname(runs[-1]) if runs else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", nargs="?", help="a run directory (default: newest under ./bench-results)")
    p.add_argument("--docs", "--readme", dest="docs", nargs="?", const=DOCS_PAGE,
                   help=f"rewrite the results section of this page (default {DOCS_PAGE}); "
                        "--readme is the old name of this option")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    run = a.run or latest_run()
    if not run or not os.path.exists(os.path.join(run, "results.json")):
        print("ivm_layer.bench.report: no run found; run `ivm bench --quick` first", file=sys.stderr)
        return 2
    with open(os.path.join(run, "results.json")) as f:
        doc = json.load(f)
    if a.docs:
        rewrite_section(a.docs, results_section(doc))
        print(f"rewrote the results section of {a.docs} from {run}")
    else:
        print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
