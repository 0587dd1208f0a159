"""The benchmark's workload registry: a query, its schema and a seeded stream generator.

Every workload is a plain :class:`Workload` entry in :data:`WORKLOADS`; the runner knows nothing
about families. Families (``--list`` shows them):

* ``paper`` — Q1–Q12 of paper 000, Table 1 (SQL from ``sql_examples/qNN.sql``), each on a
  random-order (``Q4``), a temporally-ordered (``Q4-temporal``) and a mixed insert/delete
  (``Q4-mixed``) stream;
* ``fraud`` — the credit-card query of 000 §1 (``sql_examples/fraud.sql``), random and temporal;
* ``tpch`` — TPC-H-shaped full equi-joins FQ1–FQ4 (002 §5.1), see ``ivm_layer/bench/tpch.py``;
* ``aggregates`` — grouped TPC-H aggregates AQ3/AQ10/AQ18; they need ``GROUP BY`` support in
  the engine and are reported as skipped by a build without it;
* ``scaling`` — Q2 and the fraud query at 1×, 10× and 100× the input: how the per-update cost grows.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from ..sql_examples import DIR as _SQL_DIR
from . import streams, tpch
from .streams import COLUMNS, Generator, Update

SQL_DIR = str(_SQL_DIR)  # the example SQL files, package data of ivm_layer

#: 000 Table 2: the update stream sizes of the paper's experiments (k = 1000), per query.
PAPER_SIZES = {1: 12_000, 2: 12_000, 3: 2_700, 4: 2_700, 5: 21_000, 6: 21_000, 7: 2_700,
               8: 21_000, 9: 21_000, 10: 2_700, 11: 21_000, 12: 21_000}


@dataclass(frozen=True)
class Workload:
    name: str
    family: str
    description: str
    sql: str
    schema: dict  # table -> [columns]; column order = row tuple order
    generator: Generator = field(repr=False)
    order: str = "random"  # random | temporal | mixed
    quick_sizes: tuple = (300,)
    full_sizes: tuple = (1000, 4000, 16000)
    requires: str | None = None  # 'aggregates': needs GROUP BY support in the engine
    paper_size: int | None = None  # the stream size of 000 Table 2 (paper queries)

    def stream(self, n: int, seed: int = 42) -> list[Update]:
        """The update stream for size ``n``: ``[(table, row, ±1), …]``, fixed by (name, n, seed)."""
        rng = random.Random(f"{self.name}:{n}:{seed}")
        return self.generator(n, rng)


def _sql_file(name: str) -> str:
    with open(os.path.join(SQL_DIR, name)) as f:
        lines = [ln for ln in f.read().splitlines() if not ln.lstrip().startswith("--")]
    return " ".join(" ".join(lines).split())


# Table 1 of 000: relation shapes per query, and the columns compared by inequalities.
_PAPER = {
    1: {"R": "R3", "S": "S3"}, 2: {"R": "R4", "S": "S4"},
    3: {"R": "R3", "S": "S3", "T": "T3"}, 4: {"R": "R3", "S": "S3", "T": "T3"},
    5: {"R": "R4", "S": "S4", "T": "T3"}, 6: {"R": "R3", "S": "S4", "T": "T4"},
}
_PAPER.update({7: _PAPER[4], 8: _PAPER[5], 9: _PAPER[6], 10: _PAPER[4], 11: _PAPER[5], 12: _PAPER[6]})
_INEQ = {"R": [0], "S": [0], "T": [0]}  # a, d, g
_INEQ_Q3 = {"R": [0], "S": [0, 1], "T": [0]}  # a < d and e < g
_CLASS = {1: "full", 2: "full", 3: "full", 4: "full", 5: "full", 6: "full",
          7: "free-connex projection", 8: "free-connex projection", 9: "free-connex projection",
          10: "not free-connex", 11: "not free-connex", 12: "not free-connex"}
_ORDER_TEXT = {"random": "random-order inserts", "temporal": "temporally-ordered inserts",
               "mixed": "random inserts + 25% deletes"}


def _paper_workloads() -> list[Workload]:
    out = []
    for q, shapes in _PAPER.items():
        sql = _sql_file(f"q{q:02d}.sql")
        schema = {t: COLUMNS[s] for t, s in shapes.items()}
        ineq = _INEQ_Q3 if q == 3 else _INEQ
        ineq = {t: ineq[t] for t in shapes}
        for order in ("random", "temporal", "mixed"):
            name = f"Q{q}" if order == "random" else f"Q{q}-{order}"
            out.append(Workload(name, "paper", f"000 Table 1 Q{q} ({_CLASS[q]}), {_ORDER_TEXT[order]}",
                                sql, schema, streams.relational(shapes, order, ineq), order,
                                paper_size=PAPER_SIZES[q]))
    return out


def _fraud_workloads() -> list[Workload]:
    sql = _sql_file("fraud.sql")
    schema = {"trans": ["id", "acc", "ts", "amnt"]}
    return [
        Workload(name, "fraud", f"000 §1 credit-card fraud, {_ORDER_TEXT[order]}", sql, schema,
                 streams.fraud(order), order, quick_sizes=(3000,), full_sizes=(10_000, 100_000))
        for name, order in (("fraud", "random"), ("fraud-temporal", "temporal"))
    ]


def _tpch_workloads() -> list[Workload]:
    out = []
    for name, (desc, tables, sql) in tpch.FULL_JOINS.items():
        out.append(Workload(name, "tpch", f"002 §5.1 full join, {desc}", sql, tpch.schema_for(tables),
                            tpch.generator(tables), quick_sizes=(5000,), full_sizes=(20_000, 200_000)))
    for name, (desc, tables, sql) in tpch.AGGREGATES.items():
        out.append(Workload(name, "aggregates", f"002 §5.1 grouped aggregate, {desc}", sql,
                            tpch.schema_for(tables), tpch.generator(tables), quick_sizes=(5000,),
                            full_sizes=(20_000, 200_000), requires="aggregates"))
    return out


def _scaling_workloads() -> list[Workload]:
    shapes = _PAPER[2]
    return [Workload("scaling-Q2", "scaling",
                     "Q2 (equi + inequality join) at 1x, 10x, 100x input: per-update cost growth",
                     _sql_file("q02.sql"), {t: COLUMNS[s] for t, s in shapes.items()},
                     streams.relational(shapes, "random"), quick_sizes=(200, 2000, 20_000),
                     full_sizes=(1000, 10_000, 100_000)),
            Workload("scaling-fraud", "scaling",
                     "fraud query (random order) at 1x, 10x, 100x input: per-update cost growth",
                     _sql_file("fraud.sql"), {"trans": ["id", "acc", "ts", "amnt"]}, streams.fraud("random"),
                     quick_sizes=(200, 2000, 20_000), full_sizes=(1000, 10_000, 100_000))]


WORKLOADS: dict[str, Workload] = {
    w.name: w for w in _paper_workloads() + _fraud_workloads() + _tpch_workloads() + _scaling_workloads()
}
FAMILIES = ("paper", "fraud", "tpch", "aggregates", "scaling")


def paper_profile(specs: list[str] | None = None) -> list[tuple[Workload, list[int]]]:
    """The ``--profile paper`` runs: Q1–Q12 on insert-only random and temporal streams at the
    sizes of 000 Table 2 (restricted to ``specs`` when given, e.g. ``Q1*``)."""
    chosen = select(specs) if specs else list(WORKLOADS.values())
    return [(w, [w.paper_size]) for w in chosen
            if w.family == "paper" and w.order in ("random", "temporal") and w.paper_size]


def names() -> list[str]:
    return list(WORKLOADS)


def get(name: str) -> Workload:
    for k, w in WORKLOADS.items():
        if k.lower() == name.lower():
            return w
    raise KeyError(f"unknown workload {name!r}; `ivm bench --list` shows them")


def select(specs: list[str]) -> list[Workload]:
    """Workloads named by ``specs``: exact names, families (``paper``, ``tpch``, …), or a paper
    query's base name followed by ``*`` (``Q4*`` = Q4, Q4-temporal, Q4-mixed). Empty = all."""
    if not specs:
        return list(WORKLOADS.values())
    out: list[Workload] = []
    for spec in specs:
        s = spec.strip()
        if not s:
            continue
        if s.lower() in FAMILIES or s.lower() == "all":
            hits = [w for w in WORKLOADS.values() if s.lower() in ("all", w.family)]
        elif s.endswith("*"):
            base = s[:-1].lower()
            hits = [w for w in WORKLOADS.values()
                    if w.name.lower() == base or w.name.lower().startswith(base + "-")]
        else:
            hits = [get(s)]
        if not hits:
            raise KeyError(f"no workload matches {spec!r}; `ivm bench --list` shows them")
        out.extend(w for w in hits if w not in out)
    return out
