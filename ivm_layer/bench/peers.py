"""Runners for the optional peer systems of the benchmark: Pathway and Apache Flink (PyFlink).

Both are *not* dependencies of the project; they are detected by import (``systems.precheck``)
and run only when installed — e.g. in a separate virtualenv::

    python3 -m venv /tmp/peers-venv
    /tmp/peers-venv/bin/pip install -e '.[test,bench]' pathway apache-flink

A workload's SQL is first reduced to a :class:`JoinSpec` — the atoms of its FROM clause, the
equalities between columns of two atoms (join keys) and the other conjuncts of its WHERE clause
(filters, evaluated on the join) and the output columns. What the peers get from it:

* ``pathway``: one input table per base table, built with ``pw.debug.table_from_pandas`` from the
  whole stream with ``__time__`` = a distinct, increasing timestamp per update and ``__diff__``
  = ±1 — Pathway processes the stream as one minibatch *per update*, in order (each update its
  own logical time). The query is written with Pathway's own API: an atom per FROM entry
  (``select`` renaming its columns), ``join`` on the equalities linking it to the atoms joined
  so far (a constant key when there is none: a cross join), each filter applied as soon as
  its atoms are joined, a final ``select``; the result's changes are consumed by
  ``pw.io.subscribe``. Timed: ``pw.run`` (loading the input, all 1-update epochs, delivering
  every output change to Python); not timed: building the pandas frames and the dataflow.
* ``flink``: PyFlink, streaming mode, parallelism 1. One changelog stream per base table
  (``from_collection`` of ``Row.of_kind(INSERT|DELETE, …)`` in stream order, then
  ``from_changelog_stream``), and the workload's query re-printed as Flink SQL over them (a
  *regular join*: Flink keeps both inputs in state and emits retractions). The result's
  changelog is consumed with ``execute().collect()``. Timed: building the sources from the
  Python rows, submitting the job (its local mini-cluster starts per job), processing and
  collecting every output change. The same job on empty inputs runs twice first, untimed: cold
  (``warmup_job_s``: class loading, JIT) and warm (``empty_job_s``: the fixed per-job cost that
  is inside the timed figure); ``marginal_us_per_update`` = (``stream_s`` − ``empty_job_s``) / N
  is an estimate of the cost per update beyond that fixed cost.

Records carry ``delivery`` (what the timing includes) and, for Flink, the JVM's RSS
(``jvm_rss_mb``: the py4j gateway runs Flink in a ``java`` child process, which the child's own
``peak_rss_mb`` does not include).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from .workloads import Workload


class PeerUnsupported(Exception):
    """The workload's SQL is outside what the peer runners translate (reported as skipped)."""


@dataclass
class JoinSpec:
    atoms: list[tuple[str, str]]  # (alias, base table), FROM order
    equalities: list[tuple[tuple[str, str], tuple[str, str]]]  # ((alias, col), (alias, col))
    filters: list[exp.Expression]  # other WHERE conjuncts; columns qualified with their alias
    output: list[tuple[str, str]]  # (alias, col) in result order
    schema: dict = field(default_factory=dict)

    def aliases_of(self, e: exp.Expression) -> set[str]:
        return {c.table for c in e.find_all(exp.Column)}


def _conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    return [e]


