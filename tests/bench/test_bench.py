"""The benchmark itself: deterministic streams of the promised shape, every system computing the
same view on small instances (the benchmark's correctness cross-check), runs that are killed at
their budget. No timing is asserted."""

from __future__ import annotations

import collections
import random

import pytest

from ivm_layer.bench import peers, streams, systems, tpch
from ivm_layer.bench import workloads as wl
from ivm_layer.bench.isolate import run_isolated

CFG = {"enum_cap": 10_000, "fingerprint_cap": 100_000, "naive_max_rows": 1_000_000, "batch": 25,
       "duckdb_threads": 1}


def _small(w: wl.Workload) -> int:
    return 500 if w.family in ("tpch", "aggregates") else 72


@pytest.mark.parametrize("name", wl.names())
def test_streams_are_deterministic_and_well_formed(name):
    w = wl.get(name)
    n = _small(w)
    a, b, c = w.stream(n, 7), w.stream(n, 7), w.stream(n, 8)
    assert a == b
    assert a != c
    assert len(a) >= n * 0.9
    for t, row, k in a:
        assert t in w.schema and len(row) == len(w.schema[t]) and k in (1, -1)


def test_temporal_streams_increase_on_inequality_attributes():
    for w in wl.WORKLOADS.values():
        if w.order != "temporal" or w.family != "paper":
            continue
        q3 = w.name.startswith("Q3-")
        last: dict = {}
        for t, row, _ in w.stream(150, 3):
            cols = [0, 1] if (q3 and t == "S") else [0]
            for p in cols:
                assert row[p] > last.get((t, p), 0), (w.name, t, p)
                last[(t, p)] = row[p]
    ts = [row[2] for _, row, _ in wl.get("fraud-temporal").stream(300, 3)]
    assert ts == sorted(ts)


def test_mixed_streams_delete_only_present_rows():
    for w in wl.WORKLOADS.values():
        if w.order != "mixed":
            continue
        present = collections.Counter()
        deletes = 0
        stream = w.stream(400, 5)
        for t, row, k in stream:
            if k < 0:
                assert present[(t, row)] > 0, (w.name, row)
                deletes += 1
            present[(t, row)] += k
        assert 0.15 < deletes / len(stream) < 0.35, w.name


def test_tpch_stream_has_the_key_structure():
    stream = tpch.generator(["customer", "orders", "lineitem", "nation"])(3000, random.Random(1))
    by = collections.defaultdict(list)
    for t, row, _ in stream:
        by[t].append(row)
    cust = {r[0] for r in by["customer"]}
    orders = {r[0] for r in by["orders"]}
    assert len(by["nation"]) == 25
    assert all(r[1] in cust for r in by["orders"])
    assert all(r[0] in orders for r in by["lineitem"])
    assert 2 < len(by["lineitem"]) / len(by["orders"]) < 6
    assert len(by["lineitem"]) > len(by["orders"]) > len(by["customer"])


@pytest.mark.parametrize("name", wl.names())
def test_every_system_computes_the_same_view(name):
    w = wl.get(name)
    stream = w.stream(_small(w), 11)
    recs = {s: systems.run(s, w, stream, CFG) for s in ("ivm-pull", "ivm-push", "duckdb", "naive")}
    for s, r in recs.items():
        assert r["status"] in ("ok", "skipped"), (s, r.get("error"), r.get("traceback"))
    assert recs["duckdb"]["status"] == "ok"
    if w.requires == "aggregates" and not systems.aggregates_supported()[0]:
        assert recs["ivm-pull"] == {"status": "skipped", "reason": "aggregates not supported by this engine build"}
    else:
        assert recs["ivm-pull"]["status"] == recs["ivm-push"]["status"] == "ok"
        assert recs["ivm-push"]["deltas_sum_to_view"] in (True, None)
        assert recs["ivm-pull"]["state"]["stored_tuples"] > 0
    ok = {s: r for s, r in recs.items() if r["status"] == "ok"}
    assert len(ok) >= (2 if w.requires else 4)
    sizes = {s: r["view_size"] for s, r in ok.items()}
    prints = {s: r["fingerprint"] for s, r in ok.items()}
    assert len(set(sizes.values())) == 1, sizes
    assert len(set(prints.values())) == 1 and None not in prints.values(), prints
    for r in ok.values():
        assert r["n"] == len(stream) and r["updates"] == len(stream)


def test_a_run_over_budget_is_killed_and_recorded_as_timeout():
    rec = run_isolated("naive", "Q4", 30_000, 42, CFG, budget=1.5, mem_cap_mb=4096)
    assert rec["status"] == "timeout"
    assert rec["updates"] < 30_000
    assert "budget" in rec["reason"]


