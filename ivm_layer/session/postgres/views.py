"""The lifecycle of a PostgreSQL session's views: the ``ivm`` catalog, compiling a
definition, the collision-checked claim of its slot and publication, creation (slot with
exported snapshot → COPY → table/catalog/progress → checkpoint → stream), resuming from a
checkpoint, and dropping.

Nothing here touches an object the layer did not create: a catalog row is checked against
the name it is stored under (its slot must be a well-formed ``ivm_…`` name, its definition
must create that very view), a publication carries a comment naming its view, and so does
a materialized view's table; a row or object that fails a check is reported and left alone.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections import Counter
from collections.abc import Mapping

from ...errors import (
    CatalogError,
    EngineValueError,
    IVMError,
    OperationalError,
    SQLError,
)
from ...io.postgres import conninfo as pgconn
from ...io.postgres import replication as pgc
from ...io.postgres.feed import ChangeFeed
from ...io.postgres.pgoutput import lsn_str
from ...maintain.checkpoint import CheckpointError, CheckpointStore
from ...maintain.viewset import load_view
from ...sql.statements import CreateIncrementalView, classify
from .apply import StreamApplier
from .served import copy_rows
from .state import SLOT_PATTERN, PgContext, PgView, slot_name

#: changes staged per view before its feed stops reading (and, after a second, lets go of its
#: connection until the session catches up: see :mod:`ivm_layer.io.postgres.feed`)
STAGED_CHANGES = 100_000


def engine_load(vs: PgView, base: Mapping[str, Mapping[tuple, int]]) -> None:
    """The tables' rows (``{table: {row: count}}``) into the view's engine view, which from then
    on is their only store; an engine failure is a clear error."""
    try:
        load_view(vs.view, base, vs.static)   # static tables before the others (paper 003)
    except IVMError:
        raise
    except Exception as e:  # noqa: BLE001 - reported in the user's terms
        raise EngineValueError(f"incremental view {vs.name!r}: the engine cannot evaluate its definition over "
                               f"the tables' values ({type(e).__name__}: {e})") from None


class ViewCatalog:
    """Creates, resumes and drops the views of one session (``ctx.views``)."""

    def __init__(self, ctx: PgContext, applier: StreamApplier):
        self.ctx = ctx
        self.applier = applier
        self.skipped: dict[str, tuple[str, str]] = {}   # name → (slot, why) of unusable catalog rows

    def marker(self, slot: str) -> str:
        return f"ivm-layer:{self.ctx.session}:{slot}"

    # -- the catalog --------------------------------------------------------------------------
    def ensure(self) -> None:
        for stmt in ("CREATE SCHEMA IF NOT EXISTS ivm",
                     ("CREATE TABLE IF NOT EXISTS ivm.views (session text NOT NULL, name text NOT NULL, "
                      "kind text NOT NULL, definition text NOT NULL, slot text NOT NULL, "
                      "PRIMARY KEY (session, name))"),
                     "CREATE TABLE IF NOT EXISTS ivm.progress (slot text PRIMARY KEY, lsn bigint NOT NULL)"):
            with pgconn.exists_ok():
                self.ctx.ctl.execute(stmt)

    def load(self) -> None:
        """Resume every valid catalog row of the session; a bad row is reported (warning) and
        skipped, never acted on."""
        rows = self.ctx.ctl.execute("SELECT name, kind, definition, slot FROM ivm.views WHERE session = %s "
                                    "ORDER BY name", [self.ctx.session]).fetchall()
        seen_slots: set[str] = set()
        for name, kind, definition, slot in rows:
            why = self.check_row(name, kind, definition, slot, seen_slots)
            if why is None:
                try:
                    self.ctx.views[name] = self.resume(classify(definition, self.ctx.dialect), slot)
                    seen_slots.add(slot)
                    continue
                except IVMError as e:
                    why = str(e)
            self.skipped[name] = (slot, why)
            warnings.warn(f"incremental view {name!r} of session {self.ctx.session!r} is not loaded: {why}",
                          stacklevel=4)

    def check_row(self, name, kind, definition, slot, seen_slots) -> str | None:
        if not isinstance(slot, str) or not SLOT_PATTERN.fullmatch(slot):
            return f"its catalog row names an invalid slot {slot!r}"
        if slot in seen_slots:
            return f"its slot {slot!r} is claimed by another catalog row"
        try:
            st = classify(definition, self.ctx.dialect)
        except Exception as e:  # noqa: BLE001 - any failure: the row is not usable
            return f"its definition cannot be read ({type(e).__name__})"
        if not isinstance(st, CreateIncrementalView) or st.name != name:
            return "its definition does not create a view of that name"
        if kind != ("materialized" if st.materialized else "incremental"):
            return f"its kind {kind!r} does not match its definition"
        rel = self.relation(name)
        if rel is not None and not (st.materialized and rel == self.marker(slot)):
            return f"a table or view named {name!r} exists that this session did not create"
        own = slot_name(self.ctx.db, self.ctx.session, name) if isinstance(name, str) else None
        if slot != own:
            # the slot is derived from the names (state.slot_name): a row naming another slot
            # was altered, and acting on it would read (and checkpoint over) another view's
            # stream; that slot, its publication and its checkpoint are left alone
            return (f"its catalog row names slot {slot!r}, not the view's own {own!r} (the row was "
                    f"altered); the slot is left alone")
        return None

    def relation(self, name: str) -> str | None:
        """None when no relation ``public.name`` exists; else its comment ('' if none)."""
        r = self.ctx.ctl.execute("SELECT coalesce(obj_description(c.oid, 'pg_class'), '') FROM pg_class c "
                                 "JOIN pg_namespace n ON n.oid = c.relnamespace "
                                 "WHERE n.nspname = 'public' AND c.relname = %s", [name]).fetchone()
        return None if r is None else r[0]

    def publication(self, name: str) -> str | None:
        r = self.ctx.ctl.execute("SELECT coalesce(obj_description(oid, 'pg_publication'), '') "
                                 "FROM pg_publication WHERE pubname = %s", [name]).fetchone()
        return None if r is None else r[0]

    # -- compiling ----------------------------------------------------------------------------
    def check_identity(self, tables: list[str]) -> None:
        for t in tables:
            if pgc.replica_identity(self.ctx.ctl, t) != "f":
                if self.ctx.set_replica_identity:
                    pgc.set_replica_identity_full(self.ctx.ctl, t)
                else:
                    raise OperationalError(
                        f"table {t!r} needs REPLICA IDENTITY FULL so that updates and deletes carry the "
                        f"whole old row: run ALTER TABLE {t} REPLICA IDENTITY FULL, or let the session "
                        "do it (ivm shell --set-replica-identity; in Python "
                        "ivm_layer.connect(url, set_replica_identity=True))", sqlstate="55000")

    def compile(self, st: CreateIncrementalView, slot: str | None = None) -> PgView:
        from .compile import compile_pg_view   # the SQL front-end (sqlglot) loads with the first view

        return compile_pg_view(self.ctx, st, slot)

    # -- creating -----------------------------------------------------------------------------
    def create(self, st: CreateIncrementalView) -> None:
        name = st.name
        views = self.ctx.views
        if name in views:
            if st.if_not_exists:
                return
            if not st.or_replace:
                raise SQLError(f"incremental view {name!r} already exists", sqlstate="42P07")
            self.drop(name)
        if self.relation(name) is not None:
            raise SQLError(f"cannot create incremental view {name!r}: a table or view of that name exists")
        other = self.ctx.ctl.execute("SELECT session FROM ivm.views WHERE name = %s", [name]).fetchone()
        if other and (st.materialized or other[0] == self.ctx.session):
            raise SQLError(f"view {name!r} already exists in session {other[0]!r}", sqlstate="42P07")
        vs = self.compile(st)
        leftover = self.claim(vs)                 # refuses collisions before anything changes
        self.check_identity(vs.tables)
        try:
            self.initialize(vs, new=True, leftover_slot=leftover)
        except BaseException:
            vs.stop_reader()
            with contextlib.suppress(Exception):
                self.cleanup(vs)
            raise
        views[name] = vs

    def claim(self, vs: PgView) -> bool:
        """Check that the view's slot and publication names are free (or leftovers of an
        interrupted creation of this very view); True when a leftover slot must go."""
        ctl = self.ctx.ctl
        owner = ctl.execute("SELECT session, name FROM ivm.views WHERE slot = %s", [vs.slot]).fetchone()
        if owner is not None:
            raise CatalogError(f"cannot create incremental view {vs.name!r}: its replication slot and "
                               f"publication name {vs.slot} is taken by view {owner[1]!r} of session "
                               f"{owner[0]!r}; choose another view name")
        pub = self.publication(vs.slot)
        if pub is not None and pub != self.marker(vs.slot):
            raise CatalogError(f"cannot create incremental view {vs.name!r}: a publication named {vs.slot} "
                               "exists that this session did not create; nothing was changed")
        if pgc.slot_exists(ctl, vs.slot) and pub is None:
            raise CatalogError(f"cannot create incremental view {vs.name!r}: a replication slot named "
                               f"{vs.slot} exists that this session did not create; nothing was changed")
        if vs.store.snap_path.exists() and pub is None:
            vs.store.remove()                     # a stale checkpoint of a view dropped while closed
        return pub is not None

    def initialize(self, vs: PgView, new: bool, leftover_slot: bool = True) -> None:
        """Slot with exported snapshot → COPY → (table, catalog, progress) → checkpoint → stream."""
        ctx, ctl = self.ctx, self.ctx.ctl
        table = f"public.{pgc.quote_ident(vs.name)}"
        if vs.materialized and self.relation(vs.name) not in (None, self.marker(vs.slot)):
            raise CatalogError(f"incremental materialized view {vs.name!r}: a table of that name exists that "
                               "this session did not create; it is left alone")
        with ctl.transaction():
            pgc.ensure_publication(ctl, vs.slot, vs.tables)
            ctl.execute(f"COMMENT ON PUBLICATION {pgc.quote_ident(vs.slot)} IS "
                        f"{pgc.quote_literal(self.marker(vs.slot))}")
        if leftover_slot:
            pgc.drop_slot(ctl, vs.slot)           # a leftover of an interrupted creation, or a rebuild
        stream = pgc.ReplicationStream(ctx.target)
        try:
            slot = stream.create_slot(vs.slot)
            rows = pgc.copy_tables(ctx.target, slot.snapshot,
                                   {t: [(c, oid) for c, oid, _ in cols] for t, cols in vs.used.items()},
                                   ctx.values, pgc.stderr_progress if sys.stderr.isatty() else None)
            engine_load(vs, {t: Counter(r) for t, r in rows.items()})
            del rows
            vs.applied_lsn = vs.checkpoint_lsn = vs.table_lsn = slot.consistent_lsn
            with ctl.transaction():
                if vs.materialized:
                    cols = ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))
                    ctl.execute(f"DROP TABLE IF EXISTS {table}")
                    ctl.execute(f"CREATE TABLE {table} ({cols})")
                    ctl.execute(f"COMMENT ON TABLE {table} IS {pgc.quote_literal(self.marker(vs.slot))}")
                    copy_rows(ctl, table, vs.view.rows(), vs.types)
                ctl.execute("INSERT INTO ivm.progress VALUES (%s, %s) ON CONFLICT (slot) "
                            "DO UPDATE SET lsn = excluded.lsn", [vs.slot, slot.consistent_lsn])
                if new:
                    ctl.execute("INSERT INTO ivm.views VALUES (%s, %s, %s, %s, %s)",
                                [ctx.session, vs.name, "materialized" if vs.materialized else "incremental",
                                 vs.stmt.definition(ctx.dialect), vs.slot])
            self.applier.write_snapshot(vs)
            stream.start(vs.slot, vs.slot, slot.consistent_lsn)
        except BaseException:
            stream.close()
            raise
        vs.version += 1
        self.start_reader(vs, stream)

    # -- resuming -----------------------------------------------------------------------------
    def resume(self, st: CreateIncrementalView, slot: str) -> PgView:
        ctl = self.ctx.ctl
        vs = self.compile(st, slot)
        try:
            ck = vs.store.load()
        except CheckpointError as e:
            warnings.warn(f"incremental view {vs.name!r}: unusable checkpoint ({e})", stacklevel=4)
            ck = None
        lag = pgc.slot_lag(ctl, slot)
        progress = ctl.execute("SELECT lsn FROM ivm.progress WHERE slot = %s", [slot]).fetchone()
        table_lsn = progress[0] if progress else 0
        reason = None
        if ck is None:
            reason = "no usable checkpoint file"
        elif ck.header.get("slot") != slot or ck.header.get("definition") != st.definition(self.ctx.dialect):
            reason = "the checkpoint belongs to another definition"
        elif lag is None:
            reason = "its replication slot is missing"
        elif lag.confirmed_flush_lsn > ck.lsn:
            reason = (f"the slot was acknowledged up to {lsn_str(lag.confirmed_flush_lsn)}, after the "
                      f"checkpoint ({lsn_str(ck.lsn)})")
        elif ck.header.get("oids") != {t: o for t, o in vs.oids.items()}:
            reason = "a source table was dropped and re-created"
        elif vs.materialized and table_lsn < ck.lsn:
            reason = "the view table is older than the checkpoint"
        if reason is not None:
            warnings.warn(f"incremental view {vs.name!r}: {reason} in {self.ctx.state_dir}; rebuilding it from "
                          "a fresh snapshot", stacklevel=4)
            if self.publication(slot) not in (None, self.marker(slot)):
                raise CatalogError(f"publication {slot} exists that this session did not create")
            self.check_identity(vs.tables)
            self.initialize(vs, new=False)
            return vs
        engine_load(vs, ck.tables)
        vs.applied_lsn = vs.checkpoint_lsn = ck.lsn
        vs.table_lsn = table_lsn
        vs.last_checkpoint = time.monotonic()
        self.start_reader(vs, self.open_stream(slot, ck.lsn))
        return vs

    def open_stream(self, slot: str, lsn: int, wait: float = 15.0) -> pgc.ReplicationStream:
        """START_REPLICATION on an existing slot; waits while the walsender of a previous
        (e.g. killed) consumer still holds the slot."""
        deadline = time.monotonic() + wait
        while True:
            stream = pgc.ReplicationStream(self.ctx.target)
            try:
                stream.start(slot, slot, lsn)
                return stream
            except pgc.PostgresError as e:
                stream.close()
                if e.sqlstate != "55006":
                    raise
                if time.monotonic() > deadline:
                    raise OperationalError(f"replication slot {slot} is in use by another process: is session "
                                           f"{self.ctx.session!r} open elsewhere? ({e})", sqlstate="55006") from None
                time.sleep(0.2)
            except BaseException:
                stream.close()
                raise

    def start_reader(self, vs: PgView, stream: pgc.ReplicationStream) -> None:
        slot, target = vs.slot, self.ctx.target

        def reopen(lsn: int) -> pgc.ReplicationStream:
            st = pgc.ReplicationStream(target)
            try:
                st.start(slot, slot, lsn)
            except BaseException:
                st.close()
                raise
            return st

        vs.reader = ChangeFeed(reopen, slot, vs.applied_lsn, stream=stream, name=vs.name,
                               max_staged=STAGED_CHANGES, release_when_full=True,
                               reconnect_seconds=self.ctx.reconnect_seconds)

    # -- dropping -----------------------------------------------------------------------------
    def drop_skipped(self, name: str) -> None:
        """``DROP VIEW`` of a catalog row that was not loaded: the row goes, and the slot and
        publication too when they are this session's (the publication's comment says so), are the
        row's own (derived from its names) and no other catalog row names them."""
        slot, _ = self.skipped.pop(name)
        ctl = self.ctx.ctl
        ctl.execute("DELETE FROM ivm.views WHERE session = %s AND name = %s", [self.ctx.session, name])
        shared = ctl.execute("SELECT count(*) FROM ivm.views WHERE slot = %s", [slot]).fetchone()[0]
        if (SLOT_PATTERN.fullmatch(slot) and slot == slot_name(self.ctx.db, self.ctx.session, name)
                and not shared and self.publication(slot) == self.marker(slot)):
            ctl.execute("DELETE FROM ivm.progress WHERE slot = %s", [slot])
            pgc.drop_slot(ctl, slot)
            pgc.drop_publication(ctl, slot)
            CheckpointStore(self.ctx.state_dir, slot).remove()

    def drop(self, name: str, user_conn=None) -> None:
        vs = self.ctx.views[name]
        vs.stop_reader()
        self.cleanup(vs, user_conn)
        del self.ctx.views[name]

    def cleanup(self, vs: PgView, user_conn=None) -> None:
        ctl = self.ctx.ctl
        with ctl.transaction():
            if vs.materialized and self.relation(vs.name) == self.marker(vs.slot):
                ctl.execute(f"DROP TABLE IF EXISTS public.{pgc.quote_ident(vs.name)}")
            ctl.execute(f"DROP TABLE IF EXISTS pg_temp.{pgc.quote_ident('_ivm_del_' + vs.name)}")
            ctl.execute("DELETE FROM ivm.views WHERE session = %s AND name = %s", [self.ctx.session, vs.name])
            ctl.execute("DELETE FROM ivm.progress WHERE slot = %s", [vs.slot])
        if user_conn is not None:
            user_conn.drop_temp(vs)
        if vs.served is not None:
            vs.served.drop()
        pgc.drop_slot(ctl, vs.slot)
        if self.publication(vs.slot) == self.marker(vs.slot):
            pgc.drop_publication(ctl, vs.slot)
        if vs.store is not None:
            vs.store.remove()