def join_spec(w: Workload) -> JoinSpec:
    """The workload's SQL as atoms + join equalities + filters + output columns, or
    :class:`PeerUnsupported` (aggregates, DISTINCT, explicit JOIN syntax, subqueries)."""
    tree = sqlglot.parse_one(w.sql, read="duckdb")
    if not isinstance(tree, exp.Select):
        raise PeerUnsupported("not a single SELECT")
    for k in ("group", "having", "order", "limit", "distinct", "with"):
        if tree.args.get(k):
            raise PeerUnsupported(f"{k.upper()} is not translated for the peers")
    if any(isinstance(x, exp.AggFunc) for x in tree.find_all(exp.AggFunc)):
        raise PeerUnsupported("aggregates are not translated for the peers")
    if tree.find(exp.Subquery):
        raise PeerUnsupported("subqueries are not translated for the peers")
    tables = [tree.args["from_"].this] + [j.this for j in tree.args.get("joins") or []]
    for j in tree.args.get("joins") or []:
        if j.args.get("on") or j.args.get("using") or j.args.get("side") or j.args.get("kind"):
            raise PeerUnsupported("explicit JOIN … ON syntax is not translated for the peers")
    atoms = []
    for t in tables:
        if not isinstance(t, exp.Table):
            raise PeerUnsupported("FROM entries must be tables")
        atoms.append((t.alias_or_name, t.name))
    if len({a for a, _ in atoms}) != len(atoms):
        raise PeerUnsupported("duplicate aliases")
    cols_of = {a: list(w.schema[t]) for a, t in atoms}

    def qualify(node: exp.Expression) -> exp.Expression:
        for c in node.find_all(exp.Column):
            if c.table:
                alias = next((a for a in cols_of if a.lower() == c.table.lower()), None)
                if alias is None or c.name not in cols_of[alias]:
                    raise PeerUnsupported(f"unknown column {c.sql()}")
            else:
                hits = [a for a, cols in cols_of.items() if c.name in cols]
                if len(hits) != 1:
                    raise PeerUnsupported(f"ambiguous or unknown column {c.name}")
                alias = hits[0]
            c.set("table", exp.to_identifier(alias))
        return node

    output: list[tuple[str, str]] = []
    for e in tree.expressions:
        if isinstance(e, exp.Star):
            output += [(a, c) for a, _ in atoms for c in cols_of[a]]
        elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
            alias = next(a for a in cols_of if a.lower() == e.table.lower())
            output += [(alias, c) for c in cols_of[alias]]
        else:
            inner = e.this if isinstance(e, exp.Alias) else e
            if not isinstance(inner, exp.Column):
                raise PeerUnsupported(f"output expression {e.sql()} is not a column")
            q = qualify(inner.copy())
            output.append((q.table, q.name))
    equalities, filters = [], []
    where = tree.args.get("where")
    for c in _conjuncts(qualify(where.this.copy()) if where else None):
        if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column) \
                and c.this.table != c.expression.table:
            equalities.append(((c.this.table, c.this.name), (c.expression.table, c.expression.name)))
        else:
            filters.append(c)
    return JoinSpec(atoms, equalities, filters, output, {t: list(w.schema[t]) for _, t in atoms})


def _note_skip(rec: dict, why: str) -> PeerResult:
    rec.update(status="skipped", reason=why)
    return PeerResult(rec)


def _bag_from_changes(bag: dict, row: tuple, k: int) -> None:
    v = bag.get(row, 0) + k
    if v:
        bag[row] = v
    else:
        bag.pop(row, None)


def _py(v: Any) -> Any:
    """A peer's output value as the plain Python value the engine reports (numpy scalars → int/float)."""
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


@dataclass
class PeerResult:
    """What a peer runner hands back to ``systems``: the record so far, the final result bag
    ``{row: multiplicity}`` (None when skipped) and the timed seconds of the whole stream."""
    rec: dict
    bag: dict | None = None
    secs: float = 0.0


# ----------------------------------------------------------------------------- pathway
_PW_OPS = {exp.LT: "__lt__", exp.LTE: "__le__", exp.GT: "__gt__", exp.GTE: "__ge__",
           exp.EQ: "__eq__", exp.NEQ: "__ne__", exp.Add: "__add__", exp.Sub: "__sub__",
           exp.Mul: "__mul__", exp.Div: "__truediv__", exp.And: "__and__", exp.Or: "__or__"}


