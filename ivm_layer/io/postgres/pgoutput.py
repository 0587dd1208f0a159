"""A decoder for PostgreSQL's ``pgoutput`` logical replication protocol, version 1.

Transport-independent: it takes the raw bytes of one pgoutput message (the payload of an
XLogData message on a replication connection, or the ``data`` column of
``pg_logical_slot_peek_binary_changes(slot, NULL, NULL, 'proto_version', '1',
'publication_names', 'pub')``) together with its LSN, and returns completed, committed
transactions as plain picklable data (no psycopg objects)::

    from ivm_layer.io.postgres.pgoutput import PgOutputDecoder

    dec = PgOutputDecoder()
    for lsn, payload in messages:              # in stream order
        txn = dec.feed(payload, lsn)           # a Transaction at each Commit, else None
        if txn is not None:
            for table, rows in txn.changes.items():   # rows: [(row_tuple, +1 | -1), …]
                ...

Every message kind of protocol version 1 is handled: Begin ``B``, Commit ``C``, Origin
``O``, Relation ``R``, Type ``Y``, Insert ``I``, Update ``U`` (with an optional old key
``K`` or old row ``O``), Delete ``D``, Truncate ``T`` and logical decoding Message ``M``;
tuple columns ``n`` (NULL), ``u`` (unchanged TOASTed value), ``t`` (text) and ``b``
(binary). A Relation message re-sent mid-stream (after ``ALTER TABLE``, or after a
reconnect) replaces the cached schema; rows are tuples in the relation's column order.

Conventions (stable; other components rely on them):

- **Table names** are ``table`` for the ``public`` schema and ``schema.table`` otherwise,
  exactly as PostgreSQL spells them (no quoting, case preserved).
- **Changes**: an INSERT is ``(new, +1)``, a DELETE ``(old, -1)``, an UPDATE
  ``(old, -1), (new, +1)``; they are listed in the order they happened. Turning deletes and
  updates into full old rows needs ``REPLICA IDENTITY FULL``: an update or delete that
  carries only the key (or nothing) raises :class:`ReplicaIdentityError` naming the table.
  Unchanged TOASTed columns (``u``) of an update's new row are taken from the old row.
- **Truncate**: ``Transaction.truncated`` lists the tables emptied in the transaction.
  Apply a transaction as: empty each table in ``truncated``, then apply ``changes``. Changes
  made before the (last) TRUNCATE of a table in the same transaction are dropped from
  ``changes`` because the TRUNCATE wipes them anyway, so this order is exact.
- **Values** are decoded with psycopg's own loaders for the column's type OID (text format
  for ``t``, binary for ``b``): int2/int4/int8 → ``int``, numeric → ``Decimal``, float4/8 →
  ``float`` (a NaN is the engine's one SQL NaN, :data:`ivm_layer.engine.values.NAN`), text/varchar/bpchar/name → ``str``, bool → ``bool``, date → ``datetime.date``,
  timestamp → naive ``datetime``, timestamptz → ``datetime`` in UTC, time, interval, uuid →
  ``uuid.UUID``, bytea → ``bytes``. Rows must be hashable (the engine keys on them), so
  ``json``/``jsonb`` are kept as their text (jsonb's output text is canonical: equal jsonb
  values have equal text) after psycopg's loader has checked they parse, and arrays become
  tuples. Types psycopg does not know come back as ``str``. The same
  :class:`ValueDecoder` decodes snapshot rows (``ivm_layer.io.postgres.replication.copy_table``), so the
  engine sees identical values from the snapshot and from the stream.
- **LSNs** are ints. ``Transaction.commit_lsn`` is the LSN of the commit record,
  ``end_lsn`` its end: the position to acknowledge (standby status "flushed") once the
  transaction is durably applied, and the position to compare on restart (skip a
  transaction whose ``end_lsn`` is at or below the recorded one).
- Rolled-back transactions never reach a pgoutput stream; savepoints rolled back inside a
  committed transaction are absent from it. Transactional logical messages
  (``pg_logical_emit_message(true, …)``) appear in ``Transaction.messages``;
  non-transactional ones are returned by :meth:`PgOutputDecoder.take_messages`.
"""

from __future__ import annotations

import datetime as _dt
import struct
from dataclasses import dataclass, field
from typing import Any

from ...engine.values import NAN
from ...errors import PgOutputError, ReplicaIdentityError

__all__ = [
    "NAN",
    "PG_EPOCH",
    "Column",
    "LogicalMessage",
    "PgOutputDecoder",
    "PgOutputError",
    "Relation",
    "ReplicaIdentityError",
    "Transaction",
    "ValueDecoder",
    "qualified_name",
]

PG_EPOCH = _dt.datetime(2000, 1, 1, tzinfo=_dt.UTC)

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_I64 = struct.Struct("!q")
_U64 = struct.Struct("!Q")

