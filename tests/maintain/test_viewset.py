"""The ViewSet: the one road of every driver, tested on its own with the cases of the three
orchestrators it replaced — the DuckDB session's writer (all views or none, undo on
ROLLBACK, subscribers after COMMIT), the PostgreSQL session's stream applier (static
rebuild, checkpoint log, a restart whose table is ahead) and the daemon's engine state
(inconsistent deletes, rebuild counts) — and a randomized differential run against DuckDB
recomputing every view."""

from __future__ import annotations

import random
import warnings
from collections import Counter
from dataclasses import dataclass, field

import duckdb
import pytest

import ivm_layer
from ivm_layer import compile_view
from ivm_layer.errors import SubscriberWarning, UpdateError
from ivm_layer.maintain.changes import Changes
from ivm_layer.maintain.checkpoint import CheckpointStore
from ivm_layer.maintain.viewset import ViewSet

SCHEMA = {"r": {"a": "INTEGER", "k": "INTEGER"}, "s": {"k": "INTEGER", "b": "VARCHAR"},
          "n": {"k": "INTEGER", "name": "VARCHAR"}}
VIEWS = {
    "j": "SELECT r.a, s.b FROM r JOIN s ON r.k = s.k",
    "g": "SELECT r.k, COUNT(*) AS c, SUM(r.a) AS t FROM r GROUP BY r.k",
    "u": "SELECT r.k FROM r UNION SELECT s.k FROM s",
    "e": "SELECT r.a FROM r WHERE r.k IN (SELECT s.k FROM s)",
    "st": "SELECT r.a, n.name FROM r JOIN n ON r.k = n.k",        # n is static for it
}
STATIC = {"st": ("n",)}


@dataclass(eq=False)
class Member:
    """A view as a driver holds it (the ViewSet's member protocol), compiled from SQL."""

    name: str
    sql: str
    static_tables: tuple = ()
    wants_change: bool = True
    view: object = None
    error: BaseException | None = None
    subscribers: list = field(default_factory=list)
    rebuilds: int = 0

    def __post_init__(self):
        self.view = self.recompile()

    @property
    def static(self) -> set[str]:
        return set(self.static_tables)

    def recompile(self):
        return compile_view(self.sql, SCHEMA, **({"static": self.static_tables} if self.static_tables else {}))


def viewset(**kw) -> ViewSet:
    return ViewSet({n: Member(n, q, STATIC.get(n, ())) for n, q in VIEWS.items()}, **kw)


def bag(m: Member) -> Counter:
    return +Counter(dict(m.view.rows()))


def snapshot(vset: ViewSet) -> dict:
    return {n: bag(m) for n, m in vset.members.items()}


def oracle(base: dict[str, Counter]) -> dict[str, Counter]:
    """Every view recomputed by DuckDB over the base rows."""
    con = duckdb.connect()
    for t, cols in SCHEMA.items():
        con.execute(f"CREATE TABLE {t} ({', '.join(f'{c} {ty}' for c, ty in cols.items())})")
        rows = [r for r, k in base[t].items() for _ in range(k)]
        if rows:
            con.executemany(f"INSERT INTO {t} VALUES ({', '.join('?' * len(cols))})", rows)
    return {n: Counter(con.execute(q).fetchall()) for n, q in VIEWS.items()}


def row(rnd: random.Random, t: str) -> tuple:
    if t == "r":
        return (rnd.randint(0, 4), rnd.choice([None, 0, 1, 2]))
    return (rnd.choice([None, 0, 1, 2]), rnd.choice(["x", "y", None]))


