"""Watching a PostgreSQL session's views from outside their streams: WAL retained by their
slots (a warning), source tables dropped, replaced or unpublished behind the session's back
(the view is stopped), and the replication state EXPLAIN prints.
"""

from __future__ import annotations

import datetime as _dt
import logging
import time
import warnings

from ...io.postgres import conninfo as pgconn
from ...io.postgres import replication as pgc
from ...io.postgres.pgoutput import lsn_str
from ...io.postgres.slots import ivm_slots
from .apply import StreamApplier
from .state import LagWarning, PgContext, PgView, SourceChangedError

log = logging.getLogger("ivm_layer.session")


class ViewWatch:
    """Lag warnings (at most every 10 s) and source checks over the session's views; a view
    whose source changed is stopped through the applier."""

    def __init__(self, ctx: PgContext, applier: StreamApplier):
        self.ctx = ctx
        self.applier = applier
        self.last_lag_check = 0.0

    def check_lag(self) -> None:
        now = time.monotonic()
        if now - self.last_lag_check < 10.0 or not self.ctx.views:
            return
        self.last_lag_check = now
        self.check_sources()
        try:
            retained = {s.slot: s.retained_bytes for s in ivm_slots(self.ctx.ctl)}   # one query
        except pgconn.driver_error() as e:   # a lag report never fails the caller's statement
            log.info("could not list the replication slots: %s", e)
            return
        for vs in self.ctx.views.values():
            held = retained.get(vs.slot)
            if held is not None and held > self.ctx.lag_warning_bytes:
                warnings.warn(f"replication slot {vs.slot} of view {vs.name!r} retains "
                              f"{held / 2**20:,.0f} MiB of WAL: the view is falling "
                              "behind (call poll()/sync() more often, or DROP VIEW it)", LagWarning,
                              stacklevel=3)

    def report_closed_slots(self) -> None:
        """At open, before the views resume: a :class:`LagWarning` for each of this session's
        slots that held more than ``lag_warning_bytes`` of WAL while the session was closed,
        and one for the other sessions' and daemons' slots not in use above it (one query)."""
        limit = self.ctx.lag_warning_bytes
        mine, others = [], []
        try:
            slots = ivm_slots(self.ctx.ctl)
        except pgconn.driver_error() as e:   # a report never keeps the session from opening
            log.info("could not list the replication slots: %s", e)
            return
        for s in slots:
            if s.retained_bytes <= limit or s.active:
                continue
            (mine if s.session == self.ctx.session else others).append(s)
        for s in mine:
            warnings.warn(f"replication slot {s.slot} of view {s.view!r} held "
                          f"{s.retained_bytes / 2**20:,.0f} MiB of WAL while session "
                          f"{self.ctx.session!r} was closed; it is released as the view catches up. "
                          f"`ivm status DATABASE` lists every slot; cap what a slot may hold with "
                          f"max_slot_wal_keep_size", LagWarning, stacklevel=5)
        if others:
            total = sum(s.retained_bytes for s in others)
            warnings.warn(f"{len(others)} ivm-layer replication slot(s) not in use hold "
                          f"{total / 2**20:,.0f} MiB of WAL ({', '.join(s.owner for s in others)}); "
                          "run `ivm status DATABASE` (and --drop-slots SESSION for a session you "
                          "will not reopen soon)", LagWarning, stacklevel=5)

    def check_sources(self) -> None:
        """Stop views whose source table was dropped or replaced (the stream says nothing
        about a dropped table: it just leaves the publication)."""
        live = [vs for vs in self.ctx.views.values() if vs.error is None]
        names = sorted({t for vs in live for t in vs.oids})
        if not names:
            return
        rows = self.ctx.ctl.execute("SELECT n, to_regclass(quote_ident(n))::oid::int "
                                    "FROM unnest(%s::text[]) AS n", [names]).fetchall()
        now = dict(rows)
        published: dict[str, set[str]] = {}
        for pub, table in self.ctx.ctl.execute(
                "SELECT pubname, tablename FROM pg_publication_tables WHERE schemaname = 'public' "
                "AND pubname = ANY(%s)", [[vs.slot for vs in live]]).fetchall():
            published.setdefault(pub, set()).add(table)
        for vs in live:
            for t, oid in vs.oids.items():
                if now.get(t) != oid:
                    self.applier.stop(vs, SourceChangedError(
                        f"source table {t!r} of view {vs.name!r} was dropped or replaced; "
                        "drop and re-create the view"))
                    break
                if t not in published.get(vs.slot, ()):
                    self.applier.stop(vs, SourceChangedError(
                        f"publication {vs.slot} of view {vs.name!r} no longer publishes table {t!r} "
                        "(ALTER PUBLICATION or DROP PUBLICATION behind the session's back): its changes "
                        "would be missed; drop and re-create the view"))
                    break



def describe(ctx: PgContext, vs: PgView) -> str:
    """The view's plan plus its replication state (slot, positions, lag, reconnects, stop)."""
    lag = pgc.slot_lag(ctx.ctl, vs.slot)
    lag_b, lag_s = view_lag(vs, lag)
    lines = [vs.view.explain(), "", f"replication slot {vs.slot}"
             + (f" (active: {lag.active}, WAL retained: {lag.retained_bytes:,} bytes, "
                f"acknowledged {lsn_str(lag.confirmed_flush_lsn)})" if lag else " (missing!)"),
             f"applied through {lsn_str(vs.applied_lsn)}; checkpoint {lsn_str(vs.checkpoint_lsn)}"
             + (f"; table {lsn_str(vs.table_lsn)}" if vs.materialized else ""),
             f"lag: {lag_b:,} bytes, {lag_s:.3f} s"]
    if vs.reader is not None and vs.reader.reconnects:
        lines.append(f"reconnected {vs.reader.reconnects} time(s)")
    if vs.error is not None:
        lines.append(f"STOPPED: {vs.error}")
    return "\n".join(lines)

def view_lag(vs: PgView, slot: pgc.SlotLag | None) -> tuple[int, float]:
    """(bytes, seconds) behind. Bytes: the server's WAL position minus ours, where ours is
    the last applied transaction or, with nothing queued, how far the walsender has
    decoded (WAL of other tables counts as consumed). Seconds: the age of the oldest
    received but unapplied transaction."""
    if slot is None:
        return 0, 0.0
    feed = vs.reader
    pos = vs.applied_lsn
    oldest = feed.oldest_commit_time() if feed is not None else None
    if feed is not None and oldest is None:
        pos = max(pos, feed.position, slot.sent_lsn or 0)
    lag_b = max(0, slot.current_lsn - pos)
    lag_s = 0.0
    if oldest is not None:
        lag_s = max(0.0, (_dt.datetime.now(_dt.UTC) - oldest).total_seconds())
    return lag_b, lag_s