_JSON_OIDS = {114, 3802}  # json, jsonb
_FLOAT_OIDS = {700, 701}  # float4, float8
_FLOAT_ARRAY_OIDS = {1021, 1022}

def qualified_name(schema: str, table: str) -> str:
    """``table`` for the ``public`` schema, ``schema.table`` otherwise."""
    return table if schema == "public" else f"{schema}.{table}"


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    key: bool


@dataclass(frozen=True)
class Relation:
    """A table as described by the last Relation message for its OID."""

    oid: int
    schema: str
    name: str
    replica_identity: str        # 'd' default, 'n' nothing, 'f' full, 'i' index
    columns: tuple[Column, ...]

    @property
    def table(self) -> str:
        return qualified_name(self.schema, self.name)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class LogicalMessage:
    lsn: int
    transactional: bool
    prefix: str
    content: bytes


@dataclass
class Transaction:
    """One committed transaction of the stream, as plain data."""

    xid: int
    final_lsn: int               # from Begin: the LSN of the commit record
    commit_lsn: int
    end_lsn: int
    commit_time: _dt.datetime    # UTC
    changes: dict[str, list[tuple[tuple, int]]] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)
    relations: dict[str, Relation] = field(default_factory=dict)  # Relation messages seen in it
    messages: list[LogicalMessage] = field(default_factory=list)
    origin: str | None = None

    @property
    def n_changes(self) -> int:
        return sum(len(v) for v in self.changes.values())


class ValueDecoder:
    """Column values → Python values with psycopg's loaders, without a connection.

    The loaders come from psycopg's global adapters map; with no connection, timestamptz
    values are returned in UTC."""

    def __init__(self) -> None:
        from psycopg import pq
        from psycopg.adapt import Transformer

        from .infinity import adapters_map

        self._tx = Transformer(adapters_map())   # ±infinity dates and timestamps
        self._text = pq.Format.TEXT
        self._binary = pq.Format.BINARY
        self._cache: dict[tuple[int, bool], Any] = {}

    def loader(self, oid: int, binary: bool = False):
        """A function ``bytes -> value`` for a column of type ``oid``."""
        key = (oid, binary)
        fn = self._cache.get(key)
        if fn is None:
            fn = self._make(oid, binary)
            self._cache[key] = fn
        return fn

    def _make(self, oid: int, binary: bool):
        ld = self._tx.get_loader(oid, self._binary if binary else self._text).load
        if oid in _JSON_OIDS:
            if binary:
                def load_json(data, _ld=ld):
                    _ld(data)
                    b = bytes(data)
                    return (b[1:] if oid == 3802 else b).decode()
            else:
                def load_json(data, _ld=ld):
                    _ld(data)              # psycopg's loader: fails on invalid JSON
                    return bytes(data).decode()
            return load_json

        if oid in _FLOAT_OIDS:
            def load_float(data, _ld=ld):
                v = _ld(data)
                return NAN if v != v else v
            return load_float

        def load(data, _ld=ld):
            v = _ld(data)
            if isinstance(v, list):
                return _freeze(v)
            return v
        return load

    def row(self, oids: list[int], fields: list[bytes | None]) -> tuple:
        """Decode one row of text-format fields (None for NULL)."""
        return tuple(None if f is None else self.loader(o)(f) for o, f in zip(oids, fields))


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, float) and v != v:
        return NAN
    return v


_UNCHANGED = object()  # a 'u' column