def test_all_views_or_none():
    """One batch for all readers: a delete only one view would refuse (it holds no such row
    because... every view holds the same base rows — so a bad row refuses for all) and a
    value one view cannot take leave every view as it was (the DuckDB writer's and the
    daemon's all-or-nothing)."""
    vset = viewset()
    vset.apply(Changes.of({"r": [((1, 1), 1)], "s": [((1, "x"), 1)], "n": [((1, "fr"), 1)]}))
    before = snapshot(vset)
    with pytest.raises(UpdateError):
        vset.apply(Changes.of({"r": [((2, 1), 1)], "s": [((7, "z"), -1)]}))
    with pytest.raises(UpdateError):            # "x" cannot be summed by g: j, u, e were fine
        vset.apply(Changes.of({"r": [(("x", 1), 1)]}))
    assert snapshot(vset) == before


def test_static_table_rebuilds_aside_counted_and_refused_whole():
    vset = viewset()
    st = vset.members["st"]
    out = vset.apply(Changes.of({"n": [((1, "fr"), 1)], "r": [((5, 1), 1)]}))   # the first load
    assert st.rebuilds == 0 and out[st] == [((5, "fr"), 1)] and out.rebuilt == [st]
    out = vset.apply(Changes.of({"r": [((6, 1), 1)]}))                            # dynamic: O(1) path
    assert st.rebuilds == 0 and out[st] == [((6, "fr"), 1)] and not out.rebuilt
    old = st.view
    out = vset.apply(Changes.of({"n": [((1, "fr"), -1), ((1, "de"), 1)]}))
    assert st.rebuilds == 1 and st.view is not old and out.rebuilt == [st]
    assert sorted(out[st]) == [((5, "de"), 1), ((5, "fr"), -1), ((6, "de"), 1), ((6, "fr"), -1)]
    before = snapshot(vset)
    with pytest.raises(UpdateError, match="not present"):     # a static delete of a missing row
        vset.apply(Changes.of({"n": [((9, "zz"), -1)], "r": [((7, 1), 1)]}))
    assert snapshot(vset) == before and st.rebuilds == 1


def test_undo_reverses_batches_and_rebuilds():
    """A transaction's undo log (the DuckDB session's ROLLBACK): every view, rebuilt ones too,
    is exactly as before, and nothing is told to the subscribers."""
    vset = viewset()
    vset.apply(Changes.of({"r": [((1, 1), 2)], "s": [((1, "x"), 1)], "n": [((1, "fr"), 1)]}))
    before = snapshot(vset)
    heard = []
    vset.members["j"].subscribers.append(heard.append)
    st_view = vset.members["st"].view
    undo: list = []
    vset.apply(Changes.of({"r": [((1, 1), -1), ((3, 2), 1)], "s": [((2, "y"), 1)]}), undo=undo)
    vset.apply(Changes.of({"n": [((2, "de"), 1)]}), undo=undo)                     # a rebuild
    assert vset.members["st"].rebuilds == 1 and snapshot(vset) != before
    ViewSet.undo(undo)
    vset.discard()
    vset.notify()
    assert undo == [] and snapshot(vset) == before and heard == []
    assert vset.members["st"].view is st_view and vset.members["st"].rebuilds == 0


def test_subscribers_after_the_drivers_commit_engine_level_too():
    """Session-level and engine-level (view.subscribe) callbacks hear each view's change once,
    consolidated since the last notify, only when the driver says so; one that raises is a
    SubscriberWarning and stops neither the others nor the change (issue 29, case 1)."""
    vset = viewset()
    j = vset.members["j"]
    j.wants_change = False          # a served view: only the subscribers want its change
    engine_heard, session_heard = [], []

    def bad(change):
        raise RuntimeError("subscriber bug")

    j.view.subscribe(engine_heard.append)
    j.view.subscribe(bad)
    j.subscribers.append(session_heard.append)
    vset.apply(Changes.of({"s": [((1, "x"), 1)]}))
    vset.apply(Changes.of({"r": [((1, 1), 1), ((2, 1), 1)]}))
    vset.apply(Changes.of({"r": [((2, 1), -1)]}))
    assert engine_heard == session_heard == []            # nothing before the driver's commit
    with pytest.warns(SubscriberWarning, match="subscriber bug"):
        vset.notify()
    assert engine_heard == session_heard == [[((1, "x"), 1)]]
    assert bag(j) == Counter({(1, "x"): 1})               # applied, whatever the callbacks did
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vset.notify()                                     # nothing new: nobody is called
    assert len(engine_heard) == 1


