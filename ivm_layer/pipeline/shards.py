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

On Spark, routed rows are grouped by a key per (view, shard) (:func:`shard_keys`: keys that
Spark places in distinct shuffle partitions, so shards run as parallel tasks) into
``transformWithStateInPandas``; each key keeps its state in the RocksDB state store as a
snapshot of base rows plus a list of per-batch deltas (compacted into the snapshot every
``snapshot_every`` batches), and each Python worker caches its engine per key with the number
of batches it applied: a batch on a worker that ran the shard's previous batch applies just
its changes; on a worker that ran an earlier one, the cached engine first applies the logged
batches it missed; only a worker without it (or behind the last snapshot) rebuilds the shard.
Routing runs on Arrow batches (``mapInArrow``: the routed rows are taken from the source
columns with ``take``, the pickled row bytes are passed on as they are).
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


# -- Spark ------------------------------------------------------------------------------
_CACHE: dict[tuple, tuple[int, object]] = {}   # per Python worker: (ckpt, key) → (n, EngineState)


def worker_cache() -> dict[tuple, tuple[int, object]]:
    """This Python worker's engines. (The processor class is shipped by value, with copies of
    the globals it names; a module-level function is shipped by reference, so the dict it
    returns is the one of the worker's imported module, which lives across tasks.)"""
    return _CACHE

ROUTED_SCHEMA = "key INT, lsn BIGINT, seq INT, ts DOUBLE, tbl STRING, sign INT, row BINARY"
#: per shard and batch: one row per view with its change (pickled as one list; ``delta`` = its
#: length) and one bookkeeping row (``view`` NULL, ``delta`` = the rows routed to the shard)
OUT_SCHEMA = "key INT, view STRING, changes BINARY, delta BIGINT, lsn BIGINT, ts DOUBLE"


def shard_keys(spark, checkpoint: str, n_views: int, shards: int, fresh: bool) -> list[list[int]]:
    """The grouping key of each (view, shard): ``keys[view][shard]``.

    Spark places a key in shuffle partition ``pmod(hash(key), P)`` (Murmur3 of the INT), so the
    keys ``0 … n-1`` may share partitions (with P = 2, keys 0 and 1 both land in partition 1:
    one task runs both shards, and a second machine adds nothing). The keys are chosen so that
    the i-th (view, shard) lands in partition ``i mod P``, asking Spark's own ``hash`` (a
    literal query, no job), and kept in ``<checkpoint>/shard-keys.json`` (a restart must use
    the keys its state is stored under; a checkpoint written before the file existed keeps
    the keys ``view * shards + shard`` it used)."""
    import json
    import os

    from .state import write_atomic

    path = os.path.join(checkpoint, "shard-keys.json")
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)["keys"]
    if not fresh:
        return [[vi * shards + s for s in range(shards)] for vi in range(n_views)]
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    need = n_views * shards
    cands = range(max(64, 16 * need))
    rows = spark.sql(f"SELECT k, pmod(hash(k), {parts}) AS p FROM VALUES "
                     + ", ".join(f"({k})" for k in cands) + " AS t(k)").collect()
    free: dict[int, list[int]] = {}
    for k, p in rows:
        free.setdefault(int(p), []).append(int(k))
    flat = [free[i % parts].pop(0) if free.get(i % parts) else max(cands) + 1 + i for i in range(need)]
    keys = [flat[vi * shards:(vi + 1) * shards] for vi in range(n_views)]
    write_atomic(path, json.dumps({"partitions": parts, "keys": keys}).encode())
    return keys


def make_route_fn(routers: list[ViewRouter], keys: list[list[int]]):
    def route(batches):
        import pyarrow as pa

        names = ("key", "lsn", "seq", "ts", "tbl", "sign", "row")
        types = (pa.int32(), pa.int64(), pa.int32(), pa.float64(), pa.string(), pa.int32(), pa.binary())
        loads = pickle.loads
        for b in batches:
            cols = b.to_pydict()
            out_keys: list[int] = []
            picked: list[int] = []   # index of the source row of each routed row
            tbls: list[str] = []
            for i, (tbl, raw) in enumerate(zip(cols["tbl"], cols["row"])):
                row = None if raw is None else loads(raw)
                for vi, r in enumerate(routers):
                    for shard, atab in r.route(tbl, row):
                        out_keys.append(keys[vi][shard])
                        picked.append(i)
                        tbls.append(atab)
            idx = pa.array(picked, pa.int64())
            arrays = [pa.array(out_keys, pa.int32()), b.column("lsn").take(idx), b.column("seq").take(idx),
                      b.column("ts").take(idx), pa.array(tbls, pa.string()), b.column("sign").take(idx),
                      b.column("row").take(idx)]
            yield pa.RecordBatch.from_arrays([a.cast(t) for a, t in zip(arrays, types)], names=list(names))
    return route


