"""Seeded, deterministic update streams for the benchmark.

Queries Q1, Q2, Q4, Q5, Q7 follow Table 1 of Idris et al., *Conjunctive Queries with Theta Joins
Under Updates* (§7): relations ``R(a,b,c[,k])``, ``S(d,e,f[,k])``, ``T(g,h,i)``; every attribute is
an integer except ``c`` and ``i`` (strings); the equality-join attribute ``k`` is uniform in
1..200.  A stream of size N for a query over m relations holds N/m random tuples per relation,
inserted in uniformly random order (the paper's *randomly-ordered* stream).

``fraud`` is the credit-card query of §1 over a synthetic ``trans(id, acc, ts, amnt)`` table:
many accounts, ~20 transactions per account spread over ~7 hours, so that a one-hour window
holds about three transactions of the same account.  Its stream is randomly ordered as well.

A stream is a list of ``(table, row)`` single-tuple insertions; the same list is fed to every
system of a run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Workload", "WORKLOADS", "get", "names"]

VALUE_RANGE = 1_000_000  # inequality / payload attributes: uniform ints in 1..VALUE_RANGE
K_RANGE = 200  # equality-join attribute k: uniform in 1..K_RANGE


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    sql: str
    schema: dict  # table -> [columns]; column order = row tuple order
    generator: Callable[[int, random.Random], list] = field(repr=False)

    def stream(self, n: int, seed: int = 42) -> list:
        """The update stream of ``n`` single-tuple inserts: [(table, row), ...]."""
        rng = random.Random(f"{self.name}:{n}:{seed}")
        return self.generator(n, rng)


def _int(rng):
    return rng.randint(1, VALUE_RANGE)


def _str(rng):
    return "s%07d" % rng.randrange(10_000_000)


def _rel_gen(tables: dict):
    """tables: name -> list of column kinds ('int' | 'str' | 'key')."""

    def gen(n, rng):
        per = max(1, n // len(tables))
        stream = []
        for t, kinds in tables.items():
            for _ in range(per):
                row = tuple(
                    _int(rng) if kd == "int" else _str(rng) if kd == "str" else rng.randint(1, K_RANGE)
                    for kd in kinds
                )
                stream.append((t, row))
        rng.shuffle(stream)
        return stream

    return gen


R3 = ["int", "int", "str"]  # R(a, b, c)
S3 = ["int", "int", "int"]  # S(d, e, f)
T3 = ["int", "int", "str"]  # T(g, h, i)
R4 = R3 + ["key"]  # R(a, b, c, k)
S4 = S3 + ["key"]  # S(d, e, f, k)

SCH_R3 = ["a", "b", "c"]
SCH_S3 = ["d", "e", "f"]
SCH_T3 = ["g", "h", "i"]
SCH_R4 = SCH_R3 + ["k"]
SCH_S4 = SCH_S3 + ["k"]


def _fraud_gen(n, rng):
    n_acc = max(5, n // 20)  # ~20 transactions per account
    span = 7 * 3600  # ~3 per account within any one hour
    t0 = 1_700_000_000
    stream = []
    for tid in range(1, n + 1):
        acc = rng.randint(1, n_acc)
        ts = t0 + rng.randrange(span)
        u = rng.random()
        if u < 0.6:
            amnt = rng.randint(1, 99)  # small test purchase
        elif u < 0.85:
            amnt = rng.randint(100, 400)
        else:
            amnt = rng.randint(401, 5000)  # large purchase
        stream.append(("trans", (tid, acc, ts, amnt)))
    rng.shuffle(stream)
    return stream


WORKLOADS = {
    w.name: w
    for w in [
        Workload(
            "Q1",
            "R(a,b,c) x S(d,e,f) | a<d  (binary inequality join, output ~N^2/8)",
            "SELECT * FROM R, S WHERE R.a < S.d",
            {"R": SCH_R3, "S": SCH_S3},
            _rel_gen({"R": R3, "S": S3}),
        ),
        Workload(
            "Q2",
            "R(a,b,c,k) x S(d,e,f,k) | a<d, R.k=S.k  (equi + inequality)",
            "SELECT * FROM R, S WHERE R.a < S.d AND R.k = S.k",
            {"R": SCH_R4, "S": SCH_S4},
            _rel_gen({"R": R4, "S": S4}),
        ),
        Workload(
            "Q4",
            "R(a,b,c) x S(d,e,f) x T(g,h,i) | a<d<g  (3-way chain, output ~N^3/162)",
            "SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g",
            {"R": SCH_R3, "S": SCH_S3, "T": SCH_T3},
            _rel_gen({"R": R3, "S": S3, "T": T3}),
        ),
        Workload(
            "Q5",
            "R(a,b,c,k) x S(d,e,f,k) x T(g,h,i) | a<d<g, R.k=S.k",
            "SELECT * FROM R, S, T WHERE R.a < S.d AND S.d < T.g AND R.k = S.k",
            {"R": SCH_R4, "S": SCH_S4, "T": SCH_T3},
            _rel_gen({"R": R4, "S": S4, "T": T3}),
        ),
        Workload(
            "Q7",
            "pi_{a,b,d,e,f,g,h}(Q4)  (free-connex projection)",
            "SELECT R.a, R.b, S.d, S.e, S.f, T.g, T.h FROM R, S, T WHERE R.a < S.d AND S.d < T.g",
            {"R": SCH_R3, "S": SCH_S3, "T": SCH_T3},
            _rel_gen({"R": R3, "S": S3, "T": T3}),
        ),
        Workload(
            "fraud",
            "credit-card fraud: two small purchases then a large one within 1h, same account",
            "SELECT * FROM trans S1, trans S2, trans L "
            "WHERE S1.ts < S2.ts AND S2.ts < L.ts AND L.ts < S1.ts + 3600 "
            "AND S1.acc = S2.acc AND S2.acc = L.acc "
            "AND S1.amnt < 100 AND S2.amnt < 100 AND L.amnt > 400",
            {"trans": ["id", "acc", "ts", "amnt"]},
            _fraud_gen,
        ),
    ]
}


def names() -> list:
    return list(WORKLOADS)


def get(name: str) -> Workload:
    for k, w in WORKLOADS.items():
        if k.lower() == name.lower():
            return w
    raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
