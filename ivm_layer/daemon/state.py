"""The engine state of the daemon (the compiled views) and its checkpoint store.

The base rows live in one place: the views that read them (``view.base_rows(table)``); the
state keeps no copy of its own. The engine objects themselves are not serialized: what is
persisted is the multiset of base rows (a snapshot) plus an append-only log of the
consolidated changes applied per Spark batch id, in the checkpoint format the PostgreSQL
session uses (:mod:`ivm_layer.maintain.checkpoint`: typed JSON, no pickle; the daemon writes its
columnar variant, which loads at C speed for plain values). Recovery compiles the views
again, replays the log since the snapshot onto the snapshot's rows and loads the result in
one batch per view; a batch id at or below the recovered one is a replay and is skipped.

Files under ``DIR`` (0700; files 0600)::

    views.json    the view definitions the state belongs to
    state.snap    base rows as of a batch id (replaced atomically)
    state.log     one line per batch applied since that snapshot (a torn last line is ignored)

Checkpoints of older versions (``snapshot-N.pkl``, ``log/N.pkl``: pickles) are refused,
never loaded.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..compile import compile_view
from ..engine.view import Change, View
from ..errors import IVMError, UpdateError
from ..maintain import checkpoint as ckpt
from ..sql.statements import CreateIncrementalView, classify, split_statements

log = logging.getLogger("ivm_layer.daemon")

#: ``{table: {row: k}}`` — a consolidated batch of changes
Changes = dict[str, dict[tuple, int]]


class StateError(IVMError):
    """The checkpoint directory cannot be used (other views, unreadable files)."""


@dataclass
class ViewDef:
    """One ``CREATE INCREMENTAL [MATERIALIZED] VIEW`` of the daemon's views file."""
    name: str
    select_sql: str
    materialized: bool
    tables: list[str] = field(default_factory=list)
    #: the source database's SQL types of the view's columns (filled by ``prepare_source``)
    types: list[str] | None = None
    #: ``WITH (static = '…')``: tables the view treats as static (paper 003)
    static: list[str] = field(default_factory=list)
    #: ``CREATE … VIEW v (a, b) AS …``: names of the first columns (PostgreSQL's rule)
    columns: list[str] | None = None


def parse_views(text: str) -> list[ViewDef]:
    """The view definitions of a views file (PostgreSQL dialect); anything else is an error."""
    out: list[ViewDef] = []
    for stmt_text in split_statements(text, dialect="postgres"):
        stmt = classify(stmt_text, dialect="postgres")
        if not isinstance(stmt, CreateIncrementalView):
            first = " ".join(stmt_text.split())[:60]
            raise IVMError(f"the views file may only hold CREATE INCREMENTAL [MATERIALIZED] VIEW "
                           f"statements, got: {first}…")
        name = stmt.name.lower()
        if any(v.name == name for v in out):
            raise IVMError(f"view {name!r} is defined twice in the views file")
        out.append(ViewDef(name, stmt.select_sql, stmt.materialized, [t.lower() for t in stmt.tables],
                           static=list(stmt.static), columns=list(stmt.columns) if stmt.columns else None))
    if not out:
        raise IVMError("the views file defines no CREATE INCREMENTAL VIEW")
    return out


def compile_defs(defs: Iterable[ViewDef], schema: Mapping[str, Mapping[str, str]]) -> dict[str, View]:
    """Compile every view against ``schema`` (``{table: {column: type}}``, PostgreSQL types)."""
    return {d.name: compile_def(d, schema) for d in defs}


def compile_def(d: ViewDef, schema: Mapping[str, Mapping[str, str]]) -> View:
    """Compile one view (with its static tables, if it declares any)."""
    try:
        return compile_view(d.select_sql, {t: dict(c) for t, c in schema.items()}, dialect="postgres",
                            **({"static": tuple(d.static)} if d.static else {}))
    except IVMError as e:
        raise type(e)(f"view {d.name}: {e}") from None


def consolidate(items: Iterable[tuple[str, tuple, int]]) -> Changes:
    """``(table, row, k)`` items → ``{table: {row: k}}`` without zero entries."""
    out: Changes = {}
    for table, row, k in items:
        d = out.setdefault(table, {})
        n = d.get(row, 0) + k
        if n:
            d[row] = n
        else:
            del d[row]
    return {t: d for t, d in out.items() if d}


