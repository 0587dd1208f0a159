"""Issue 30 in the daemon's engine state (no Spark): views with join trees of outer joins, Top-N,
window functions and constant inputs are compiled from a views file (PostgreSQL dialect), follow
consolidated change batches, survive snapshot + log recovery, and equal DuckDB evaluating their
SELECT over the state's base rows after every batch; their sink layout takes the source's types
and the view's column list."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import psycopg

from ivm_layer.daemon.sinks import view_layout
from ivm_layer.daemon.state import EngineState, batch_changes, open_checkpoint, parse_views

SCHEMA = {"a": {"k": "integer", "v": "integer"}, "b": {"k": "integer", "j": "integer"},
          "c": {"j": "integer", "w": "integer"}}
VIEWS = """
CREATE INCREMENTAL VIEW chain AS
  SELECT a.k, a.v, b.j, c.w FROM a LEFT JOIN b ON a.k = b.k FULL JOIN c ON b.j = c.j;
CREATE INCREMENTAL MATERIALIZED VIEW top2 (kk) AS
  SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST) AS rn FROM a) s
  WHERE rn <= 2;
CREATE INCREMENTAL VIEW ranks AS
  SELECT k, v, RANK() OVER (PARTITION BY k ORDER BY v) AS r, SUM(v) OVER (PARTITION BY k ORDER BY v) AS s FROM a;
CREATE INCREMENTAL VIEW series AS SELECT b.k, g FROM b, generate_series(1, 3) AS g WHERE b.j >= g;
"""


def _batches(seed: int, steps: int):
    rng = random.Random(seed)
    held = {t: [] for t in SCHEMA}
    val = lambda: None if rng.random() < 0.15 else rng.randint(0, 3)  # noqa: E731
    seq = 0
    for _ in range(steps):
        items = []
        for _ in range(rng.randint(1, 5)):
            t = rng.choice(list(SCHEMA))
            if held[t] and rng.random() < 0.35:
                items.append((t, -1, held[t].pop(rng.randrange(len(held[t])))))
            else:
                row = (val(), val())
                held[t].append(row)
                items.append((t, 1, row))
        rows = [(0, seq + i, t, k, r) for i, (t, k, r) in enumerate(items)]
        seq += len(items)
        yield batch_changes(rows, {})


def _want(state: EngineState, sql: str) -> Counter:
    con = duckdb.connect()
    for t, cols in SCHEMA.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(f'{c} INTEGER' for c in cols)})")
        rows = [r for r, k in state.base[t].items() for _ in range(k)] if t in state.tables else []
        if rows:
            con.executemany(f"INSERT INTO {t} VALUES (?, ?)", rows)
    return Counter(map(tuple, con.execute(sql).fetchall()))


def test_issue30_views_in_the_daemon_state(tmp_path):
    defs = parse_views(VIEWS)
    assert [d.columns for d in defs] == [None, ["kk"], None, None]
    state = EngineState(defs, SCHEMA)
    store = open_checkpoint(str(tmp_path), defs)
    for b, changes in enumerate(_batches(3, 30)):
        state.apply(changes)
        store.append(b, changes)
        if b == 12:
            store.write_snapshot({"batch": b}, state.base, b)
        for d in defs:
            got = Counter(dict(state.views[d.name].rows()))
            assert got == _want(state, d.select_sql), (b, d.name)
    again = EngineState(defs, SCHEMA)
    assert again.recover(open_checkpoint(str(tmp_path), defs))[0] == 29
    for d in defs:
        assert Counter(dict(again.views[d.name].rows())) == Counter(dict(state.views[d.name].rows()))


def test_composite_view_layout_takes_the_source_types_and_column_list(pg_url):
    from ivm_layer.io.postgres.snapshot import view_types

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE a (k int, v int)")
    defs = parse_views(VIEWS)
    state = EngineState(defs, SCHEMA)
    top2 = next(d for d in defs if d.name == "top2")
    types = view_types(pg_url, top2.select_sql)
    assert view_layout(state.views["top2"], {}, types, top2.columns) == (["kk", "v"], ["integer", "integer"])
