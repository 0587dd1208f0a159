"""Randomized differential tests of static-table views against a brute-force evaluator.

Random queries (tests/querygen.py) with a random non-empty set of static tables: the static
tables are loaded first (in one or two batches), then a random insert/delete/batch stream
runs over the dynamic tables. After every step the view must equal the brute force; a
change to a static table after the first dynamic update must raise UpdateError and change
nothing. Plans that claim C_lin/C_poly must have every dynamic leaf on a guard path.
"""

import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from oracle import BruteForceView  # noqa: E402
from querygen import _rand_val, gen_case  # noqa: E402

from ivm_layer import compile_view  # noqa: E402
from ivm_layer.errors import CyclicQueryError, UnsupportedSQLError, UpdateError  # noqa: E402

N_CASES = 160


def _filtered(op, static):
    if op.kind in ("insert", "delete"):
        return None if op.table in static else op
    batch = {t: e for t, e in op.batch.items() if t not in static}
    if not batch:
        return None
    return type(op)(op.kind, batch=batch)


def _run(view, op):
    if op.kind == "insert":
        view.insert(op.table, op.row)
    elif op.kind == "delete":
        view.delete(op.table, op.row)
    elif op.kind == "apply":
        view.apply(op.batch)
    else:
        return sorted(view.diff(op.batch), key=repr)


def test_static_views_match_brute_force():
    classes = Counter()
    checked = 0
    for seed in range(N_CASES):
        case = gen_case(seed, n_steps=40, max_rows=5)
        q = case.query
        rnd = random.Random(seed * 7 + 1)
        used = sorted(q.used_tables())
        static = set(rnd.sample(used, rnd.randint(1, len(used))))
        try:
            view = compile_view(q.sql, q.schema, static=tuple(static))
        except (CyclicQueryError, UnsupportedSQLError):
            classes["rejected"] += 1
            continue
        text = view.explain()
        klass = next(w for w in ("C_lin", "C_poly", "not tractable") if w in text)
        classes[klass] += 1
        if klass != "not tractable" and "planned as usual" not in text:
            rep = view.plan.guards()
            dyn = [a for a in rep.leaves if a not in view.plan.static_atoms]
            assert all(rep.leaves[a].guard_path for a in dyn), (seed, q.sql, static)
        brute = BruteForceView(q)
        for t in sorted(static):
            for _ in range(rnd.randint(1, 2)):
                batch = {t: [(tuple(_rand_val(rnd) for _ in q.schema[t]), 1) for _ in range(rnd.randint(0, 5))]}
                view.apply(batch)
                brute.apply(batch)
        assert sorted(view.rows(), key=repr) == sorted(brute.rows(), key=repr), (seed, q.sql, static)
        started = False
        for op in case.stream:
            op = _filtered(op, static)
            if op is None:
                continue
            got = _run(view, op)
            want = _run(brute, op)
            if op.kind == "diff":
                assert got == want, (seed, q.sql, static, op)
            started = True
            assert sorted(view.rows(), key=repr) == sorted(brute.rows(), key=repr), (seed, q.sql, static, op)
            assert len(view) == len(brute)
            checked += 1
        if started:
            t = sorted(static)[0]
            before = sorted(view.rows(), key=repr)
            try:
                view.insert(t, tuple(0 for _ in q.schema[t]))
            except UpdateError:
                pass
            else:
                raise AssertionError(f"static {t} accepted an update after dynamic ones (seed {seed})")
            assert sorted(view.rows(), key=repr) == before
    print(classes, checked)
    assert checked > 1000 and classes["C_lin"] > 10 and classes["not tractable"] > 10, classes
