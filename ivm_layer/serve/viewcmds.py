"""The incremental-view statements: ``SHOW INCREMENTAL VIEWS``, ``EXPLAIN INCREMENTAL VIEW v``,
``SUBSCRIBE v`` (its set-up; the stream itself is :mod:`.subscribe`).

Shared by both backends: each offers ``session``, ``views``, ``gate``, ``hub``,
``progress()``, ``input_types(vs)``, ``max_backlog`` and ``spool_rows``.
"""

from __future__ import annotations

from decimal import Decimal

from ..session.duckdb.views import is_parameterized
from ..identifiers import resolve
from . import commands as cmd
from . import pgtypes
from .results import Column, CopyOut, Result, Spool
from .sqlstate import ServeError, cancelled
from .subscribe import Subscriber, stream


def show_views(session, backlog: dict[str, int]) -> Result:
    cols = [Column.of("name", "VARCHAR"), Column.of("kind", "VARCHAR"), Column.of("rows", "BIGINT"),
            Column.of("class", "VARCHAR"), Column.of("lag_seconds", "DOUBLE"), Column.of("lag_bytes", "BIGINT"),
            Column.of("subscriber_backlog", "BIGINT")]
    rows = [(i.name, i.kind, i.rows, i.query_class, i.lag_seconds if i.lag_seconds is not None else 0.0,
             i.lag_bytes if i.lag_bytes is not None else 0, backlog.get(i.name, 0)) for i in session.info()]
    return Result("SHOW", cols, iter(rows))


def explain_view(session, name: str) -> Result:
    if resolve(name, session.views) not in session.views:
        raise ServeError("42P01", f"incremental view {name!r} does not exist",
                         hint="SHOW INCREMENTAL VIEWS lists them")
    text = session.explain(name)
    return Result("EXPLAIN", [Column.of("QUERY PLAN", "VARCHAR")], iter([(line,) for line in text.splitlines()]))


def _literal(text: str, params):
    if text.startswith("$"):
        i = int(text[1:])
        if params is None or i > len(params):
            raise ServeError("08P01", f"there is no parameter ${i}")
        return params[i - 1]
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    if text.upper() in ("TRUE", "FALSE"):
        return text.upper() == "TRUE"
    return Decimal(text) if "." in text else int(text)


def subscription(client, c: cmd.Subscribe, params) -> Result:
    """Set up ``SUBSCRIBE``: the first rows (snapshot or replay) are taken and the subscriber
    attached under the gate, so no commit falls between them."""
    b = client.backend
    vs = b.views.get(c.view)
    if vs is None:
        raise ServeError("42P01", f"incremental view {c.view!r} does not exist",
                         hint="SHOW INCREMENTAL VIEWS lists them")
    if vs.error is not None:
        raise ServeError("55000", f"incremental view {c.view!r} is stopped: {vs.error}")
    keep = None
    inputs = None
    if is_parameterized(vs.view):
        wanted = list(vs.view.params)
        got = dict(c.inputs)
        if sorted(got) != sorted(wanted) or len(got) != len(c.inputs):
            raise ServeError("42601", f"incremental view {c.view!r} is parameterized: SUBSCRIBE {c.view} WHERE "
                                      + " AND ".join(f"{p} = …" for p in wanted))
        types = b.input_types(vs)
        if set(types) != set(wanted):
            raise ServeError("0A000", f"SUBSCRIBE to {c.view!r} needs equality inputs; this view has range inputs")
        inputs = {k: pgtypes.coerce(_literal(v, params), types.get(k)) for k, v in got.items()}
        key = tuple(inputs[p] for p in wanted)
        n = len(wanted)

        def keep(row, key=key, n=n):
            return row[n:] if row[:n] == key else None
    elif c.inputs:
        raise ServeError("42601", f"incremental view {c.view!r} has no inputs: SUBSCRIBE {c.view} without WHERE")
    sub = Subscriber(c.view, b.max_backlog, keep)
    first: list = []
    b.gate.acquire_shared(b.lock_timeout)
    try:
        b.watch(c.view, vs)
        now = b.progress(c.view)
        if c.resume is not None:
            for p, change in b.hub.replay(c.view, c.resume):
                if keep is not None:
                    change = [(out, k) for out, k in ((keep(r), k) for r, k in change) if out is not None]
                first.append((p, change))
        elif c.snapshot:
            spool = Spool(b.spool_rows)
            spool.extend(vs.view.lookup(**inputs) if inputs is not None else vs.view.rows())
            first.append((now, spool))
        b.hub.attach(sub)
    finally:
        b.gate.release_shared()

    def check() -> None:
        if client.cancel_reason:
            raise cancelled(client.cancel_reason)

    columns = [Column.of("ivm_progress", "BIGINT"), Column.of("ivm_diff", "BIGINT")] + \
        [Column.of(n, t) for n, t in zip(vs.columns, vs.types)]
    rows = stream(sub, b.hub, first, check, c.progress, len(vs.columns))
    res = Result("SUBSCRIBE", columns, rows, stream=sub, release=lambda: b.hub.detach(sub))
    if c.copy:
        fmt = c.copy_options.get("format", "text").lower()
        res.copy_out = CopyOut(fmt, "," if fmt == "csv" else "\t", "" if fmt == "csv" else "\\N",
                               c.copy_options.get("header", "false").lower() in ("", "true", "on"))
        res.tag = "COPY"
    return res