def _pw_expr(node: exp.Expression, table: Any) -> Any:
    """A WHERE conjunct as a Pathway expression over ``table`` (columns named ``alias__col``)."""
    if isinstance(node, exp.Paren):
        return _pw_expr(node.this, table)
    if isinstance(node, exp.Column):
        return table[f"{node.table}__{node.name}"]
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return int(node.this) if node.is_int else float(node.this)
    if isinstance(node, exp.Neg):
        return -_pw_expr(node.this, table)
    if isinstance(node, exp.Not):
        return ~_pw_expr(node.this, table)
    op = _PW_OPS.get(type(node))
    if op is None:
        raise PeerUnsupported(f"predicate {node.sql()} is not translated for pathway")
    left, right = _pw_expr(node.this, table), _pw_expr(node.expression, table)
    if not hasattr(left, op) or isinstance(left, (int, float, str)):
        # a literal on the left: flip to the column side (3600 + x, 100 > x)
        flip = {"__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__", "__ge__": "__le__"}
        if op in flip:
            return getattr(right, flip[op])(left)
        return getattr(right, {"__add__": "__radd__", "__mul__": "__rmul__", "__sub__": "__rsub__",
                               "__truediv__": "__rtruediv__"}.get(op, op))(left)
    return getattr(left, op)(right)


def _pw_inputs(spec: JoinSpec, stream: list) -> dict:
    """One pandas frame per base table: the table's updates in stream order, each with its own
    even ``__time__`` (= 2 × (position in the whole stream + 1)) and ``__diff__`` ±1; the index
    is the row's id, so that a delete retracts exactly one earlier insert of the same row."""
    import pandas as pd

    # columns are named by position (c0, c1, …): pathway reserves names such as ``id``
    cols: dict[str, dict[str, list]] = {t: {f"c{i}": [] for i in range(len(spec.schema[t]))}
                                        | {"__time__": [], "__diff__": [], "__id__": []} for t in spec.schema}
    present: dict[tuple, list[int]] = {}
    next_id = 0
    for i, (t, row, k) in enumerate(stream):
        if t not in cols:
            continue
        if k > 0:
            next_id += 1
            rid = next_id
            present.setdefault((t, row), []).append(rid)
        else:
            ids = present.get((t, row))
            if not ids:
                raise RuntimeError(f"delete of an absent row {row!r} from {t}")
            rid = ids.pop()
        d = cols[t]
        for i_col, v in enumerate(row):
            d[f"c{i_col}"].append(v)
        d["__time__"].append(2 * (i + 1))
        d["__diff__"].append(1 if k > 0 else -1)
        d["__id__"].append(rid)
    frames = {}
    for t, d in cols.items():
        ids = d.pop("__id__")
        frames[t] = pd.DataFrame(d, index=ids)
    return frames


