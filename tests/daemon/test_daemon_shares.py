"""The Shares/HyperCube routing planner without Spark: the share choice from table sizes, and
the routing being a partition of the join — every join result (identified by the row ids of
its inputs) is produced on exactly one shard, checked against DuckDB evaluating the join of
the whole tables and of each shard's tables, over random tables (NULLs, duplicates), random
size estimates (so that different plans are chosen) and 2–8 shards."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest

from ivm_layer.daemon.routing import ViewRouter, rewrite_per_atom
from ivm_layer.daemon.shares import choose_shares, describe, routed_rows
from ivm_layer.daemon.state import ViewDef
from ivm_layer.errors import IVMError

SCHEMA = {"r": {"a": "integer", "k": "integer"}, "s": {"k": "integer", "x": "integer"},
          "t": {"y": "integer", "tag": "text"}}
COLS = {"r": ("a", "k"), "s": ("k", "x"), "t": ("y", "tag")}
#: FROM clauses (aliases a0, a1, … in FROM order) and the atoms' tables
CASES = [
    ("r AS a0 JOIN s AS a1 ON a0.k = a1.k JOIN t AS a2 ON a1.x < a2.y", "rst"),
    ("r AS a0 JOIN r AS a1 ON a0.k = a1.k", "rr"),
    ("r AS a0 JOIN t AS a1 ON a0.a < a1.y", "rt"),
    ("r AS a0, s AS a1 WHERE a0.a < a1.x AND a0.k = 2", "rs"),
    ("r AS a0 JOIN s AS a1 ON a0.k = a1.k AND a0.a = a1.x", "rs"),
    ("r AS a0 JOIN s AS a1 ON a0.k = a1.k JOIN r AS a2 ON a2.a = a1.x", "rsr"),
    ("r AS a0 JOIN s AS a1 ON a0.k = a1.k JOIN t AS a2 ON a2.y = a1.x JOIN r AS a3 ON a3.a = a2.y", "rstr"),
]


def _value(rnd: random.Random, table: str, col: str):
    if col == "tag":
        return rnd.choice(["a", "b", None])
    return rnd.choice([None, *range(5)]) if rnd.random() < 0.9 else rnd.randint(0, 12)


def _tables(rnd: random.Random) -> dict[str, list[tuple]]:
    out = {}
    for t, cols in COLS.items():
        rows = [tuple(_value(rnd, t, c) for c in cols) for _ in range(rnd.randint(0, 14))]
        rows += rnd.sample(rows, min(len(rows), 2))   # duplicates
        out[t] = rows
    return out


def _join_ids(con, from_sql: str, n_atoms: int, tables: dict[str, dict[int, list]]) -> Counter:
    """The join's results as tuples of input row ids, DuckDB evaluating the FROM over the
    tables ``ivm_a<i>_<table>`` given as ``{atom table: {row id: row}}``."""
    for name, rows in tables.items():
        base = name.split("_", 2)[2]
        con.execute(f"CREATE OR REPLACE TABLE {name} (rid INTEGER, {', '.join(f'{c} ' + ('TEXT' if c == 'tag' else 'INTEGER') for c in COLS[base])})")
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * (1 + len(COLS[base])))})",
                            [(rid, *row) for rid, row in rows.items()])
    sql, _ = rewrite_per_atom(f"SELECT {', '.join(f'a{i}.rid' for i in range(n_atoms))} FROM {from_sql}")
    return Counter(con.execute(sql).fetchall())


@pytest.mark.parametrize("case", range(len(CASES)))
def test_routing_is_a_partition_of_the_join(case):
    """Every result of the join is produced on exactly one shard, and nothing else is."""
    from_sql, atoms = CASES[case]
    con = duckdb.connect()
    rnd = random.Random(case)
    for trial in range(6):
        data = _tables(rnd)
        ids = {t: dict(enumerate(rows)) for t, rows in data.items()}
        shards = rnd.choice([2, 3, 4, 6, 8])
        sizes = {t: rnd.choice([1, 20, 2000, 20000]) for t in COLS}
        view = ViewDef("v", f"SELECT a0.{COLS[atoms[0]][0]} FROM {from_sql}", True, sorted(set(atoms)))
        router = ViewRouter(view, SCHEMA, shards, sizes=sizes)
        whole = {f"ivm_a{i}_{t}": ids[t] for i, t in enumerate(atoms)}
        want = _join_ids(con, from_sql, len(atoms), whole)
        got: Counter = Counter()
        per_shard: list[dict[str, dict[int, tuple]]] = [{a: {} for a in whole} for _ in range(shards)]
        for t in sorted(set(atoms)):
            for rid, row in ids[t].items():
                for shard, atab in router.route(t, row):
                    assert rid not in per_shard[shard][atab], "a row routed twice to one shard"
                    per_shard[shard][atab][rid] = row
        for shard in range(shards):
            got.update(_join_ids(con, from_sql, len(atoms), per_shard[shard]))
        assert got == want, (trial, shards, router.shares)


def test_shares_for_the_three_way_view():
    """``r JOIN s ON r.k = s.k JOIN t ON s.x < t.y`` with the benchmark's sizes: r and s hashed
    on k, the 20-row t replicated; ≤ 1.25× the base rows routed at 4 shards."""
    r, s, t = frozenset({"r.a", "r.k"}), frozenset({"r.k", "s.x"}), frozenset({"t.y", "t.tag"})
    sizes = [20_000, 2_000, 20]
    for n in (2, 4, 8):
        shares = choose_shares([r, s, t], sizes, n)
        assert shares == {"r.k": n}
        assert routed_rows([r, s, t], sizes, shares, n) == 22_000 + 20 * n
    assert routed_rows([r, s, t], sizes, {"r.k": 4}, 4) <= 1.25 * sum(sizes)
    assert describe(["r", "s", "t"], [r, s, t], {"r.k": 4}, 4) == [
        "r: hashed on r.k (share 4), each row on one shard", "s: hashed on r.k (share 4), each row on one shard",
        "t: replicated to all 4 shards"]
    assert choose_shares([r, s, t], sizes, 1) == {}


def test_shares_for_inequality_only_joins():
    """No shared variable: one side is split by its rows and the other replicated when one is
    small; two large sides get the √N × √N grid (fewer rows routed than split + replicate)."""
    r, t = frozenset({"r.a"}), frozenset({"t.y"})
    assert choose_shares([r, t], [100_000, 10], 4) == {"#0": 4}
    assert choose_shares([r, t], [10, 100_000], 4) == {"#1": 4}
    assert choose_shares([r, t], [1000, 1000], 4) == {"#0": 2, "#1": 2}
    # a variable shared by all atoms beats splitting by rows
    a, b = frozenset({"v"}), frozenset({"v", "w"})
    assert choose_shares([a, b], [1000, 1000], 6) == {"v": 6}
    # two equality variables of a triangle-like chain share the shards
    x, y, z = frozenset({"p", "q"}), frozenset({"q", "u"}), frozenset({"u", "p"})
    got = choose_shares([x, y, z], [1000, 1000, 1000], 8)
    assert sorted(got.values()) == [2, 2, 2] and set(got) == {"p", "q", "u"}


def test_recorded_plan_is_used_and_checked(tmp_path):
    """The routing recorded with a checkpoint is reused whatever the sizes are now; a plan that
    does not fit is refused."""
    from ivm_layer.daemon.routingplan import load_or_choose, plan_path

    d = ViewDef("v", "SELECT r.a, t.y FROM r JOIN t ON r.a < t.y", True, ["r", "t"])
    calls = []

    def sizes(value):
        def f():
            calls.append(value)
            return value
        return f

    plans, _ = load_or_choose(str(tmp_path), [d], SCHEMA, 4, sizes({"r": 10, "t": 100_000}))
    assert plans == {"v": {"#1": 4}} and plan_path(str(tmp_path)).endswith("shards/routing.json")
    again, _ = load_or_choose(str(tmp_path), [d], SCHEMA, 4, sizes({"r": 100_000, "t": 10}))
    assert again == plans and calls == [{"r": 10, "t": 100_000}]   # sizes not read again
    with pytest.raises(IVMError, match="started with 4 shard"):
        load_or_choose(str(tmp_path), [d], SCHEMA, 2, sizes({}))
    with pytest.raises(IVMError, match="does not fit"):
        ViewRouter(d, SCHEMA, 4, shares={"#0": 2})
    old = tmp_path / "old"
    (old / "shards" / "v" / "0").mkdir(parents=True)
    with pytest.raises(IVMError, match="older version"):
        load_or_choose(str(old), [d], SCHEMA, 4, sizes({}))


def test_explain_prints_each_tables_scheme(pg_url, tmp_path, capsys):
    """``ivm daemon --explain`` chooses from the tables' sizes in PostgreSQL (no Spark) and,
    once a checkpoint recorded a plan, shows that one whatever the sizes are now."""
    import psycopg

    from ivm_layer.daemon.cli import main
    from ivm_layer.daemon.routingplan import load_or_choose

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE r (a int, k int); CREATE TABLE s (k int, x int); CREATE TABLE t (y int, tag text)")
        c.execute("INSERT INTO r SELECT g, g % 50 FROM generate_series(1, 500) g")
        c.execute("INSERT INTO s SELECT g % 50, g FROM generate_series(1, 100) g")
        c.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 5) g")
    views = tmp_path / "views.sql"
    views.write_text("CREATE INCREMENTAL MATERIALIZED VIEW v AS "
                     "SELECT r.a, s.x, t.y FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y;\n"
                     "CREATE INCREMENTAL MATERIALIZED VIEW w AS SELECT r.a, t.y FROM r JOIN t ON r.a < t.y;\n")
    args = ["daemon", "--explain", "--source", pg_url, "--views", str(views), "--shards", "4",
            "--checkpoint", str(tmp_path / "ckpt")][1:]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "first start would choose for 4 shard(s), table rows: r 500, s 100, t 5" in out
    assert "view v: shares {'r.k': 4}" in out and "  t: replicated to all 4 shards" in out
    assert "view w: shares {'#0': 4}" in out and "  r: hashed on its rows (share 4), each row on one shard" in out
    d = ViewDef("w", "SELECT r.a, t.y FROM r JOIN t ON r.a < t.y", True, ["r", "t"])
    v = ViewDef("v", "SELECT r.a, s.x, t.y FROM r JOIN s ON r.k = s.k JOIN t ON s.x < t.y", True, ["r", "s", "t"])
    load_or_choose(str(tmp_path / "ckpt"), [v, d], SCHEMA, 4, lambda: {"r": 5, "s": 5, "t": 5000})
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "routing recorded in" in out and "view w: shares {'#1': 4}" in out


def test_status_and_metrics_list_the_shards(tmp_path):
    """``--status`` keeps one entry per shard (routed rows and bytes add up over batches, the
    state rows are the last batch's); the metrics endpoint serves them labelled by shard."""
    import urllib.request

    from ivm_layer.daemon.metrics import DaemonMetrics
    from ivm_layer.daemon.status import StatusFile, format_status, read_status

    st = StatusFile(str(tmp_path), "d", "local[2]", 2)
    st.init_shards(2)
    st.set(routing={"v": {"shares": {"r.k": 2}, "tables": ["r: hashed on r.k (share 2), each row on one shard"]}})
    m = DaemonMetrics(st, 0)
    try:
        st.shard_batch({0: {"routed_rows": 10, "state_rows": 10, "shipped_bytes": 100},
                        1: {"routed_rows": 5, "state_rows": 5, "shipped_bytes": 50}})
        st.batch(batch_id=0, rows_in=15, changes_in=12, changes_out=3, seconds=0.1)
        st.shard_batch({1: {"routed_rows": 2, "state_rows": 6, "shipped_bytes": 20}})
        st.batch(batch_id=1, rows_in=2, changes_in=2, changes_out=0, seconds=0.1)
        got = read_status(str(tmp_path))
        assert got["shards"] == [{"shard": 0, "routed_rows": 10, "state_rows": 10, "shipped_bytes": 100},
                                 {"shard": 1, "routed_rows": 7, "state_rows": 6, "shipped_bytes": 70}]
        assert got["changes_in"] == 14 and got["shard_count"] == 2
        text = format_status(got)
        assert "routing of v: r: hashed on r.k" in text and "1: 7 routed, 6 held" in text
        body = urllib.request.urlopen(m.url, timeout=10).read().decode()
        assert 'ivm_daemon_shard_state_rows{shard="1"} 6.0' in body
        assert 'ivm_daemon_shard_routed_rows_total{shard="1"} 7.0' in body
        assert "ivm_daemon_changes_in_total 14.0" in body
    finally:
        m.close()
