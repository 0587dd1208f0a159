"""Seeded, deterministic update streams (paper 000 §7 and the fraud example of §1).

A stream is a list of ``(table, row, k)`` single-tuple updates, ``k`` = +1 (insert) or -1
(delete of a row inserted earlier and still present). The same list is fed to every system of
a run; every generator takes ``(n, rng)`` and draws only from ``rng``, so a seed fixes the
stream exactly.

* *random* order (000 §7): N/m random tuples per relation (m relations), inserted in a
  uniformly random order.
* *temporal* order: the same, but every attribute compared by an inequality receives a value
  larger than the same attribute of every earlier tuple (a global clock), as in the paper's
  temporally-ordered streams for CER systems.
* *mixed*: inserts of fresh random tuples interleaved with deletes of random present tuples
  (25% of the updates are deletes once the database is non-empty).
"""

from __future__ import annotations

import random
from typing import Callable

Update = tuple[str, tuple, int]
Generator = Callable[[int, random.Random], list[Update]]

VALUE_RANGE = 1_000_000  # inequality / payload attributes: uniform ints in 1..VALUE_RANGE
K_RANGE = 200  # equality-join attribute k: uniform in 1..K_RANGE (000 §7)
DELETE_SHARE = 0.25  # of the updates of a mixed stream

# Column kinds of the paper's relations: 'int', 'str' (c and i hold strings), 'key' (k).
KINDS = {
    "R3": ["int", "int", "str"], "R4": ["int", "int", "str", "key"],
    "S3": ["int", "int", "int"], "S4": ["int", "int", "int", "key"],
    "T3": ["int", "int", "str"], "T4": ["int", "int", "str", "key"],
}
COLUMNS = {
    "R3": ["a", "b", "c"], "R4": ["a", "b", "c", "k"],
    "S3": ["d", "e", "f"], "S4": ["d", "e", "f", "k"],
    "T3": ["g", "h", "i"], "T4": ["g", "h", "i", "k"],
}


def _value(kind: str, rng: random.Random):
    if kind == "int":
        return rng.randint(1, VALUE_RANGE)
    if kind == "str":
        return "s%07d" % rng.randrange(10_000_000)
    return rng.randint(1, K_RANGE)


def _tuple(kinds: list[str], rng: random.Random) -> tuple:
    return tuple(_value(kd, rng) for kd in kinds)


def relational(tables: dict[str, str], order: str = "random",
               inequality: dict[str, list[int]] | None = None) -> Generator:
    """A generator over relations ``{table: shape}`` (shape a key of KINDS).

    ``order`` is 'random', 'temporal' or 'mixed'; ``inequality`` names, per table, the column
    positions compared by inequalities (rewritten from a global clock when temporal).
    """
    if order not in ("random", "temporal", "mixed"):
        raise ValueError(f"unknown stream order {order!r}")
    ineq = inequality or {}

    def gen(n: int, rng: random.Random) -> list[Update]:
        if order == "mixed":
            return _mixed(tables, n, rng)
        per = max(1, n // len(tables))
        stream: list[Update] = []
        for t, shape in tables.items():
            for _ in range(per):
                stream.append((t, _tuple(KINDS[shape], rng), 1))
        rng.shuffle(stream)
        if order == "temporal":
            clock = 0
            out = []
            for t, row, k in stream:
                cols = ineq.get(t)
                if cols:
                    clock += rng.randint(1, 3)
                    row = list(row)
                    for p in cols:
                        row[p] = clock
                    row = tuple(row)
                out.append((t, row, k))
            stream = out
        return stream

    return gen


def _mixed(tables: dict[str, str], n: int, rng: random.Random) -> list[Update]:
    names = list(tables)
    present: list[tuple[str, tuple]] = []
    stream: list[Update] = []
    while len(stream) < n:
        if present and rng.random() < DELETE_SHARE:
            i = rng.randrange(len(present))
            present[i], present[-1] = present[-1], present[i]
            t, row = present.pop()
            stream.append((t, row, -1))
        else:
            t = rng.choice(names)
            row = _tuple(KINDS[tables[t]], rng)
            present.append((t, row))
            stream.append((t, row, 1))
    return stream


def fraud(order: str = "random") -> Generator:
    """Synthetic card transactions ``trans(id, acc, ts, amnt)``: N/20 accounts with ~20
    transactions each over 7 hours (about three per account per hour); 60% of amounts < 100,
    15% > 400. 'random' shuffles them; 'temporal' streams them by timestamp."""

    def gen(n: int, rng: random.Random) -> list[Update]:
        n_acc = max(5, n // 20)
        span = 7 * 3600
        t0 = 1_700_000_000
        rows = []
        for tid in range(1, n + 1):
            acc = rng.randint(1, n_acc)
            ts = t0 + rng.randrange(span)
            u = rng.random()
            if u < 0.6:
                amnt = rng.randint(1, 99)
            elif u < 0.85:
                amnt = rng.randint(100, 400)
            else:
                amnt = rng.randint(401, 5000)
            rows.append((tid, acc, ts, amnt))
        if order == "temporal":
            rows.sort(key=lambda r: (r[2], r[0]))
        else:
            rng.shuffle(rows)
        return [("trans", r, 1) for r in rows]

    return gen