def run_pathway(w: Workload, stream: list, probe: Any) -> PeerResult:
    """Pathway: the stream as 1-update epochs, the join written with Pathway's table API."""
    import pathway as pw
    from pathway.internals.parse_graph import G

    rec: dict = {"status": "ok", "pathway_version": pw.__version__,
                 "mode": "Pathway dataflow, one logical time (minibatch) per update",
                 "delivery": "input: pw.debug.table_from_pandas with __time__ = one even timestamp per update "
                             "and __diff__ = ±1 (each update is its own epoch, processed in order); timed: "
                             "pw.run — loading the input, every epoch, every output change delivered to Python "
                             "by pw.io.subscribe; not timed: building the frames and the dataflow"}
    try:
        spec = join_spec(w)
    except PeerUnsupported as e:
        return _note_skip(rec, f"not translated for pathway: {e}")
    G.clear()
    frames = _pw_inputs(spec, stream)
    base = {}
    for t, df in frames.items():
        if df.empty:  # an empty frame has no dtypes: give the schema explicitly
            first = {}
            for tt, row, _ in stream:
                if tt == t:
                    first = dict(zip(spec.schema[t], row))
                    break
            base[t] = pw.Table.empty(**{f"c{i}": type(first.get(c, 0)) for i, c in enumerate(spec.schema[t])})
        else:
            base[t] = pw.debug.table_from_pandas(df)
    atoms = {}
    for alias, t in spec.atoms:
        tb = base[t]
        atoms[alias] = tb.select(**{f"{alias}__{c}": tb[f"c{i}"] for i, c in enumerate(spec.schema[t])})
    applied: set[int] = set()

    def apply_filters(table: Any, joined: set[str]) -> Any:
        for i, f in enumerate(spec.filters):
            if i not in applied and spec.aliases_of(f) <= joined:
                applied.add(i)
                table = table.filter(_pw_expr(f, table))
        return table

    for alias, tb in list(atoms.items()):  # single-atom filters first (S1.amnt < 100)
        atoms[alias] = apply_filters(tb, {alias})
    order = [spec.atoms[0][0]]
    joined = atoms[order[0]]
    rest = [a for a, _ in spec.atoms[1:]]
    plan = []
    while rest:
        done_set = set(order)
        nxt = next((a for a in rest if any((x[0] in done_set and y[0] == a) or (y[0] in done_set and x[0] == a)
                                           for x, y in spec.equalities)), rest[0])
        rest.remove(nxt)
        right = atoms[nxt]
        conds = []
        for x, y in spec.equalities:
            if x[0] in done_set and y[0] == nxt:
                conds.append(joined[f"{x[0]}__{x[1]}"] == right[f"{y[0]}__{y[1]}"])
            elif y[0] in done_set and x[0] == nxt:
                conds.append(joined[f"{y[0]}__{y[1]}"] == right[f"{x[0]}__{x[1]}"])
        plan.append(f"join {nxt} on {len(conds)} equalities" if conds else f"cross join {nxt}")
        joined = joined.join(right, *conds).select(*pw.left, *pw.right)
        order.append(nxt)
        joined = apply_filters(joined, set(order))
    if len(applied) != len(spec.filters):
        raise RuntimeError("a filter was not placed")
    out_names = [f"o{i}" for i in range(len(spec.output))]
    result = joined.select(**{n: joined[f"{a}__{c}"] for n, (a, c) in zip(out_names, spec.output)})
    rec["plan"] = f"{order[0]}, " + ", ".join(plan) if plan else order[0]
    bag: dict[tuple, int] = {}
    changes = [0]

    def on_change(key: Any, row: dict, time: int, is_addition: bool) -> None:
        changes[0] += 1
        r = tuple(_py(row[n]) for n in out_names)
        _bag_from_changes(bag, r, 1 if is_addition else -1)

    t_start = [0.0]

    def on_time_end(time: int) -> None:
        probe.tick(min(len(stream), time // 2), _now() - t_start[0])

    pw.io.subscribe(result, on_change=on_change, on_time_end=on_time_end)
    gc.collect()
    t_start[0] = _now()
    pw.run(monitoring_level=pw.MonitoringLevel.NONE, default_logging=False)
    secs = _now() - t_start[0]
    rec["output_changes"] = changes[0]
    probe.maintained(rec)
    G.clear()
    return PeerResult(rec, bag, secs)


# ----------------------------------------------------------------------------- flink
def flink_sql(spec: JoinSpec) -> str:
    """The workload's query re-printed for Flink SQL: quoted identifiers, the output columns
    named ``o0 …`` (SELECT * of a self-join would repeat names), the same WHERE conjuncts."""
    def q(name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    sel = ", ".join(f"{q(a)}.{q(c)} AS {q(f'o{i}')}" for i, (a, c) in enumerate(spec.output))
    frm = ", ".join(f"{q(t)} AS {q(a)}" for a, t in spec.atoms)
    conds = [f"{q(x[0])}.{q(x[1])} = {q(y[0])}.{q(y[1])}" for x, y in spec.equalities]
    conds += [f.sql(dialect="spark", identify=True) for f in spec.filters]
    return f"SELECT {sel} FROM {frm}" + (" WHERE " + " AND ".join(conds) if conds else "")


def _flink_type(v: Any) -> Any:
    from pyflink.common import Types

    if isinstance(v, bool):
        return Types.BOOLEAN()
    if isinstance(v, int):
        return Types.LONG()
    if isinstance(v, float):
        return Types.DOUBLE()
    return Types.STRING()


def _jvm_rss_mb() -> float | None:
    import psutil

    try:
        kids = psutil.Process().children(recursive=True)
        return round(sum(k.memory_info().rss for k in kids) / 2**20, 2) if kids else None
    except psutil.Error:
        return None


def run_flink(w: Workload, stream: list, probe: Any) -> PeerResult:
    """Flink: a regular join in streaming mode over changelog sources, result collected."""
    from pyflink.common import Row, Types
    from pyflink.common.types import RowKind
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import EnvironmentSettings, StreamTableEnvironment

    rec: dict = {"status": "ok", "mode": "Flink SQL regular join, streaming mode, parallelism 1",
                 "delivery": "per base table a changelog stream (from_collection of Row.of_kind(INSERT|DELETE) "
                             "in stream order → from_changelog_stream); timed: building those sources from the "
                             "Python rows, job submission incl. its local mini-cluster start, processing, and "
                             "collecting every output change into Python (execute().collect()); not timed: "
                             "starting the JVM/table environment (startup_s) and two runs of the same job on empty "
                             "inputs: a cold one (warmup_job_s) and a warm one (empty_job_s = the fixed "
                             "per-job cost inside the timed figure; marginal_us_per_update = (stream_s − "
                             "empty_job_s) / updates)"}
    try:
        spec = join_spec(w)
    except PeerUnsupported as e:
        return _note_skip(rec, f"not translated for flink: {e}")
    sql = flink_sql(spec)
    rec["flink_sql"] = sql
    t0 = _now()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    tenv = StreamTableEnvironment.create(env, environment_settings=EnvironmentSettings.in_streaming_mode())
    rec["startup_s"] = round(_now() - t0, 3)
    first: dict = {}
    for t, row, _ in stream:
        first.setdefault(t, row)
    types = {t: Types.ROW_NAMED(cols, [_flink_type(first[t][i]) if t in first else Types.LONG()
                                       for i in range(len(cols))])
             for t, cols in spec.schema.items()}
    by_table: dict[str, list] = {t: [] for t in spec.schema}
    for t, row, k in stream:
        if t in by_table:
            by_table[t].append((row, k))

    sources_s = [0.0]

    def job(updates: dict[str, list]) -> tuple[dict, int]:
        a = _now()
        for t, ups in updates.items():
            rows = [Row.of_kind(RowKind.INSERT if k > 0 else RowKind.DELETE, *row) for row, k in ups]
            ds = env.from_collection(rows, type_info=types[t])
            tenv.create_temporary_view(t, tenv.from_changelog_stream(ds))
        sources_s[0] = _now() - a
        bag: dict[tuple, int] = {}
        n_changes = 0
        with tenv.sql_query(sql).execute().collect() as it:
            for r in it:
                kind = r.get_row_kind()
                sign = 1 if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER) else -1
                _bag_from_changes(bag, tuple(r), sign)
                n_changes += 1
        for t in updates:
            tenv.drop_temporary_view(t)
        return bag, n_changes

    t0 = _now()
    job({t: [] for t in spec.schema})  # the first job in a JVM also loads and JITs Flink
    rec["warmup_job_s"] = round(_now() - t0, 3)
    t0 = _now()
    job({t: [] for t in spec.schema})  # a warm job with nothing to do: the fixed cost per job
    rec["empty_job_s"] = round(_now() - t0, 3)
    gc.collect()
    t0 = _now()
    probe.tick(0, 0.0)
    bag, n_changes = job(by_table)
    secs = _now() - t0
    if stream:  # an estimate: the timed job minus a warm empty job, per update
        rec["marginal_us_per_update"] = round(max(0.0, secs - rec["empty_job_s"]) / len(stream) * 1e6, 3)
    rec["sources_s"] = round(sources_s[0], 3)  # part of stream_s: Python rows → Flink sources
    rec["output_changes"] = n_changes
    probe.maintained(rec)
    rec["jvm_rss_mb"] = _jvm_rss_mb()
    return PeerResult(rec, bag, secs)


def _now() -> float:
    return time.perf_counter()


RUNNERS = {"pathway": run_pathway, "flink": run_flink}
