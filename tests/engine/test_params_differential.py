"""Randomized differential tests of parameterized views against a brute-force evaluator.

Random queries (tests/querygen.py) get one to three ``alias.col = $pK`` conjuncts (sometimes
one parameter on two columns). After every update of a random insert/delete/batch stream,
random lookups (values present, absent, NULL) must equal the brute-force answer filtered by
the inputs, and now and then ``rows()`` must equal all input/output pairs. CQAP0 plans must
be simple (every leaf-to-root path a guard path).
"""

import operator
import random
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from oracle import BruteForceView  # noqa: E402
from querygen import gen_case  # noqa: E402

from ivm_layer import compile_view  # noqa: E402
from ivm_layer.errors import CyclicQueryError, UnsupportedSQLError  # noqa: E402

N_CASES = 130
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _run(view, op):
    if op.kind == "insert":
        view.insert(op.table, op.row)
    elif op.kind == "delete":
        view.delete(op.table, op.row)
    else:
        view.apply(op.batch)


def test_parameterized_views_match_brute_force():
    stats = Counter()
    for seed in range(N_CASES):
        case = gen_case(seed, n_steps=30, max_rows=5)
        q = case.query
        rnd = random.Random(seed * 13 + 5)
        cols = [(a, c) for a, t in q.atoms for c in q.schema[t]]
        k = rnd.randint(1, min(3, len(cols)))
        chosen = rnd.sample(cols, k)
        params = [f"p{i + 1}" for i in range(k)]
        conds = [f"{a}.{c} = ${p}" for (a, c), p in zip(chosen, params)]
        extra_col = None
        if rnd.random() < 0.25:  # one parameter on two columns
            extra_col = rnd.choice(cols)
            conds.append(f"{extra_col[0]}.{extra_col[1]} = $p1")
        rng = None
        if rnd.random() < 0.3:  # a range parameter
            rng = (rnd.choice(cols), rnd.choice((">", ">=", "<", "<=")))
            conds.append(f"{rng[0][0]}.{rng[0][1]} {rng[1]} $p{k + 1}")
        sql = q.sql + (" AND " if " WHERE " in q.sql else " WHERE ") + " AND ".join(conds)
        try:
            view = compile_view(sql, q.schema)
        except (CyclicQueryError, UnsupportedSQLError):
            stats["rejected"] += 1
            continue
        stats["cqap0" if view.cqap0 else "answer map"] += 1
        stats["with range"] += rng is not None
        if view.cqap0:
            assert view.plan.guards().simple, (seed, sql)
        out = q.out_cols()
        bq = replace(q, select=out + chosen + ([rng[0]] if rng else []) + ([extra_col] if extra_col else []))
        brute = BruteForceView(bq)
        n_out = len(out)

        def expected(values, brows):
            want = Counter()
            for row, m in brows:
                ins = row[n_out:n_out + k]
                if extra_col is not None and row[-1] != ins[0]:
                    continue
                if rng is not None:
                    x = row[n_out + k]
                    if x is None or not OPS[rng[1]](x, values[k]):
                        continue
                if tuple(ins) == tuple(values[:k]):
                    want[row[:n_out]] += m
            return sorted(want.items(), key=repr)

        for step, op in enumerate(case.stream):
            _run(view, op)
            _run(brute, op)
            brows = list(brute.rows())
            present = [row[n_out:n_out + k] for row, _ in brows
                       if None not in row[n_out:n_out + k]] if rnd.random() < 0.7 else []
            for _ in range(3):
                values = tuple(rnd.choice((0, 1, 2, 3, 4, 5, 9)) for _ in params)
                if present and rnd.random() < 0.7:
                    values = tuple(rnd.choice(present))
                if rng is not None:
                    values += (rnd.randint(-1, 6),)
                got = sorted(view.lookup(*values), key=repr)
                assert got == expected(values, brows), (seed, sql, op, values)
                stats["empty" if not got else "rows"] += 1
                stats[("cqap0 " if view.cqap0 else "map ") + ("empty" if not got else "rows")] += 1
            assert list(view.lookup(*([None] * (k + (rng is not None))))) == []
            if step % 10 == 9 and rng is None:
                pairs = Counter()
                for row, m in brows:
                    if extra_col is None or row[-1] == row[n_out]:
                        if all(v is not None for v in row[n_out:n_out + k]):
                            pairs[tuple(row[n_out:n_out + k]) + tuple(row[:n_out])] += m
                assert sorted(view.rows(), key=repr) == sorted(pairs.items(), key=repr), (seed, sql)
    print(stats)
    assert stats["cqap0"] > 20 and stats["answer map"] > 20 and stats["cqap0 rows"] > 100 and stats["cqap0 empty"] > 100 and stats["with range"] > 20