def test_quiet_catch_up_then_the_rest_equals_applying_all():
    """A PostgreSQL view whose table is ahead of its checkpoint: the part the table holds is
    applied quietly (no change, nobody told), then the rest's change is exactly the table's
    missing change — even when the rest rebuilds the view."""
    ref, vset = viewset(), viewset()
    first = Changes.of({"r": [((1, 1), 1)], "s": [((1, "x"), 1)], "n": [((1, "fr"), 1)]})
    for v in (ref, vset):
        v.apply(first)
    early = Changes.of({"r": [((2, 1), 1)]})
    late = Changes.of({"r": [((3, 1), 1)], "n": [((1, "fr"), -1), ((1, "de"), 1)]})
    want = ref.apply(early)
    want_late = ref.apply(late)
    heard = []
    vset.members["st"].subscribers.append(heard.append)
    assert vset.apply(early, quiet=True) == {}
    assert vset.pending == {}
    got = vset.apply(late)
    assert snapshot(vset) == snapshot(ref)
    assert sorted(got[vset.members["st"]]) == sorted(want_late[ref.members["st"]])
    assert want[ref.members["st"]] == [((2, "fr"), 1)]
    vset.notify()
    assert sorted(heard[0]) == sorted(want_late[ref.members["st"]])


def test_checkpoint_log_replays_to_the_same_views(tmp_path):
    """``apply(…, position=…)`` logs the batch (the PostgreSQL session's per-view log, the
    daemon's per-batch log); snapshot + log loaded into fresh views equals the live ones."""
    store = CheckpointStore(tmp_path, "vs", columnar=True)
    vset = viewset(checkpoint=store)
    store.write_snapshot({}, {}, 0)
    rnd = random.Random(5)
    base = {t: Counter() for t in SCHEMA}
    for pos in range(1, 30):
        c = Changes()
        for _ in range(rnd.randint(1, 4)):
            t = rnd.choice("rs")
            r = row(rnd, t)
            k = -1 if base[t][r] + c.get(t, {}).get(r, 0) > 0 and rnd.random() < 0.4 else 1
            c.add(t, r, k)
        vset.apply(c, position=pos)
        for t, d in c.items():
            base[t].update(d)
        if pos == 17:
            store.write_snapshot({}, {t: +base[t] for t in SCHEMA}, pos)
    vset.log(31)                         # a position passed with nothing for these views
    store.sync_log()
    again = CheckpointStore(tmp_path, "vs", columnar=True)
    cp = again.load()
    assert cp.lsn == 31 == again.position
    fresh = viewset()
    for m in fresh.members.values():
        from ivm_layer.maintain.viewset import load_view

        load_view(m.view, {t: cp.tables.get(t, {}) for t in m.view.tables}, m.static)
    assert snapshot(fresh) == snapshot(vset) == {n: +c for n, c in oracle(base).items()}


def test_stopped_members_are_skipped_and_only_limits_the_members():
    vset = viewset()
    vset.members["u"].error = RuntimeError("stopped")
    out = vset.apply(Changes.of({"r": [((1, 1), 1)]}), only=[vset.members["j"], vset.members["u"]])
    assert len(vset.members["u"].view) == 0 and len(vset.members["g"].view) == 0
    assert dict(vset.members["j"].view.base_rows("r")) == {(1, 1): 1} and out == {}


