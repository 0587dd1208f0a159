"""The engine state of the daemon (base rows + compiled views) and its checkpoint store.

The engine objects themselves are not serialized: the state that is persisted is the
multiset of base rows the views read (a snapshot) plus a log of the consolidated deltas
applied per Spark batch id. Recovery compiles the views again, loads the latest snapshot
in one batch and replays the log in order; a batch id at or below the last logged one is
a replay and is skipped.

Files under ``DIR`` (every file is written to a temporary name, fsynced and renamed, so a
crash leaves either the old or the new file)::

    views.json                  the view definitions the state belongs to
    snapshot-000000000042.pkl   base rows after batch 42
    log/000000000043.pkl        the consolidated changes of batch 43 (and later ones)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..compile import compile_view
from ..engine.view import Change, View
from ..errors import IVMError, UpdateError
from ..sql.statements import CreateIncrementalView, classify, split_statements

log = logging.getLogger("ivm_layer.pipeline")

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
                           static=list(stmt.static)))
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


class EngineState:
    """Base-row multisets plus the compiled views over them."""

    def __init__(self, defs: list[ViewDef], schema: Mapping[str, Mapping[str, str]]):
        self.defs = list(defs)
        self.schema = {t: dict(c) for t, c in schema.items()}
        self.views = compile_defs(self.defs, self.schema)
        self.base: dict[str, dict[tuple, int]] = {t: {} for t in self.tables}
        self.rebuilds: dict[str, int] = {d.name: 0 for d in self.defs}

    @property
    def tables(self) -> list[str]:
        seen: list[str] = []
        for v in self.views.values():
            seen += [t for t in v.tables if t not in seen]
        return seen

    def apply(self, changes: Changes) -> dict[str, Change]:
        """Apply one consolidated batch to the base rows and every view; returns each view's
        change. The batch is validated against the base rows first, so a bad batch (a delete
        of a missing row: the stream and the state disagree) changes nothing."""
        for table, rows in changes.items():
            store = self.base.get(table)
            if store is None:
                raise UpdateError(f"changes for table {table!r}, which no view reads")
            for row, k in rows.items():
                if k < 0 and store.get(row, 0) + k < 0:
                    raise UpdateError(f"the change stream deletes {row!r} from {table!r}, which the "
                                      "daemon's state does not hold: the checkpoint and the source "
                                      "disagree (was the slot advanced by someone else?)")
        static = {d.name: set(d.static) for d in self.defs}
        prepared, rebuild = [], []
        for name, view in self.views.items():   # every view validates before any changes
            batch = {t: list(changes[t].items()) for t in view.tables if t in changes}
            if batch and static[name] & batch.keys():
                fresh = not any(self.base.get(t) for t in view.tables)   # the first load: no rebuild
                rebuild.append((name, not fresh))
            elif batch:
                prepared.append((name, view.prepare(batch)))
        out: dict[str, Change] = {}
        for name, p in prepared:
            out[name] = self.views[name].commit(p, want_change=True)
        for table, rows in changes.items():
            store = self.base[table]
            for row, k in rows.items():
                n = store.get(row, 0) + k
                if n:
                    store[row] = n
                else:
                    del store[row]
        for name, counted in rebuild:
            out[name] = self._rebuild(name, counted)
        return out

    def _rebuild(self, name: str, counted: bool = True) -> Change:
        """A static table of view ``name`` changed: compile it again and load it from the base
        rows (static tables first), O(N); returns the change of its rows."""
        d = next(d for d in self.defs if d.name == name)
        old = dict(self.views[name].rows())
        view = compile_def(d, self.schema)
        for t in sorted(view.tables, key=lambda t: t not in d.static):
            if self.base.get(t):
                view.apply({t: list(self.base[t].items())})
        self.views[name] = view
        if counted:
            self.rebuilds[name] += 1
            log.info("view %s rebuilt: a static table changed (rebuild %d)", name, self.rebuilds[name])
        new = dict(view.rows())
        change = [(r, k - old.get(r, 0)) for r, k in new.items() if k != old.get(r, 0)]
        change += [(r, -k) for r, k in old.items() if r not in new]
        return change

    def dump(self) -> bytes:
        return pickle.dumps(self.base, protocol=pickle.HIGHEST_PROTOCOL)

    def load(self, data: bytes) -> None:
        """Replace an empty state by a snapshot's base rows (one batch per view; static tables
        first, so that no load counts as a write to a static table)."""
        base = pickle.loads(data)
        if any(self.base.values()):
            raise StateError("load() needs an empty state")
        statics = {t for d in self.defs for t in d.static}
        for first in (True, False):
            part = {t: rows for t, rows in base.items() if t in self.base and rows and (t in statics) == first}
            if part:
                self._load_rows(part)

    def _load_rows(self, changes: Changes) -> None:
        for name, view in self.views.items():
            batch = {t: list(changes[t].items()) for t in view.tables if t in changes}
            if batch:
                view.apply(batch)
        for table, rows in changes.items():
            self.base[table].update(rows)


def views_fingerprint(defs: list[ViewDef]) -> str:
    text = json.dumps([[d.name, d.select_sql] + ([sorted(d.static)] if d.static else []) for d in defs])
    return hashlib.sha256(text.encode()).hexdigest()


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


def check_private(path: str) -> None:
    """The state files are pickles, which run code when loaded: refuse a directory (or files
    in it) that another user owns or that others may write."""
    import stat

    for p in [path] + [os.path.join(path, n) for n in os.listdir(path)]:
        st = os.lstat(p)
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or stat.S_ISLNK(st.st_mode):
            raise StateError(f"refusing to load the engine state from {p}: it is owned by another user "
                             f"or writable by others (run: chmod -R go-w {path}, and check who "
                             "changed it)")


class CheckpointStore:
    """Snapshot + per-batch delta log of an :class:`EngineState` in a directory."""

    def __init__(self, directory: str, defs: list[ViewDef]):
        self.dir = directory
        self.log_dir = os.path.join(directory, "log")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.makedirs(self.log_dir, mode=0o700, exist_ok=True)
        fp = views_fingerprint(defs)
        meta = os.path.join(directory, "views.json")
        if os.path.exists(meta):
            with open(meta) as f:
                have = json.load(f).get("fingerprint")
            if have != fp:
                raise StateError(f"the checkpoint {directory} belongs to other view definitions; "
                                 "use a new --checkpoint directory after changing the views file")
        else:
            write_atomic(meta, json.dumps({"fingerprint": fp,
                                           "views": [d.name for d in defs]}).encode())

    def _snapshots(self) -> list[int]:
        return sorted(int(n[9:21]) for n in os.listdir(self.dir)
                      if n.startswith("snapshot-") and n.endswith(".pkl"))

    def _logs(self) -> list[int]:
        return sorted(int(n[:12]) for n in os.listdir(self.log_dir) if n.endswith(".pkl"))

    @staticmethod
    def last_batch_in(directory: str) -> int:
        """The last applied batch id recorded in ``directory`` (-1 if none), read-only."""
        ids = [int(n[9:21]) for n in os.listdir(directory) if n.startswith("snapshot-") and n.endswith(".pkl")]
        log_dir = os.path.join(directory, "log")
        if os.path.isdir(log_dir):
            ids += [int(n[:12]) for n in os.listdir(log_dir) if n.endswith(".pkl")]
        return max(ids) if ids else -1

    @property
    def last_batch(self) -> int:
        """The last applied batch id (-1 when nothing was applied yet)."""
        ids = self._snapshots() + self._logs()
        return max(ids) if ids else -1

    def recover(self, state: EngineState) -> int:
        """Load the latest snapshot and replay the log into an empty ``state``; returns the
        last applied batch id (-1 for a fresh checkpoint)."""
        check_private(self.dir)
        check_private(self.log_dir)
        snaps = self._snapshots()
        last = -1
        if snaps:
            last = snaps[-1]
            with open(os.path.join(self.dir, f"snapshot-{last:012d}.pkl"), "rb") as f:
                state.load(f.read())
        for b in self._logs():
            if b <= last:
                continue
            with open(os.path.join(self.log_dir, f"{b:012d}.pkl"), "rb") as f:
                state.apply(pickle.load(f))
            last = b
        return last

    def append(self, batch_id: int, changes: Changes) -> None:
        """Record that batch ``batch_id`` (these consolidated changes) is applied."""
        write_atomic(os.path.join(self.log_dir, f"{batch_id:012d}.pkl"),
                     pickle.dumps(changes, protocol=pickle.HIGHEST_PROTOCOL))

    def snapshot(self, batch_id: int, state: EngineState) -> None:
        """Write the full state as of ``batch_id`` and drop what it supersedes."""
        write_atomic(os.path.join(self.dir, f"snapshot-{batch_id:012d}.pkl"), state.dump())
        for b in self._snapshots():
            if b < batch_id:
                os.remove(os.path.join(self.dir, f"snapshot-{b:012d}.pkl"))
        for b in self._logs():
            if b <= batch_id:
                os.remove(os.path.join(self.log_dir, f"{b:012d}.pkl"))

    def logs_since_snapshot(self) -> int:
        snaps = self._snapshots()
        base = snaps[-1] if snaps else -1
        return sum(1 for b in self._logs() if b > base)