def test_a_run_in_a_child_reports_memory_and_its_view():
    rec = run_isolated("ivm-pull", "Q2", 400, 42, CFG, budget=60, mem_cap_mb=4096)
    assert rec["status"] == "ok", rec
    assert rec["peak_rss_mb"] >= rec["rss_baseline_mb"] > 0
    direct = systems.run("ivm-pull", wl.get("Q2"), wl.get("Q2").stream(400, 42), CFG)
    assert rec["view_size"] == direct["view_size"] and rec["fingerprint"] == direct["fingerprint"]


def _peer_installed(peer: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(systems.PEERS[peer][0]) is not None


@pytest.mark.parametrize("peer", list(systems.PEERS))
def test_peers_are_reported_not_faked(peer):
    rec = systems.run(peer, wl.get("AQ3"), [], CFG)
    assert rec["status"] == "skipped"
    if not _peer_installed(peer):
        assert rec["reason"] == f"not installed ({systems.PEERS[peer][1]})"
        assert systems.run(peer, wl.get("Q1"), wl.get("Q1").stream(20, 1), CFG)["status"] == "skipped"
    else:  # installed: grouped aggregates are the part the runners do not translate
        assert "GROUP BY" in rec["reason"]


def test_peer_translation_of_the_workloads():
    """The SQL → (atoms, join equalities, filters, output) reduction the peer runners build on;
    pure Python (sqlglot), so it runs without the peers installed."""
    spec = peers.join_spec(wl.get("fraud"))
    assert spec.atoms == [("S1", "trans"), ("S2", "trans"), ("L", "trans")]
    assert spec.equalities == [(("S1", "acc"), ("S2", "acc")), (("S2", "acc"), ("L", "acc"))]
    assert sorted(f.sql() for f in spec.filters) == sorted(
        ["S1.ts < S2.ts", "S2.ts < L.ts", "L.ts < S1.ts + 3600", "S1.amnt < 100", "S2.amnt < 100", "L.amnt > 400"])
    assert spec.output == [(a, c) for a in ("S1", "S2", "L") for c in ("id", "acc", "ts", "amnt")]
    q7 = peers.join_spec(wl.get("Q7"))
    assert q7.output == [("R", "a"), ("R", "b"), ("S", "d"), ("S", "e"), ("S", "f"), ("T", "g"), ("T", "h")]
    assert q7.equalities == [] and len(q7.filters) == 2
    fq1 = peers.join_spec(wl.get("FQ1"))  # unqualified columns are resolved through the schema
    assert fq1.equalities == [(("customer", "c_custkey"), ("orders", "o_custkey")),
                              (("lineitem", "l_orderkey"), ("orders", "o_orderkey"))]
    sql = peers.flink_sql(peers.join_spec(wl.get("Q2")))
    assert sql == ("SELECT `R`.`a` AS `o0`, `R`.`b` AS `o1`, `R`.`c` AS `o2`, `R`.`k` AS `o3`, `S`.`d` AS `o4`, "
                   "`S`.`e` AS `o5`, `S`.`f` AS `o6`, `S`.`k` AS `o7` FROM `R` AS `R`, `S` AS `S` "
                   "WHERE `R`.`k` = `S`.`k` AND `R`.`a` < `S`.`d`")
    with pytest.raises(peers.PeerUnsupported, match="GROUP"):
        peers.join_spec(wl.get("AQ18"))


# a pure inequality join (a cross join for the peers), deletes, a self-join with a column named
# ``id`` and an arithmetic filter, a 6-way join with a table used twice
PEER_WORKLOADS = ("Q1", "Q2-mixed", "fraud", "FQ4")


@pytest.mark.parametrize("peer", list(systems.PEERS))
def test_installed_peer_computes_the_engines_view(peer):
    """Runs only where the peer is installed (e.g. a separate venv, see ivm_layer/bench/README.md); there
    a peer that errors or disagrees with the engine fails the test."""
    if not _peer_installed(peer):
        pytest.skip(f"{peer} is not installed ({systems.PEERS[peer][1]}): optional peer, nothing to compare")
    for name in PEER_WORKLOADS:
        w = wl.get(name)
        stream = w.stream(_small(w) if w.family != "fraud" else 300, 11)
        ref = systems.run("ivm-pull", w, stream, CFG)
        got = systems.run(peer, w, stream, CFG)
        assert got["status"] == "ok", (peer, name, got.get("reason"), got.get("error"), got.get("traceback"))
        assert ref["view_size"] > 0, name  # a comparison of two empty views would prove nothing
        assert (got["view_size"], got["fingerprint"]) == (ref["view_size"], ref["fingerprint"]), (peer, name)
        assert got["updates"] == len(stream) and got["output_changes"] >= got["distinct_rows"]


def test_selection_by_family_and_query():
    assert {w.name for w in wl.select(["Q4*"])} == {"Q4", "Q4-temporal", "Q4-mixed"}
    assert {w.family for w in wl.select(["tpch"])} == {"tpch"}
    assert len(wl.select([])) == len(wl.WORKLOADS)
    with pytest.raises(KeyError):
        wl.select(["Q99"])
    assert streams.K_RANGE == 200  # the paper's equality-attribute domain


def test_readme_section_compares_the_engine_with_duckdb():
    """µs per update of ivm-pull vs DuckDB and the ratio; a DuckDB timeout is a lower bound."""
    from ivm_layer.bench import report

    def rec(w, system, status, **kw):
        return dict(workload=w, family="paper", system=system, n_requested=1000, status=status, **kw)

    lines = report._vs_duckdb({"results": [
        rec("Q1", "ivm-pull", "ok", us_per_update=10.0), rec("Q1", "duckdb", "ok", us_per_update=250.0),
        rec("Q5", "ivm-pull", "ok", us_per_update=100.0),
        rec("Q5", "duckdb", "timeout", updates=400, partial_us_per_update=5000.0)]})
    assert "| Q1 | 1,000 | 10.0 | 250.0 | ×25.0 |" in lines
    assert any(ln.startswith("| Q5 |") and "≥ ×50.0" in ln and "timeout after 400 updates" in ln for ln in lines)
    one = report._vs_duckdb({"config": {"batch": 100, "engine_batch": 1}, "results": [
        rec("Q1", "ivm-pull", "ok", us_per_update=10.0), rec("Q1", "duckdb", "ok", us_per_update=250.0)]})
    assert one[0].startswith("Engine (ivm-pull) one update at a time") and "every 100 updates" in one[0]


def test_pull_mode_in_batches_equals_one_at_a_time():
    w = wl.get("Q2-mixed")
    stream = w.stream(300)
    a = systems.run("ivm-pull", w, stream, dict(CFG, batch=1))
    b = systems.run("ivm-pull", w, stream, dict(CFG, batch=50))
    c = systems.run("ivm-pull", w, stream, dict(CFG, batch=50, engine_batch=1))  # --engine-batch 1
    assert a["status"] == b["status"] == c["status"] == "ok" and "batches of 50" in b["mode"]
    assert c["batch"] == 1 and "one update at a time" in c["mode"]
    assert (c["view_size"], c["fingerprint"]) == (a["view_size"], a["fingerprint"])
    assert a["fingerprint"] is not None and (a["view_size"], a["fingerprint"]) == (b["view_size"], b["fingerprint"])


def test_pull_mode_reports_the_median_of_rounds_without_the_first_touch():
    """ivm bench's ivm-pull: several rounds on fresh views (the same view each time), the
    steady-state median, and each table's first update (code generation) timed apart."""
    w = wl.get("Q2")
    stream = w.stream(200)
    one = systems.run("ivm-pull", w, stream, dict(CFG, engine_batch=1))
    many = systems.run("ivm-pull", w, stream, dict(CFG, engine_batch=1, min_rounds=3, budget_s=60))
    assert one["rounds"] == 1 and many["rounds"] >= 3
    assert len(many["us_per_update_rounds"]) == many["rounds"]
    assert many["us_per_update"] == sorted(many["us_per_update_rounds"])[many["rounds"] // 2]
    assert (many["view_size"], many["fingerprint"]) == (one["view_size"], one["fingerprint"])
    assert many["updates"] == len(stream) and 0 < many["first_updates_s"] < many["stream_s"]
    assert systems._first_touches(stream) == sorted({t: i for i, (t, _, _) in reversed(list(enumerate(stream)))}.values())


def test_a_baseline_checkout_measures_its_own_engine(tmp_path):
    """--baseline DIR: the baseline's lazily loaded names (compile_view) come from DIR's copy,
    not from this checkout (which made ivm-base silently measure the current engine)."""
    import os
    import shutil
    import sys

    import ivm_layer
    from ivm_layer.bench.floor import load_engine

    src = os.path.dirname(ivm_layer.__file__)
    shutil.copytree(src, tmp_path / "ivm_layer", ignore=shutil.ignore_patterns("__pycache__"))
    name = "ivm_baseline_under_test"
    try:
        mod = load_engine(str(tmp_path), name)
        fn = mod.compile_view
        assert sys.modules[fn.__module__].__file__.startswith(str(tmp_path / "ivm_layer"))
        assert fn is not ivm_layer.compile_view
        v = fn("SELECT r.a, s.c FROM r JOIN s ON r.b = s.b", {"r": ["a", "b"], "s": ["b", "c"]})
        v.insert("r", (1, 2))
        v.insert("s", (2, 3))
        assert type(v).__module__.startswith(name + ".") and list(v.rows()) == [((1, 3), 1)]
    finally:
        for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[m]