def make_processor(routers: list[ViewRouter], keys: list[list[int]], ckpt: str, snapshot_every: int):
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    view_of = {k: vi for vi, ks in enumerate(keys) for k in ks}

    class ShardProcessor(StatefulProcessor):
        """One view's engine for one shard, state = snapshot + delta log in RocksDB."""

        def init(self, handle) -> None:
            self.n = handle.getValueState("n", "n BIGINT")
            self.snap = handle.getValueState("snap", "data BINARY")
            self.log = handle.getListState("log", "data BINARY")

        def _engine(self, key: int):
            """The shard's engine after ``n`` batches: this worker's cached one, brought up to
            date from the log when another worker ran the shard's last batches (the log holds
            the batches since the last snapshot, which is at ``n - n % snapshot_every``), else
            rebuilt from the snapshot and the log."""
            from .state import EngineState, decode_changes

            n = self.n.get()
            n = n[0] if n else 0
            cached = worker_cache().pop((ckpt, key), None)
            if cached is not None and cached[0] == n:
                return n, cached[1]
            base = n - n % snapshot_every
            if cached is not None and base <= cached[0] < n:
                st = cached[1]
                for i, (data,) in enumerate(self.log.get()):
                    if base + i >= cached[0]:
                        st.apply(decode_changes(data))
                return n, st
            r = routers[view_of[key]]
            st = EngineState([r.defn], r.atom_schema)
            snap = self.snap.get()
            if snap:
                st.load(snap[0])
            if self.log.exists():
                for (data,) in self.log.get():
                    st.apply(decode_changes(data))
            return n, st

        def handleInputRows(self, key, rows, timerValues):
            import pandas as pd

            from .state import batch_changes, encode_changes

            k = int(key[0])
            n, st = self._engine(k)   # out of the cache until this batch is through
            items = []
            stamps: list[float] = []
            loads = pickle.loads
            for pdf in rows:
                stamps += [t for t in pdf["ts"].dropna().tolist()]
                items += [(l_, s_, tb, sg, None if raw is None else loads(raw))
                          for l_, s_, tb, sg, raw in zip(pdf["lsn"].tolist(), pdf["seq"].tolist(),
                                                         pdf["tbl"].tolist(), pdf["sign"].tolist(),
                                                         pdf["row"].tolist())]
            lsn = max((x[0] for x in items), default=None)
            ts = max(stamps) if stamps else None
            items.sort(key=lambda x: (x[0], x[1]))
            changes = batch_changes(items, st.base)
            out = st.apply(changes)
            data = encode_changes(changes)
            if (n + 1) % snapshot_every == 0:  # the log holds the batches since the last multiple
                self.snap.update((st.dump(),))
                self.log.clear()
            else:
                self.log.appendValue((data,))
            self.n.update((n + 1,))
            worker_cache()[(ckpt, k)] = (n + 1, st)
            res = {"key": [], "view": [], "changes": [], "delta": [], "lsn": [], "ts": []}
            for view, change in [*out.items(), (None, None)]:
                if view is not None and not change:
                    continue
                res["key"].append(k)
                res["view"].append(view)
                res["changes"].append(None if change is None else
                                      pickle.dumps(list(change), protocol=pickle.HIGHEST_PROTOCOL))
                # the bookkeeping row (view None): rows in, batch LSN, commit time
                res["delta"].append(len(items) if change is None else len(change))
                res["lsn"].append(lsn)
                res["ts"].append(ts)
            yield pd.DataFrame(res)

        def close(self) -> None:
            pass

    return ShardProcessor()


