"""The engine state of the daemon (its views, kept by a :class:`~ivm_layer.maintain.viewset.ViewSet`)
and its checkpoint (the one :class:`~ivm_layer.maintain.checkpoint.CheckpointStore`).

The base rows live in one place: the views that read them (``view.base_rows(table)``); the
state keeps no copy of its own. The engine objects themselves are not serialized: what is
persisted is the multiset of base rows (a snapshot) plus an append-only log of the
consolidated changes applied per Spark batch id, in the checkpoint format the PostgreSQL
session uses (:mod:`ivm_layer.maintain.checkpoint`: typed JSON, no pickle; the daemon writes its
columnar variant, which loads at C speed for plain values, and fsyncs every batch). Recovery
compiles the views again, replays the log since the snapshot onto the snapshot's rows and
loads the result in one batch per view; a batch id at or below the recovered one is a replay
and is skipped.

Files under ``DIR`` (a local directory, 0700, files 0600, or a URL: :mod:`.statefs`), one
object per batch (:mod:`.enginestore`)::

    views.json    the view definitions the state belongs to
    snap-<N>      base rows covering the batch ids below N
    logs-<N>/log-<B>  the consolidated changes of batch B (≥ N)

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
from ..engine.protocol import Change, View
from ..errors import IVMError, StateError, UpdateError
from ..maintain import checkpoint as ckpt
from ..maintain.changes import Changes
from ..maintain.viewset import ViewSet, load_view
from ..sql.statements import CreateIncrementalView, classify, split_statements

log = logging.getLogger("ivm_layer.daemon")


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
        name = stmt.name       # a key (ivm_layer.identifiers): PostgreSQL's rules
        if stmt.epsilon is not None:  # never dropped silently
            raise IVMError(f"view {name}: WITH (epsilon = …) is not supported in the daemon's views file: it "
                           "chooses how parameterized views answer lookups (paper 004's heavy/light trade-off), "
                           "and the daemon serves no lookups; use a DuckDB session or compile_view(..., epsilon=…)")
        if any(v.name == name for v in out):
            raise IVMError(f"view {name!r} is defined twice in the views file")
        out.append(ViewDef(name, stmt.select_sql, stmt.materialized, list(stmt.tables),
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
    """``(table, row, k)`` items → one :class:`Changes`. O(items)."""
    out = Changes()
    for table, row, k in items:
        out.add(table, row, k)
    return out


def batch_changes(rows, base: Mapping[str, Mapping[tuple, int]]) -> Changes:
    """Source rows ``(lsn, seq, tbl, sign, row)`` in stream order (the Arrow rows of a Spark
    batch, unpickled) → one :class:`Changes`; ``sign == 0`` is a TRUNCATE of ``tbl`` at that
    point (relative to ``base``, the rows before the batch). O(rows)."""
    out = Changes()
    for _lsn, _seq, table, sign, row in rows:
        d = out.get(table)
        if d is None:
            d = out[table] = {}
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
    for t in [t for t, d in out.items() if not d]:
        del out[t]
    return out


def encode_changes(changes: Changes) -> bytes:
    """A consolidated batch in the checkpoint format (columnar typed JSON; no pickle)."""
    return json.dumps({t: ckpt.encode_columns(list(rows.items())) for t, rows in changes.items() if rows}).encode()


def decode_changes(data: bytes) -> Changes:
    """Inverse of :func:`encode_changes`; anything else raises :class:`StateError`."""
    try:
        doc = json.loads(bytes(data))
        return Changes({str(t): dict(ckpt.decode_columns(c)) for t, c in doc.items()})
    except (ValueError, TypeError, AttributeError, ckpt.CheckpointError) as e:   # UnicodeDecodeError too
        raise StateError(f"not a batch of the engine state ({e}); a state of an older version "
                         "(pickled) cannot be loaded: start from a new checkpoint") from None


@dataclass(eq=False)
class EngineView:
    """One view of the daemon, as its :class:`~ivm_layer.maintain.viewset.ViewSet` member."""

    defn: ViewDef
    view: View
    schema: dict
    error: BaseException | None = None
    subscribers: list = field(default_factory=list)
    rebuilds: int = 0
    wants_change = True           # every view change goes to the sinks

    @property
    def name(self) -> str:
        return self.defn.name

    @property
    def static(self) -> set[str]:
        return set(self.defn.static)

    def recompile(self) -> View:
        return compile_def(self.defn, self.schema)


class EngineState:
    """The compiled views; the base rows are the ones the views hold (no second copy)."""

    def __init__(self, defs: list[ViewDef], schema: Mapping[str, Mapping[str, str]]):
        self.defs = list(defs)
        self.schema = {t: dict(c) for t, c in schema.items()}
        self.members = {d.name: EngineView(d, view, self.schema)
                        for d, view in zip(self.defs, compile_defs(self.defs, self.schema).values())}
        #: the one road of changes to the views; its checkpoint is attached by :meth:`recover`
        self.viewset = ViewSet(self.members)

    @property
    def views(self) -> dict[str, View]:
        return {name: m.view for name, m in self.members.items()}

    @property
    def rebuilds(self) -> dict[str, int]:
        """Per view, the rebuilds after changes of its static tables."""
        return {name: m.rebuilds for name, m in self.members.items()}

    @property
    def tables(self) -> list[str]:
        seen: list[str] = []
        for m in self.members.values():
            seen += [t for t in m.view.tables if t not in seen]
        return seen

    def rows_of(self, table: str) -> Mapping[tuple, int]:
        """``table``'s rows as the (first) view reading it holds them, read-only, O(1)."""
        for m in self.members.values():
            if table in m.view.tables:
                return m.view.base_rows(table)
        raise UpdateError(f"changes for table {table!r}, which no view reads")

    @property
    def base(self) -> dict[str, Mapping[tuple, int]]:
        """``{table: {row: k}}``, read-only views of the engine's own rows (TRUNCATE expands
        against these; nothing is copied)."""
        return {t: self.rows_of(t) for t in self.tables}

    def apply(self, changes: Mapping[str, Mapping[tuple, int]], position: int | None = None) -> dict[str, Change]:
        """Apply one consolidated batch to every view through the ViewSet; returns the change
        of each view reading it (empty lists too). Everything is validated before anything
        changes (deletes against the engine's rows, then each view's ``prepare``; a view whose
        static table changes is rebuilt aside), so a bad batch (a delete of a missing row: the
        stream and the state disagree) changes nothing. ``position``: the batch id, logged in
        the checkpoint (:meth:`recover` attached it)."""
        changes = Changes.of(changes)
        for table, rows in changes.items():
            store = self.rows_of(table)
            for row, k in rows.items():
                if k < 0 and store.get(row, 0) + k < 0:
                    raise UpdateError(f"the change stream deletes {row!r} from {table!r}, which the "
                                      "daemon's state does not hold: the checkpoint and the source "
                                      "disagree (was the slot advanced by someone else?)")
        readers = [m for m in self.members.values() if not changes.keys().isdisjoint(m.view.tables)]
        outcome = self.viewset.apply(changes, position=position)
        return {m.name: outcome.get(m, []) for m in readers}

    def log(self, batch_id: int, changes: Mapping[str, Mapping[tuple, int]]) -> None:
        """Record (durably) that batch ``batch_id`` (these consolidated changes) is applied."""
        if self.viewset.checkpoint is None:
            raise StateError("recover() the state before writing to its checkpoint")
        self.viewset.log(batch_id, Changes.of(changes))

    def recover(self, store: ckpt.CheckpointStore, hold_after: int | None = None) -> tuple[int, list]:
        """Load ``store``'s snapshot, with the log since it replayed onto its rows, into this
        empty state (one batch per view) and attach the store as the state's checkpoint log;
        returns the last applied batch id (-1 for a fresh checkpoint) and, with
        ``hold_after``, the logged batches after that id, not loaded (``[(batch_id, changes)]``,
        in order): the caller applies them one at a time (to write their view changes to
        sinks that missed them)."""
        with collector_paused():
            try:
                cp = store.load(hold_after)
            except ckpt.CheckpointError as e:
                raise StateError(f"refusing the engine checkpoint: {e}") from None
            if cp is None:
                raise StateError(f"the engine checkpoint {store.dir} lost its snapshot; use a new --checkpoint")
            try:
                self.load_tables(cp.tables)
            except UpdateError as e:
                raise StateError(f"the engine checkpoint {store.dir} is inconsistent ({e}); use a new "
                                 "--checkpoint") from None
        self.viewset.checkpoint = store
        return cp.lsn, [(bid, Changes.of(ch)) for bid, ch in cp.held]

    def snapshot(self, batch_id: int) -> None:
        """Write the full state as of ``batch_id`` to the attached checkpoint; it replaces the log."""
        store = self.viewset.checkpoint
        if store is None:
            raise StateError("recover() the state before writing to its checkpoint")
        store.write_snapshot({"batch": batch_id}, self.base, batch_id)

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
        """Load ``{table: {row: k}}`` into an empty state: one batch per view, its static tables
        first (so that no load counts as a write to a static table)."""
        if any(self.rows_of(t) for t in self.tables):
            raise StateError("load() needs an empty state")
        with collector_paused():
            for m in self.members.values():
                load_view(m.view, {t: tables[t] for t in m.view.tables if tables.get(t)}, m.static)


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


