"""The routing plan of a sharded checkpoint: ``<checkpoint>/shards/routing.json``.

The first start of a checkpoint with ``--shards N`` estimates the tables' sizes
(``pg_class.reltuples``, or ``count(*)`` for a table never analysed: one scan per table, at
the first start only), chooses each view's shares (:mod:`.shares`) and writes them here,
before any batch is planned. Every later start routes by the recorded shares — never by
sizes read again — so a restarted daemon sends each row to the shards that hold its
earlier copies. A checkpoint whose plan does not match the views or the shard count is
refused (its shards' state was split differently).
"""

from __future__ import annotations

import json
import os

from ..errors import IVMError
from .routing import ViewRouter
from .state import ViewDef, write_atomic

VERSION = 1


def plan_path(checkpoint: str) -> str:
    return os.path.join(checkpoint, "shards", "routing.json")


def table_sizes(url: str, tables: list[str]) -> dict[str, float]:
    """Estimated rows per table: the planner's statistics, else an exact count."""
    from ..io.postgres.replication import connect

    conn = connect(url)
    try:
        out: dict[str, float] = {}
        for t in tables:
            est = conn.execute("SELECT c.reltuples FROM pg_class c WHERE c.oid = %s::regclass", [t]).fetchone()
            if est is not None and est[0] is not None and est[0] >= 0:
                out[t] = float(est[0])
            else:
                from psycopg import sql

                out[t] = float(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                    sql.Identifier(t))).fetchone()[0])
        return out
    finally:
        conn.close()


def load_or_choose(checkpoint: str, defs: list[ViewDef], types: dict, shards: int,
                   sizes=None) -> tuple[dict[str, dict[str, int]], dict]:
    """Each view's shares: the recorded ones, else chosen from ``sizes()`` (called only then)
    and recorded. Returns ``(shares per view, the plan file's content)``."""
    path = plan_path(checkpoint)
    views = {d.name: d.select_sql for d in defs}
    if os.path.exists(path):
        with open(path) as f:
            plan = json.load(f)
        recorded = {v["name"]: v for v in plan.get("views", [])}
        if plan.get("shards") != shards or set(recorded) != set(views) or \
                any(recorded[n]["sql"] != sql for n, sql in views.items()):
            raise IVMError(f"the checkpoint {checkpoint} was started with {plan.get('shards')} shard(s) "
                           f"and the views {sorted(recorded)}; its shards' state is split for those: "
                           "start with the same --shards and views, or with a new --checkpoint")
        return {n: dict(recorded[n]["shares"]) for n in views}, plan
    shard_dir = os.path.join(checkpoint, "shards")
    if os.path.isdir(shard_dir) and any(n != "routing.json" for n in os.listdir(shard_dir)):
        raise IVMError(f"the checkpoint {checkpoint} holds shard state of an older version (routed by "
                       "table occurrences, with no routing plan): start with a new --checkpoint")
    table_rows = sizes() if sizes is not None else {}
    out, entries = {}, []
    for d in defs:
        r = ViewRouter(d, types, shards, sizes=table_rows)
        out[d.name] = r.shares
        entries.append({"name": d.name, "sql": d.select_sql, "shares": r.shares, "scheme": r.scheme})
    plan = {"version": VERSION, "shards": shards, "table_rows": table_rows, "views": entries}
    os.makedirs(shard_dir, exist_ok=True)
    write_atomic(path, json.dumps(plan, indent=1).encode())
    return out, plan


def explain(cfg) -> str:
    """``ivm daemon --explain``: each view's routing over ``--shards`` (the checkpoint's recorded
    plan if it has one, else the one a first start would choose now), without starting Spark."""
    from ..io.postgres.snapshot import read_schema
    from .state import parse_views

    with open(cfg.views) as f:
        defs = parse_views(f.read())
    tables = sorted({t for d in defs for t in d.tables})
    types = {t: {c: ty for c, ty, _ in cols} for t, cols in read_schema(cfg.source, tables).items()}
    path = plan_path(cfg.checkpoint) if cfg.checkpoint else None
    if path and os.path.exists(path):
        with open(path) as f:
            plan = json.load(f)
        recorded = {v["name"]: v["shares"] for v in plan.get("views", [])}
        head = f"routing recorded in {path} ({plan.get('shards')} shards)"
        shards, sizes = plan.get("shards"), plan.get("table_rows") or {}
    else:
        recorded, shards, sizes = {}, cfg.shards, table_sizes(cfg.source, tables)
        head = f"routing a first start would choose for {shards} shard(s)"
    lines = [head + ", table rows: " + ", ".join(f"{t} {int(n)}" for t, n in sorted(sizes.items()))]
    for d in defs:
        r = ViewRouter(d, types, shards, shares=recorded.get(d.name), sizes=sizes)
        lines.append(f"view {d.name}: shares {r.shares or 'none (one shard)'}")
        lines += [f"  {x}" for x in r.scheme]
    return "\n".join(lines)