def merge_changes(parts: list[list[tuple[tuple, int]]]) -> list[tuple[tuple, int]]:
    """One view's change from its shards' changes (each already consolidated; a row may come
    from several shards when the view projects the columns that tell them apart)."""
    if len(parts) == 1:
        return parts[0]
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

    def __init__(self, sinks, status, view_names: list[str]):
        self.sinks, self.status, self.views = sinks, status, view_names

    def __call__(self, df, batch_id: int) -> None:
        import time

        from .pgsource import lsn_text

        t0 = time.monotonic()
        frame = df.toArrow().to_pydict()
        t_spark = time.monotonic()
        parts: dict[str, list] = {v: [] for v in self.views}
        rows_in, lsn, ts = 0, None, None
        for view, raw, delta, l_, t_ in zip(frame["view"], frame["changes"], frame["delta"], frame["lsn"],
                                            frame["ts"]):
            if view is None:
                rows_in += delta
                if l_ is not None:
                    lsn = l_ if lsn is None else max(lsn, l_)
                if t_ is not None and not math.isnan(t_):
                    ts = t_ if ts is None else max(ts, t_)
            else:
                parts[view].append(pickle.loads(raw))
        changes = {v: merge_changes(p) for v, p in parts.items() if p}
        changes = {v: c for v, c in changes.items() if c}
        t_merge = time.monotonic()
        for s in self.sinks:
            s.write(batch_id, changes)
        n_out = sum(len(c) for c in changes.values())
        t_end = time.monotonic()
        secs = t_end - t0
        # the Spark jobs (read, route, shards) run inside toArrow; then the merge, the sinks
        split = {"spark": round(t_spark - t0, 3), "merge": round(t_merge - t_spark, 3),
                 "sinks": round(t_end - t_merge, 3)}
        behind = round(max(0.0, time.time() - ts), 3) if ts else 0.0
        import logging

        logging.getLogger("ivm.daemon").warning(
            "batch %d: %d routed rows in, %d view changes out, LSN %s, %.3f s behind, %.3f s, "
            "%s changes/s (%s)", batch_id, rows_in, n_out, lsn_text(lsn) if lsn is not None else None,
            behind, secs, round(rows_in / secs) if secs > 0 else None,
            ", ".join(f"{k} {v:.3f} s" for k, v in split.items()))
        if self.status is not None:
            self.status.batch(batch_id=batch_id, rows_in=rows_in, changes_out=n_out, lsn=lsn,
                              lsn_text=lsn_text(lsn) if lsn is not None else None,
                              seconds_behind=behind, seconds=secs, split=split,
                              changes_per_s=round(rows_in / secs) if secs > 0 else None)


def sharded_writer(spark, df, cfg, defs: list[ViewDef], pg_schema: dict, sinks, status):
    """The streaming writer for ``--shards N``: route → transformWithStateInPandas → sinks."""
    from .sinks import view_layout

    types = {t: {c: ty for c, ty, _ in cols} for t, cols in pg_schema.items()}
    routers = [ViewRouter(d, types, cfg.shards) for d in defs]
    # the sinks' layouts come from the unrewritten views (same columns, same types)
    from .state import compile_defs

    views = compile_defs(defs, types)
    layouts = {d.name: view_layout(views[d.name], pg_schema, d.types) for d in defs}
    import os

    fresh = not os.path.isdir(os.path.join(cfg.checkpoint, "spark", "commits")) or \
        not os.listdir(os.path.join(cfg.checkpoint, "spark", "commits"))
    for s in sinks:
        s.prepare(layouts, fresh=fresh)
    keys = shard_keys(spark, cfg.checkpoint, len(routers), cfg.shards, fresh)
    routed = (df.select("lsn", "seq", df["ts"].cast("double").alias("ts"), "tbl", "sign", "row")
              .mapInArrow(make_route_fn(routers, keys), ROUTED_SCHEMA))
    out = (routed.groupBy("key")
           .transformWithStateInPandas(make_processor(routers, keys, cfg.checkpoint, cfg.snapshot_every),
                                       OUT_SCHEMA, "Append", "None"))
    return out.writeStream.foreachBatch(ShardSinkWriter(sinks, status, [d.name for d in defs]))
