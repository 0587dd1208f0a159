"""What a PostgreSQL session knows: its context, per-view state, names and errors.

Shared by :mod:`.session` (the session), :mod:`.views` (view lifecycle and catalog)
and :mod:`.apply` (applying the stream, checkpoints).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...engine.protocol import View
from ...errors import (  # noqa: F401 - defined there, importable here
    IVMError,
    LagWarning,
    SourceChangedError,
    ViewStoppedError,
    ViewStoppedWarning,
)
from ...io.postgres.conninfo import ControlConnection, DatabaseIdentity
from ...io.postgres.feed import ChangeFeed
from ...io.postgres.pgoutput import ValueDecoder
from ...maintain.checkpoint import CheckpointStore
from ...maintain.viewset import ViewSet
from ...sql.statements import CreateIncrementalView
from ..core import ViewStateBase
from .served import ServedTable

SYNC_PREFIX = "ivm-layer-sync"
UNIT_COLUMN = "ivm_unit"           # the engine's column of a table read for its row count only
SLOT_PATTERN = re.compile(r"ivm_[a-z0-9_]{1,59}")
SESSION_PATTERN = re.compile(r"[A-Za-z0-9_]{1,40}")


def sanitize(s: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", s.lower())


def slot_name(db: str, session: str, view: str) -> str:
    """A replication slot / publication name for a view: ``ivm_<db>_<session>_<view>``,
    lower case. When that spelling loses information (other characters than ``a-z0-9_``,
    upper case) or is longer than 63 characters, a hash of the exact names is appended,
    so ``"a-b"`` and ``"a_b"`` get different slots."""
    exact = f"ivm_{db}_{session}_{view}"
    name = sanitize(exact)
    if name != exact or len(name) > 63:
        h = hashlib.sha1(exact.encode()).hexdigest()[:8]
        name = name[:54] + "_" + h
    return name


def default_state_dir(identity: DatabaseIdentity, session: str) -> Path:
    """``$XDG_STATE_HOME/ivm-layer/pg_<system id>_<database oid>/<session>``
    (``~/.local/state`` by default): keyed by what identifies the database, never by how
    the connection target was spelled."""
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "ivm-layer" / identity.key / sanitize(session)


@dataclass
class PgContext:
    """Everything the session's parts share (public attributes, no behaviour)."""

    target: str                         # the connection target as libpq takes it (never printed)
    session: str
    identity: DatabaseIdentity
    ctl: ControlConnection              # catalog, markers, materialized writes, lag
    state_dir: Path
    values: ValueDecoder
    set_replica_identity: bool = False
    checkpoint_seconds: float = 2.0
    lag_warning_bytes: int = 1 << 30
    reconnect_seconds: float = 60.0
    dialect: str = "postgres"
    views: dict = field(default_factory=dict)     # name → PgView

    @property
    def db(self) -> str:
        return self.identity.database


@dataclass(eq=False)
class PgView(ViewStateBase):
    """One incremental view of a PostgreSQL session."""

    stmt: CreateIncrementalView
    view: View
    tables: list[str]                       # engine table names
    used: dict[str, list[tuple[str, int, str]]]   # table → [(column, type_oid, sql_type)] kept
    columns: list[str]
    types: list[str]
    slot: str
    store: CheckpointStore | None = None
    applied_lsn: int = 0                    # end LSN of the last transaction in the engine
    checkpoint_lsn: int = 0                 # durable in the checkpoint (snapshot + fsynced log)
    table_lsn: int = 0                      # materialized: durable in ivm.progress
    last_checkpoint: float = 0.0
    snapshot_due: bool = False              # a batch too large for the log: write a snapshot
    reader: ChangeFeed | None = None        # the view's replication stream (its own slot)
    error: BaseException | None = None
    version: int = 0
    served: ServedTable | None = None      # non-materialized: its TEMP table for PostgreSQL reads
    seen_tokens: set = field(default_factory=set)
    last_commit_time: Any = None
    col_index: dict[str, list[int]] = field(default_factory=dict)   # relation column positions
    oids: dict[str, int] = field(default_factory=dict)              # source table OIDs
    subscribers: list = field(default_factory=list)
    rebuilds: int = 0                       # rebuilds after changes of the view's static tables
    schema: dict = field(default_factory=dict)    # the engine schema it was compiled with
    #: the view's own road (its stream is its own: one view per set, its checkpoint the log)
    viewset: ViewSet | None = None

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """The rows of source table ``table`` the view holds (``{row: count}``, the engine's
        own store, read-only): the session keeps no second copy."""
        return self.view.base_rows(table) if table in self.view.tables else {}

    @property
    def static(self) -> set[str]:
        return set(getattr(self.stmt, "static", ()) or ())

    @property
    def wants_change(self) -> bool:
        """Its change is written somewhere: the MATERIALIZED table, or a served TEMP table
        that catches up by changes."""
        return self.stmt.materialized or (self.served is not None and self.served.wants_changes)

    def recompile(self) -> View:
        """The definition compiled again, empty (a rebuild after a write to a static table)."""
        return compile_engine_view(self.stmt, self.schema, "postgres")

    def stop_reader(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None


def compile_engine_view(st: CreateIncrementalView, schema: dict, dialect: str):
    """The engine view of a definition, with its static tables (``WITH (static = …)``)."""
    from ...compile import compile_view   # the SQL front-end loads when a view is compiled

    static = tuple(getattr(st, "static", ()) or ())
    opts = {"epsilon": st.epsilon} if getattr(st, "epsilon", None) is not None else {}
    if static:
        return compile_view(st.select_sql, schema, dialect=dialect, static=static, **opts)
    return compile_view(st.select_sql, schema, dialect=dialect, **opts)