class PgOutputDecoder:
    """Feed pgoutput messages in stream order; get committed transactions back.

    Keeps the relation cache (OID → :class:`Relation`) and the transaction being assembled.
    ``relations`` may be pre-seeded (e.g. after a restart the server re-sends Relation
    messages before first use anyway)."""

    def __init__(self, values: ValueDecoder | None = None) -> None:
        self.values = values or ValueDecoder()
        self.relations: dict[int, Relation] = {}
        self.types: dict[int, tuple[str, str]] = {}    # Type messages: oid → (schema, name)
        self._txn: Transaction | None = None
        self._pending_messages: list[LogicalMessage] = []
        self._loaders: dict[int, list] = {}
        self.unchanged_toast = 0    # 'u' columns filled from the old row (a statistic)

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    def take_messages(self) -> list[LogicalMessage]:
        """Non-transactional logical messages seen since the last call."""
        out, self._pending_messages = self._pending_messages, []
        return out

    def feed(self, payload: bytes | memoryview, lsn: int = 0) -> Transaction | None:
        """Decode one message; return the transaction it completes (at Commit), else None."""
        data = bytes(payload)
        if not data:
            raise PgOutputError("empty pgoutput message")
        kind = data[0:1]
        handler = _HANDLERS.get(kind)
        if handler is None:
            raise PgOutputError(f"unknown pgoutput message kind {kind!r} at LSN {lsn_str(lsn)} "
                                "(only protocol version 1 is supported)")
        try:
            return handler(self, data, lsn)
        except (struct.error, IndexError, UnicodeDecodeError) as e:
            raise PgOutputError(f"malformed pgoutput {kind!r} message at LSN {lsn_str(lsn)}: {e}") from e

    # -- message kinds --------------------------------------------------------------------
    def _begin(self, d: bytes, lsn: int) -> None:
        if self._txn is not None:
            raise PgOutputError(f"Begin at {lsn_str(lsn)} inside transaction {self._txn.xid}")
        final_lsn, = _U64.unpack_from(d, 1)
        ts, = _I64.unpack_from(d, 9)
        xid, = _U32.unpack_from(d, 17)
        self._txn = Transaction(xid, final_lsn, final_lsn, final_lsn, _ts(ts))

    def _commit(self, d: bytes, lsn: int) -> Transaction:
        txn = self._need_txn("Commit", lsn)
        commit_lsn, = _U64.unpack_from(d, 2)
        end_lsn, = _U64.unpack_from(d, 10)
        ts, = _I64.unpack_from(d, 18)
        txn.commit_lsn, txn.end_lsn, txn.commit_time = commit_lsn, end_lsn, _ts(ts)
        txn.changes = {t: rows for t, rows in txn.changes.items() if rows}
        self._txn = None
        return txn

    def _origin(self, d: bytes, lsn: int) -> None:
        txn = self._need_txn("Origin", lsn)
        name, _ = _cstr(d, 9)
        txn.origin = name

    def _relation(self, d: bytes, lsn: int) -> None:
        oid, = _U32.unpack_from(d, 1)
        schema, pos = _cstr(d, 5)
        name, pos = _cstr(d, pos)
        ident = chr(d[pos])
        ncols, = _I16.unpack_from(d, pos + 1)
        pos += 3
        cols = []
        for _ in range(ncols):
            flags = d[pos]
            cname, pos = _cstr(d, pos + 1)
            toid, = _U32.unpack_from(d, pos)
            tmod, = _I32.unpack_from(d, pos + 4)
            pos += 8
            cols.append(Column(cname, toid, tmod, bool(flags & 1)))
        rel = Relation(oid, schema, name, ident, tuple(cols))
        self.relations[oid] = rel
        self._loaders.pop(oid, None)
        if self._txn is not None:
            self._txn.relations[rel.table] = rel

    def _type(self, d: bytes, lsn: int) -> None:
        oid, = _U32.unpack_from(d, 1)
        schema, pos = _cstr(d, 5)
        name, _ = _cstr(d, pos)
        self.types[oid] = (schema, name)

    def _insert(self, d: bytes, lsn: int) -> None:
        txn = self._need_txn("Insert", lsn)
        rel = self._rel(d, lsn)
        if d[5:6] != b"N":
            raise PgOutputError(f"Insert at {lsn_str(lsn)}: expected 'N', got {d[5:6]!r}")
        row, _ = self._tuple(rel, d, 6)
        if _UNCHANGED in row:
            raise PgOutputError(f"Insert into {rel.table} at {lsn_str(lsn)} has an unchanged-TOAST column")
        txn.changes.setdefault(rel.table, []).append((row, 1))

    def _update(self, d: bytes, lsn: int) -> None:
        txn = self._need_txn("Update", lsn)
        rel = self._rel(d, lsn)
        pos = 5
        old = None
        kind = d[pos:pos + 1]
        if kind in (b"K", b"O"):
            old_row, pos = self._tuple(rel, d, pos + 1)
            if kind == b"O":
                old = old_row
            kind = d[pos:pos + 1]
        if kind != b"N":
            raise PgOutputError(f"Update at {lsn_str(lsn)}: expected 'N', got {kind!r}")
        new, _ = self._tuple(rel, d, pos + 1)
        if old is None or _UNCHANGED in old:
            raise ReplicaIdentityError(
                f"UPDATE of {rel.table} arrived without its old row (replica identity "
                f"{_IDENT.get(rel.replica_identity, rel.replica_identity)}): run "
                f"ALTER TABLE {rel.table} REPLICA IDENTITY FULL", rel.table)
        if _UNCHANGED in new:
            self.unchanged_toast += sum(1 for v in new if v is _UNCHANGED)
            new = tuple(o if n is _UNCHANGED else n for o, n in zip(old, new))
        rows = txn.changes.setdefault(rel.table, [])
        rows.append((old, -1))
        rows.append((new, 1))

    def _delete(self, d: bytes, lsn: int) -> None:
        txn = self._need_txn("Delete", lsn)
        rel = self._rel(d, lsn)
        kind = d[5:6]
        if kind not in (b"K", b"O"):
            raise PgOutputError(f"Delete at {lsn_str(lsn)}: expected 'K' or 'O', got {kind!r}")
        old, _ = self._tuple(rel, d, 6)
        if kind != b"O" or _UNCHANGED in old:
            raise ReplicaIdentityError(
                f"DELETE from {rel.table} arrived with only its key (replica identity "
                f"{_IDENT.get(rel.replica_identity, rel.replica_identity)}): run "
                f"ALTER TABLE {rel.table} REPLICA IDENTITY FULL", rel.table)
        txn.changes.setdefault(rel.table, []).append((old, -1))

    def _truncate(self, d: bytes, lsn: int) -> None:
        txn = self._need_txn("Truncate", lsn)
        n, = _I32.unpack_from(d, 1)
        pos = 6
        for _ in range(n):
            oid, = _U32.unpack_from(d, pos)
            pos += 4
            rel = self.relations.get(oid)
            if rel is None:
                raise PgOutputError(f"Truncate at {lsn_str(lsn)} names relation {oid} before its Relation message")
            t = rel.table
            txn.changes.pop(t, None)          # wiped by the truncate
            if t in txn.truncated:
                txn.truncated.remove(t)
            txn.truncated.append(t)

    def _message(self, d: bytes, lsn: int) -> None:
        flags = d[1]
        mlsn, = _U64.unpack_from(d, 2)
        prefix, pos = _cstr(d, 10)
        n, = _I32.unpack_from(d, pos)
        content = d[pos + 4:pos + 4 + n]
        msg = LogicalMessage(mlsn or lsn, bool(flags & 1), prefix, content)
        if msg.transactional and self._txn is not None:
            self._txn.messages.append(msg)
        else:
            self._pending_messages.append(msg)

    # -- helpers ----------------------------------------------------------------------------
    def _need_txn(self, what: str, lsn: int) -> Transaction:
        if self._txn is None:
            raise PgOutputError(f"{what} message at {lsn_str(lsn)} outside a transaction "
                                "(the stream must be fed from a transaction boundary)")
        return self._txn

    def _rel(self, d: bytes, lsn: int) -> Relation:
        oid, = _U32.unpack_from(d, 1)
        rel = self.relations.get(oid)
        if rel is None:
            raise PgOutputError(f"change at {lsn_str(lsn)} for relation {oid} before its Relation message")
        return rel

    def _tuple(self, rel: Relation, d: bytes, pos: int) -> tuple[tuple, int]:
        n, = _I16.unpack_from(d, pos)
        pos += 2
        if n != len(rel.columns):
            raise PgOutputError(f"tuple of {rel.table} has {n} columns, its Relation {len(rel.columns)}")
        loaders = self._loaders.get(rel.oid)
        if loaders is None:
            loaders = [(self.values.loader(c.type_oid), self.values.loader(c.type_oid, True))
                       for c in rel.columns]
            self._loaders[rel.oid] = loaders
        out: list = []
        unpack = _I32.unpack_from
        for i in range(n):
            k = d[pos]
            pos += 1
            if k == 116:        # 't'
                ln, = unpack(d, pos)
                out.append(loaders[i][0](d[pos + 4:pos + 4 + ln]))
                pos += 4 + ln
            elif k == 110:      # 'n'
                out.append(None)
            elif k == 117:      # 'u'
                out.append(_UNCHANGED)
            elif k == 98:       # 'b'
                ln, = unpack(d, pos)
                out.append(loaders[i][1](d[pos + 4:pos + 4 + ln]))
                pos += 4 + ln
            else:
                raise PgOutputError(f"unknown tuple column kind {chr(k)!r} in {rel.table}")
        return tuple(out), pos


_IDENT = {"d": "DEFAULT", "n": "NOTHING", "f": "FULL", "i": "USING INDEX"}

_HANDLERS = {
    b"B": PgOutputDecoder._begin, b"C": PgOutputDecoder._commit, b"O": PgOutputDecoder._origin,
    b"R": PgOutputDecoder._relation, b"Y": PgOutputDecoder._type, b"I": PgOutputDecoder._insert,
    b"U": PgOutputDecoder._update, b"D": PgOutputDecoder._delete, b"T": PgOutputDecoder._truncate,
    b"M": PgOutputDecoder._message,
}


def _cstr(d: bytes, pos: int) -> tuple[str, int]:
    end = d.index(0, pos)
    return d[pos:end].decode(), end + 1


def _ts(us: int) -> _dt.datetime:
    return PG_EPOCH + _dt.timedelta(microseconds=us)


def lsn_str(lsn: int) -> str:
    """An LSN in PostgreSQL's ``X/X`` notation."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """``'16/B374D848'`` → int."""
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)