def batch_changes(rows, base: Mapping[str, Mapping[tuple, int]]) -> Changes:
    """Source rows ``(lsn, seq, tbl, sign, row)`` in stream order → ``{table: {row: k}}``;
    ``sign == 0`` is a TRUNCATE of ``tbl`` at that point (relative to ``base``, the rows
    before the batch)."""
    out: Changes = {}
    for _lsn, _seq, table, sign, row in rows:
        d = out.setdefault(table, {})
        if sign == 0:  # everything present now (base + pending) goes away
            d.clear()
            for r, k in (base.get(table) or {}).items():
                d[r] = -k
            continue
        n = d.get(row, 0) + sign
        if n:
            d[row] = n
        else:
            del d[row]
    return {t: d for t, d in out.items() if d}


def encode_changes(changes: Changes) -> bytes:
    """A consolidated batch in the checkpoint format (columnar typed JSON; no pickle)."""
    return json.dumps({t: ckpt.encode_columns(list(rows.items())) for t, rows in changes.items() if rows}).encode()


def decode_changes(data: bytes) -> Changes:
    """Inverse of :func:`encode_changes`; anything else raises :class:`StateError`."""
    try:
        doc = json.loads(bytes(data))
        return {str(t): dict(ckpt.decode_columns(c)) for t, c in doc.items()}
    except (ValueError, TypeError, AttributeError, ckpt.CheckpointError) as e:   # UnicodeDecodeError too
        raise StateError(f"not a batch of the engine state ({e}); a state of an older version "
                         "(pickled) cannot be loaded: start from a new checkpoint") from None