def _refuse_pickles(fs) -> None:
    """A checkpoint written by an older version holds pickles: never load one."""
    old = [n for n in fs.list() + fs.list("log") if n.endswith(".pkl")]
    if old:
        raise StateError(f"the engine checkpoint {fs.label} was written by an older version of "
                         f"ivm-layer as pickles ({old[0]}, …), which are never loaded (they could run "
                         "code): start over with a new --checkpoint directory (the daemon then reads "
                         "the tables again from a fresh snapshot), or delete this one")


def _engine_fs(location: str):
    from .statefs import StateFS

    fs = StateFS(location)
    if fs.local and os.path.isdir(fs.root):
        try:
            ckpt.private_dir(Path(fs.root), create=False)
        except ckpt.CheckpointError as e:
            raise StateError(f"refusing the engine checkpoint: {e}") from None
    return fs


def open_checkpoint(location: str, defs: list[ViewDef]):
    """The engine's checkpoint at ``location`` (a directory or a URL: :mod:`.enginestore`,
    one object per batch): never a pickle of an older version, the definitions it was
    written for (a fresh location records them and starts with an empty snapshot; a local
    checkpoint of the previous layout is converted). Load it with
    :meth:`EngineState.recover`; ``position`` is the last applied batch id (-1: none)."""
    from .enginestore import BatchStore

    fs = _engine_fs(location)
    fs.ensure_root()
    _refuse_pickles(fs)
    fp = views_fingerprint(defs)
    meta = fs.read("views.json")
    if meta is not None:
        if json.loads(meta).get("fingerprint") != fp:
            raise StateError(f"the checkpoint {fs.label} belongs to other view definitions; "
                             "use a new --checkpoint directory after changing the views file")
    else:
        fs.write("views.json", json.dumps({"fingerprint": fp, "views": [d.name for d in defs]}).encode())
    store = BatchStore(fs)
    try:
        if fs.local and store.convert_legacy(fs.root):
            log.warning("converted the engine checkpoint %s to the per-batch layout", fs.label)
        if not store.has_snapshot():   # a fresh checkpoint: an empty snapshot starts the log
            if any(n.startswith("logs-") for n in store.fs.list_dirs()):
                raise StateError(f"the engine checkpoint {fs.label} has a change log but lost its "
                                 "snapshot; use a new --checkpoint")
            store.write_snapshot({"batch": -1}, {}, -1)
        else:
            store.position, store.source_lsn = store.read_position()
    except ckpt.CheckpointError as e:
        raise StateError(f"refusing the engine checkpoint: {e}") from None
    return store


def last_batch_in(location: str) -> int:
    """The last applied batch id recorded at ``location`` (-1 if none), read-only."""
    from .enginestore import BatchStore

    fs = _engine_fs(location)
    _refuse_pickles(fs)
    try:
        if fs.local and os.path.exists(os.path.join(fs.root, "state.snap")):   # the previous layout
            pos = ckpt.read_position(Path(fs.root), "state")
            return -1 if pos is None else pos
        return BatchStore(fs).read_position()[0]
    except ckpt.CheckpointError as e:
        raise StateError(f"refusing the engine checkpoint: {e}") from None


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to the local ``path`` so that a crash leaves the old file or the new one
    (the parquet sink's files; the daemon's state goes through :mod:`.statefs`)."""
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