@pytest.mark.parametrize("seed", range(4))
def test_randomized_against_duckdb_with_rollbacks_and_bad_batches(seed):
    """Random insert/delete batches (NULLs, duplicates, writes to the static table) through
    one ViewSet; a third of the transactions roll back, some batches are refused whole; after
    each step every view equals DuckDB's answer, and the subscribers' changes add up to it."""
    rnd = random.Random(seed)
    vset = viewset()
    base = {t: Counter() for t in SCHEMA}
    heard = {n: Counter() for n in VIEWS}
    for n, m in vset.members.items():
        m.subscribers.append(lambda ch, n=n: heard[n].update(dict(ch)))
    for _ in range(25):
        undo: list = []
        pending = {t: Counter() for t in SCHEMA}
        for _ in range(rnd.randint(1, 3)):
            c = Changes()
            for _ in range(rnd.randint(1, 5)):
                t = rnd.choice("rrssn")
                r = row(rnd, t)
                held = base[t][r] + pending[t][r] + c.get(t, {}).get(r, 0)
                c.add(t, r, -1 if held > 0 and rnd.random() < 0.4 else 1)
            bad = rnd.random() < 0.15
            if bad:
                c.add("s", (99, "missing"), -1)
            try:
                vset.apply(c, undo=undo)
            except UpdateError:
                assert bad
                continue
            assert not bad
            for t, d in c.items():
                pending[t].update(d)
        if rnd.random() < 0.33:
            ViewSet.undo(undo)
            vset.discard()
        else:
            for t in SCHEMA:
                base[t].update(pending[t])
            vset.notify()
        want = {n: +c for n, c in oracle(base).items()}
        assert snapshot(vset) == want
        assert {n: +c for n, c in heard.items()} == want


def test_every_view_class_is_an_ivm_view():
    """``ivm_layer.View`` is a Protocol every compiled view satisfies (GROUP BY, UNION,
    IN (SELECT …), computed columns, static tables, parameters, nested views)."""
    queries = [VIEWS["j"], VIEWS["g"], VIEWS["u"], VIEWS["e"], "SELECT r.a + 1 AS x FROM r",
               "SELECT q.k, q.c FROM (SELECT r.k, COUNT(*) AS c FROM r GROUP BY r.k) q JOIN s ON q.k = s.k",
               "SELECT r.a, s.b FROM r JOIN s ON r.k = s.k WHERE r.a = $p"]
    views = [compile_view(q, SCHEMA) for q in queries] + [compile_view(VIEWS["st"], SCHEMA, static=("n",))]
    # join trees with outer joins, window functions, constant inputs (main's later view classes)
    tree = compile_view("SELECT r.a, s.b, n.name FROM r LEFT JOIN s ON r.k = s.k LEFT JOIN n ON r.k = n.k", SCHEMA)
    later = [tree.inner,
             compile_view("SELECT r.k, r.a, ROW_NUMBER() OVER (PARTITION BY r.k ORDER BY r.a) AS rn FROM r", SCHEMA),
             compile_view("SELECT r.a, v.x FROM r JOIN (VALUES (1), (2)) AS v(x) ON r.a = v.x", SCHEMA)]
    views += later
    kinds = {type(v).__name__ for v in views}
    assert kinds == {"View", "AggregateView", "SetOpView", "SemiJoinView", "ProjectView", "NestedView",
                     "ParamView", "StaticView", "JoinView", "WindowView", "ConstantInputs"}
    for v in later:   # commit(notify=False) leaves the subscribers to the caller (the ViewSet)
        heard: list = []
        v.subscribe(heard.append)
        change = v.commit(v.prepare({"r": [((1, 1), 1)]}), want_change=True, notify=False)
        assert change and heard == []
        v.apply({"r": [((2, 2), 1)]})
        assert len(heard) == 1, type(v).__name__
    assert all(isinstance(v, ivm_layer.View) for v in views)
    assert not isinstance(object(), ivm_layer.View)
    for v in views:
        for op in ("insert", "delete", "apply", "diff", "prepare", "commit"):
            doc = getattr(type(v), op).__doc__ or ""
            assert "Cost" in doc or "cost" in doc or "explain" in doc or "O(" in doc, (type(v).__name__, op)