class EngineState:
    """The compiled views; the base rows are the ones the views hold (no second copy)."""

    def __init__(self, defs: list[ViewDef], schema: Mapping[str, Mapping[str, str]]):
        self.defs = list(defs)
        self.schema = {t: dict(c) for t, c in schema.items()}
        self.views = compile_defs(self.defs, self.schema)
        self.rebuilds: dict[str, int] = {d.name: 0 for d in self.defs}

    @property
    def tables(self) -> list[str]:
        seen: list[str] = []
        for v in self.views.values():
            seen += [t for t in v.tables if t not in seen]
        return seen

    def rows_of(self, table: str) -> Mapping[tuple, int]:
        """``table``'s rows as the (first) view reading it holds them, read-only, O(1)."""
        for v in self.views.values():
            if table in v.tables:
                return v.base_rows(table)
        raise UpdateError(f"changes for table {table!r}, which no view reads")

    @property
    def base(self) -> dict[str, Mapping[tuple, int]]:
        """``{table: {row: k}}``, read-only views of the engine's own rows (TRUNCATE expands
        against these; nothing is copied)."""
        return {t: self.rows_of(t) for t in self.tables}

    def apply(self, changes: Changes) -> dict[str, Change]:
        """Apply one consolidated batch to every view; returns each view's change. Everything
        is validated before anything changes (deletes against the engine's rows, then each
        view's ``prepare``; a view whose static table changes is rebuilt aside), so a bad batch
        (a delete of a missing row: the stream and the state disagree) changes nothing."""
        for table, rows in changes.items():
            store = self.rows_of(table)
            for row, k in rows.items():
                if k < 0 and store.get(row, 0) + k < 0:
                    raise UpdateError(f"the change stream deletes {row!r} from {table!r}, which the "
                                      "daemon's state does not hold: the checkpoint and the source "
                                      "disagree (was the slot advanced by someone else?)")
        static = {d.name: set(d.static) for d in self.defs}
        prepared, rebuilt = [], {}
        for name, view in self.views.items():
            batch = {t: list(changes[t].items()) for t in view.tables if t in changes}
            if batch and static[name] & batch.keys():
                fresh = not any(view.base_rows(t) for t in view.tables)   # the first load: no rebuild
                rebuilt[name] = (self._rebuild(name, changes), not fresh)
            elif batch:
                prepared.append((name, view.prepare(batch)))
        out: dict[str, Change] = {}          # commit: cannot fail
        for name, p in prepared:
            out[name] = self.views[name].commit(p, want_change=True)
        for name, (view, counted) in rebuilt.items():
            old = dict(self.views[name].rows())
            self.views[name] = view
            if counted:
                self.rebuilds[name] += 1
                log.info("view %s rebuilt: a static table changed (rebuild %d)", name, self.rebuilds[name])
            new = dict(view.rows())
            change = [(r, k - old.get(r, 0)) for r, k in new.items() if k != old.get(r, 0)]
            out[name] = change + [(r, -k) for r, k in old.items() if r not in new]
        return out

    def _rebuild(self, name: str, changes: Changes) -> View:
        """View ``name`` compiled again and loaded, O(N), from its current rows plus
        ``changes`` (static tables first); the current view is left untouched."""
        d = next(d for d in self.defs if d.name == name)
        current = self.views[name]
        view = compile_def(d, self.schema)
        for t in sorted(view.tables, key=lambda t: t not in d.static):
            rows = dict(current.base_rows(t))
            for row, k in (changes.get(t) or {}).items():
                n = rows.get(row, 0) + k
                if n:
                    rows[row] = n
                else:
                    del rows[row]
            if rows:
                view.apply({t: list(rows.items())})
        return view

    def dump(self) -> bytes:
        """The base rows in the checkpoint format (a columnar typed-JSON snapshot, no pickle)."""
        base = self.base
        names = sorted(base)
        head = json.dumps({"version": ckpt.COLUMNAR_VERSION, "tables": names}) + "\n"
        return (head + "".join(line for line, _ in ckpt.snapshot_lines(
            names, {t: base[t].items() for t in names}, columnar=True))).encode()

    def load(self, data: bytes) -> None:
        """Replace an empty state by :meth:`dump`'s output (nothing in it is executed)."""
        try:
            lines = [line for line in bytes(data).decode().split("\n") if line]
            header = json.loads(lines[0]) if lines else None
            names = [str(t) for t in header["tables"]]
            if header.get("version") not in ckpt.READABLE_VERSIONS:
                raise ValueError(f"version {header.get('version')!r}")
        except (ValueError, KeyError, TypeError, AttributeError) as e:   # UnicodeDecodeError too
            raise StateError(f"not an engine state snapshot ({e}); a state of an older version "
                             "(pickled) cannot be loaded: start from a new checkpoint") from None
        with collector_paused():
            try:
                tables, _ = ckpt.read_snapshot_lines(lines[1:], names)
            except ckpt.CheckpointError as e:
                raise StateError(f"the engine state snapshot is malformed: {e}") from None
            self.load_tables(tables)

    def load_tables(self, tables: Mapping[str, Mapping[tuple, int]]) -> None:
        """Load ``{table: {row: k}}`` into an empty state: one batch per view, static tables
        first (so that no load counts as a write to a static table)."""
        if any(self.rows_of(t) for t in self.tables):
            raise StateError("load() needs an empty state")
        known = set(self.tables)
        statics = {t for d in self.defs for t in d.static}
        with collector_paused():
            for first in (True, False):
                part = {t: rows for t, rows in tables.items() if t in known and rows and (t in statics) == first}
                for view in self.views.values():
                    batch = {t: list(part[t].items()) for t in view.tables if t in part}
                    if batch:
                        view.apply(batch)


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused: loading a state allocates millions of
    long-lived objects (the decoded rows, the engine's indexes) and frees none, and the
    collector would traverse them again and again for nothing (a quarter of a recovery)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def views_fingerprint(defs: list[ViewDef]) -> str:
    text = json.dumps([[d.name, d.select_sql] + ([sorted(d.static)] if d.static else []) for d in defs])
    return hashlib.sha256(text.encode()).hexdigest()


_NAME = "state"   # the files' name in the checkpoint directory: state.snap, state.log


def _refuse_pickles(directory: str) -> None:
    """A checkpoint written by an older version holds pickles: never load one."""
    log_dir = os.path.join(directory, "log")
    old = [n for n in os.listdir(directory) if n.endswith(".pkl")]
    if os.path.isdir(log_dir):
        old += [n for n in os.listdir(log_dir) if n.endswith(".pkl")]
    if old:
        raise StateError(f"the engine checkpoint {directory} was written by an older version of "
                         f"ivm-layer as pickles ({old[0]}, …), which are never loaded (they could run "
                         "code): start over with a new --checkpoint directory (the daemon then reads "
                         "the tables again from a fresh snapshot), or delete this one")


class CheckpointStore:
    """Snapshot + append-only per-batch change log of an :class:`EngineState` in a private
    directory (the format of :mod:`ivm_layer.maintain.checkpoint`)."""

    def __init__(self, directory: str, defs: list[ViewDef]):
        self.dir = directory
        try:
            ckpt.private_dir(Path(directory))
        except ckpt.CheckpointError as e:
            raise StateError(f"refusing the engine checkpoint: {e}") from None
        _refuse_pickles(directory)
        fp = views_fingerprint(defs)
        meta = os.path.join(directory, "views.json")
        if os.path.exists(meta):
            with open(meta) as f:
                have = json.load(f).get("fingerprint")
            if have != fp:
                raise StateError(f"the checkpoint {directory} belongs to other view definitions; "
                                 "use a new --checkpoint directory after changing the views file")
        else:
            write_atomic(meta, json.dumps({"fingerprint": fp, "views": [d.name for d in defs]}).encode())
        self.files = ckpt.CheckpointStore(Path(directory), _NAME)
        self.held: list[tuple[int, Changes]] = []
        self._last = self.last_batch_in(directory)
        self._open = False
        if not self.files.snap_path.exists():   # a fresh checkpoint: an empty snapshot starts the log
            if self.files.log_path.exists():
                raise StateError(f"the engine checkpoint {directory} has a change log but lost its "
                                 "snapshot; use a new --checkpoint")
            self.files.write_snapshot({"batch": -1}, {}, -1, columnar=True)
            self._open = True

    @staticmethod
    def last_batch_in(directory: str) -> int:
        """The last applied batch id recorded in ``directory`` (-1 if none), read-only."""
        _refuse_pickles(directory)
        try:
            pos = ckpt.read_position(Path(directory), _NAME)
        except ckpt.CheckpointError as e:
            raise StateError(f"refusing the engine checkpoint: {e}") from None
        return -1 if pos is None else pos

    @property
    def last_batch(self) -> int:
        """The last applied batch id (-1 when nothing was applied yet)."""
        return self._last

    def recover(self, state: EngineState, hold_after: int | None = None) -> int:
        """Load the snapshot, with the log since it replayed onto its rows, into an empty
        ``state`` (one batch per view); returns the last applied batch id (-1 for a fresh
        checkpoint). With ``hold_after``, the logged batches after that id are not loaded but
        left in :attr:`held` (``[(batch_id, changes)]``, in order): the caller applies them one
        at a time (to write their view changes to sinks that missed them)."""
        with collector_paused():
            try:
                cp = self.files.load(hold_after)
            except ckpt.CheckpointError as e:
                raise StateError(f"refusing the engine checkpoint: {e}") from None
            if cp is None:
                raise StateError(f"the engine checkpoint {self.dir} lost its snapshot; use a new --checkpoint")
            try:
                state.load_tables(cp.tables)
            except UpdateError as e:
                raise StateError(f"the engine checkpoint {self.dir} is inconsistent ({e}); use a new "
                                 "--checkpoint") from None
        self.held = [
            (bid, {t: dict(rows) for t, rows in ch.items()}) for bid, ch in cp.held]
        self._open = True
        self._last = cp.lsn
        return cp.lsn

    def _ready(self) -> None:
        if not self._open:
            raise StateError("recover() the state before writing to its checkpoint")

    def append(self, batch_id: int, changes: Changes) -> None:
        """Record (durably) that batch ``batch_id`` (these consolidated changes) is applied."""
        self._ready()
        self.files.append(batch_id, {t: list(rows.items()) for t, rows in changes.items()}, columnar=True)
        self.files.sync_log()
        self._last = max(self._last, batch_id)

    def snapshot(self, batch_id: int, state: EngineState) -> None:
        """Write the full state as of ``batch_id``; it replaces the log."""
        self._ready()
        base = state.base
        self.files.write_snapshot({"batch": batch_id}, {t: rows.items() for t, rows in base.items()},
                                  batch_id, columnar=True)
        self._last = max(self._last, batch_id)

    def logs_since_snapshot(self) -> int:
        return self.files.log_entries


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
