"""``--shards N``: route changes to N engines so that the union of their outputs is the view.

Every atom (table occurrence) of a view gets its own input table in the shard engines
(``ivm_a<i>_<table>``: the view's SQL is rewritten so each FROM item reads its own table),
so a row of a self-joined table is routed per occurrence. Then, per view:

- **hash**: when some variables are shared by *all* atoms (``r.k = s.k = t.k``), a row goes
  to the one shard ``H(its values of those variables) mod N``; every output tuple agrees
  on them, so all its rows meet in exactly one shard.
- **grid** (HyperCube over atoms, covers pure inequality joins): ``N = p_1 ⋯ p_n``; a row
  of atom i has coordinate ``H(row) mod p_i`` and is replicated to every cell with that
  coordinate; the output tuple ``(r_1, …, r_n)`` is produced only in the cell
  ``(H(r_1) mod p_1, …, H(r_n) mod p_n)``.

``H`` is a stable digest of canonical values (equal numbers of different Python types hash
alike), not Python's per-process ``hash``. DISTINCT and aggregate views are not split (their
rows would be counted once per shard) and are refused with ``--shards > 1``.

On Spark (:mod:`.shardsource`), the changes are routed where the source plans a batch, into
one input partition per shard; the Python worker reading a partition applies it to the
shard's engines, which it keeps in memory between batches (state logged per batch to the
checkpoint directory, so any worker can take a shard over): no shuffle, no state store.
:class:`ShardSinkWriter` merges the shards' outputs per view and writes the sinks.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Iterable, Iterator
from decimal import Decimal

import sqlglot
from sqlglot import exp

from ..compile import compile_view
from ..errors import IVMError
from .state import ViewDef


def canonical(v) -> bytes:
    """A byte string equal for values the engine considers equal (1 == 1.0 == Decimal('1'))."""
    if v is None:
        return b"n"
    if isinstance(v, bool):
        return b"b1" if v else b"b0"
    if isinstance(v, (int, float, Decimal)):
        try:
            if v == int(v):
                return b"i" + str(int(v)).encode()
        except (OverflowError, ValueError):  # inf, nan
            pass
        return b"f" + repr(float(v)).encode()
    if isinstance(v, str):
        return b"s" + v.encode()
    return b"r" + repr(v).encode()


def stable_hash(values: Iterable) -> int:
    h = hashlib.blake2b(digest_size=8)
    for v in values:
        c = canonical(v)
        h.update(len(c).to_bytes(4, "little"))
        h.update(c)
    return int.from_bytes(h.digest(), "little")


def atom_table(i: int, table: str) -> str:
    return f"ivm_a{i}_{table}"


def rewrite_per_atom(select_sql: str) -> tuple[str, list[str]]:
    """The SELECT with its i-th FROM item reading ``ivm_a<i>_<table>`` (aliased as before);
    returns the SQL and the original table of each FROM item."""
    tree = sqlglot.parse_one(select_sql, read="postgres")
    tables: list[str] = []
    for i, node in enumerate(tree.find_all(exp.Table)):
        name = node.name.lower()
        alias = node.alias or node.name
        tables.append(name)
        node.set("this", exp.to_identifier(atom_table(i, name)))
        node.set("db", None)
        node.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return tree.sql(dialect="postgres"), tables


def grid_shares(n_atoms: int, shards: int) -> list[int]:
    """Split ``shards`` into per-atom shares whose product is ``shards`` (prime factors dealt
    to the atoms with the smallest share)."""
    shares = [1] * n_atoms
    f, rest = 2, shards
    factors = []
    while rest > 1:
        while rest % f == 0:
            factors.append(f)
            rest //= f
        f += 1
    for p in sorted(factors, reverse=True):
        i = min(range(n_atoms), key=lambda j: shares[j])
        shares[i] *= p
    return shares


class ViewRouter:
    """Routing of one view's base-table changes to ``shards`` engines."""

    def __init__(self, d: ViewDef, schema: dict[str, dict[str, str]], shards: int):
        sql, tables = rewrite_per_atom(d.select_sql)
        self.shards = shards
        self.atom_schema = {atom_table(i, t): dict(schema[t]) for i, t in enumerate(tables)}
        view = compile_view(sql, self.atom_schema, dialect="postgres")
        gcq = view.plan.gcq
        if gcq.distinct or gcq.aggregate is not None:
            raise IVMError(f"view {d.name}: DISTINCT and aggregate views cannot be split over "
                           "shards yet; run it with --shards 1")
        self.defn = ViewDef(d.name, sql, d.materialized, list(self.atom_schema))
        atoms = gcq.atoms
        common = set.intersection(*(set(a.varset) for a in atoms)) if atoms else set()
        self.mode = "hash" if common and shards > 1 else "grid"
        self.by_table: dict[str, list[tuple[str, object]]] = {}
        shares = grid_shares(len(atoms), shards)
        strides, s = [], 1
        for p in shares:
            strides.append(s)
            s *= p
        self.shares = shares
        for i, a in enumerate(atoms):
            base = a.relation.split("_", 2)[2]
            if self.mode == "hash":
                pos = [a.vars.index(v) for v in sorted(common)]
                spec = ("hash", pos)
            else:
                others = [c for c in range(shards) if (c // strides[i]) % shares[i] == 0]
                spec = ("grid", (shares[i], strides[i], others))
            self.by_table.setdefault(base, []).append((a.relation, spec))
        #: an output row tells its shard (it holds the hashed columns): the shards' changes
        #: are disjoint and their union needs no consolidation
        out = list(gcq.output or [])
        plain = bool(out) and all(isinstance(o, str) for o in out)
        if self.mode == "hash":
            self.disjoint = plain and common <= set(out)
        else:
            self.disjoint = plain and all(
                set(a.vars) <= set(out) and len(a.vars) == len(self.atom_schema[a.relation])
                for a, p in zip(atoms, shares) if p > 1)

    def route(self, table: str, row: tuple | None) -> Iterator[tuple[int, str]]:
        """``(shard, atom table)`` pairs a change of ``table`` goes to (``row is None``: a
        TRUNCATE, which goes everywhere the table is)."""
        for atab, (kind, arg) in self.by_table.get(table, ()):
            if row is None:
                for s in range(self.shards):
                    yield s, atab
            elif kind == "hash":
                yield stable_hash(row[p] for p in arg) % self.shards, atab
            else:
                share, stride, others = arg
                coord = stable_hash(row) % share
                for base_cell in others:
                    yield base_cell + coord * stride, atab


def merge_changes(parts: list[list[tuple[tuple, int]]], disjoint: bool = False) -> list[tuple[tuple, int]]:
    """One view's change from its shards' changes (each already consolidated; a row may come
    from several shards when the view projects the columns that tell them apart, unless
    ``disjoint``)."""
    if len(parts) == 1:
        return parts[0]
    if disjoint:
        return [x for part in parts for x in part]
    d = dict(parts[0])
    for part in parts[1:]:
        for row, k in part:
            n = d.get(row, 0) + k
            if n:
                d[row] = n
            else:
                del d[row]
    return list(d.items())


class ShardSinkWriter:
    """``foreachBatch`` over the shards' output: consolidate per view, write the sinks."""

    def __init__(self, sinks, status, view_names: list[str], disjoint: set[str] | None = None):
        self.sinks, self.status, self.views = sinks, status, view_names
        self.disjoint = disjoint or set()   # views whose shards' changes never share a row
        self.spark = None   # the daemon's session (its streams hold the query's progress)

    def __call__(self, df, batch_id: int) -> None:
        import time

        from .pgsource import lsn_text

        t0 = time.monotonic()
        prev = previous_progress(self.spark or df.sparkSession)
        frame = df.toArrow().to_pydict()
        t_spark = time.monotonic()
        parts: dict[str, list] = {v: [] for v in self.views}
        rows_in, lsn, ts = 0, None, None
        work, catchup = [0.0], [0.0]
        for view, raw, delta, l_, t_, w_, c_ in zip(frame["view"], frame["changes"], frame["delta"], frame["lsn"],
                                                    frame["ts"], frame["work"], frame["catchup"]):
            if view is None:
                rows_in += delta
                work.append(w_ or 0.0)
                catchup.append(c_ or 0.0)
                if l_ is not None:
                    lsn = l_ if lsn is None else max(lsn, l_)
                if t_ is not None and not math.isnan(t_):
                    ts = t_ if ts is None else max(ts, t_)
            else:
                parts[view].append(pickle.loads(raw))
        changes = {v: merge_changes(p, v in self.disjoint) for v, p in parts.items() if p}
        changes = {v: c for v, c in changes.items() if c}
        t_merge = time.monotonic()
        for s in self.sinks:
            s.write(batch_id, changes)
        n_out = sum(len(c) for c in changes.values())
        t_end = time.monotonic()
        secs = t_end - t0
        # the Spark jobs (read, route, shards) run inside toArrow; then the merge, the sinks
        split = {"spark": round(t_spark - t0, 3), "merge": round(t_merge - t_spark, 3),
                 "sinks": round(t_end - t_merge, 3),
                 # inside "spark": the longest shard task, the engines' catching up in all tasks
                 "longest_task": round(max(work), 3), "catch_up": round(sum(catchup), 3)}
        behind = round(max(0.0, time.time() - ts), 3) if ts else 0.0
        import logging

        logging.getLogger("ivm.daemon").warning(
            "batch %d: %d routed rows in, %d view changes out, LSN %s, %.3f s behind, %.3f s, "
            "%s changes/s (%s)", batch_id, rows_in, n_out, lsn_text(lsn) if lsn is not None else None,
            behind, secs, round(rows_in / secs) if secs > 0 else None,
            ", ".join(f"{k} {v:.3f} s" for k, v in split.items()))
        if prev:
            logging.getLogger("ivm.daemon").warning("batch %d: the previous batch in Spark: %s", batch_id, prev)
        if self.status is not None:
            self.status.batch(batch_id=batch_id, rows_in=rows_in, changes_out=n_out, lsn=lsn,
                              lsn_text=lsn_text(lsn) if lsn is not None else None,
                              seconds_behind=behind, seconds=secs, split=split,
                              changes_per_s=round(rows_in / secs) if secs > 0 else None)


def previous_progress(spark) -> str | None:
    """The previous micro-batch's ``durationMs`` and state-operator timings (for the log)."""
    try:
        for q in spark.streams.active:
            p = q.lastProgress
            if p:
                ops = [{k: o.get(k) for k in ("numRowsTotal", "commitTimeMs", "allUpdatesTimeMs",
                                                "allRemovalsTimeMs") if k in o} for o in p.get("stateOperators", [])]
                return f"durationMs {p.get('durationMs')} state {ops}"
    except Exception:  # noqa: BLE001 - only diagnostics
        return None
    return None


def sharded_writer(spark, reader, cfg, defs: list[ViewDef], pg_schema: dict, sinks, status):
    """The streaming writer for ``--shards N``: ``reader`` (the ``ivm-cdc`` reader with its
    options) read as ``ivm-cdc-shards`` (partitions = shards, engines in the Python workers,
    :mod:`.shardsource`) → sinks."""
    from .shardsource import register, shard_spec
    from .sinks import view_layout
    from .state import compile_defs

    types = {t: {c: ty for c, ty, _ in cols} for t, cols in pg_schema.items()}
    # refuse what cannot be split before anything starts
    disjoint = {d.name for d in defs if ViewRouter(d, types, cfg.shards).disjoint}
    # the sinks' layouts come from the unrewritten views (same columns, same types)
    views = compile_defs(defs, types)
    layouts = {d.name: view_layout(views[d.name], pg_schema, d.types) for d in defs}
    import os

    fresh = not os.path.isdir(os.path.join(cfg.checkpoint, "spark", "commits")) or \
        not os.listdir(os.path.join(cfg.checkpoint, "spark", "commits"))
    for s in sinks:
        s.prepare(layouts, fresh=fresh)
    register(spark)
    df = (reader.format("ivm-cdc-shards")
          .option("shardSpec", shard_spec(defs, types, cfg.shards, cfg.checkpoint, cfg.snapshot_every))
          .load())
    writer = ShardSinkWriter(sinks, status, [d.name for d in defs], disjoint)
    writer.spark = spark
    return df.writeStream.foreachBatch(writer)
