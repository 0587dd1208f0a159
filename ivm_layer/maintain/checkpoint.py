"""Checkpoints of views' input rows that are safe to read back: typed JSON, no code.

:class:`CheckpointStore` is the one checkpoint of the layer: a PostgreSQL session keeps one per
view (named by its replication slot, positions are LSNs), the daemon one for its engine
(``state``, positions are Spark batch ids; :func:`ivm_layer.daemon.state.open_checkpoint`).
A :class:`~.viewset.ViewSet` appends each applied batch to it (``apply(…, position=…)``).
A checkpoint is two files in a private state directory, named by a validated identifier:

- ``<name>.snap`` — a snapshot, replaced atomically (temp file, fsync, rename): one header
  line (format version, a random snapshot id, the view's definition, source table OIDs,
  the LSN it is as of) and lines of up to 4,096 distinct rows ``[table_index, [[row, count], …]]``;
- ``<name>.log`` — an append-only change log for that snapshot: a header line naming the
  snapshot id, then one line per applied batch ``{"lsn": …, "changes": {table: [[row, Δk], …]}}``.
  Appending costs O(changed rows); :meth:`CheckpointStore.sync_log` fsyncs it and returns
  the LSN that is now durable. A torn last line (a crash mid-write) is ignored on load;
  a log whose header names another snapshot is ignored. When the log outgrows the
  snapshot, the caller writes a new snapshot (:meth:`write_snapshot`), which starts an
  empty log.

A snapshot of version 3 (``write_snapshot(…, columnar=True)``, the daemon's engine state)
stores its chunks column by column, ``[table_index, {"n": rows, "cols": [col, …], "k": [count, …] | null}]``
(``k`` null: every count is 1), and its log lines may carry ``"columns": {table: chunk}`` in
place of ``"changes"``. A column of plain values (``int``, ``str``, ``bool``, ``None``) is a
JSON list that loads at C speed (rows are rebuilt by ``zip``); any other column is
``{"v": [tagged value, …]}``. Readers accept versions 2 and 3.

Values are encoded with explicit tags, so loading only builds plain values: ``int``,
``str``, ``bool`` and ``None`` as JSON, and ``["f", hex]`` float (NaN and ±inf exact),
``["n", text]`` Decimal (NaN, ±Infinity), ``["ts", iso]`` datetime (naive or aware),
``["d", iso]`` date, ``["t", iso]`` time, ``["iv", days, seconds, µs]`` timedelta,
``["u", text]`` UUID, ``["b", base64]`` bytes, ``["a", [...]]`` tuple (arrays),
``["l", [...]]`` list, ``["m", [[k, v], ...]]`` dict, ``["ip", kind, text]`` inet/cidr.
A value of another type cannot be checkpointed (:class:`CheckpointError`).

The directory is created 0700 and files 0600 (whatever the umask); :func:`private_dir`
refuses a directory that is not owned by the current user or that others can write, and
tightens one that others can only read. Files are opened without following symlinks.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import decimal
import ipaddress
import json
import math
import os
import re
import secrets
import stat
import uuid
from collections.abc import Iterable, Mapping
from itertools import islice, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from ..engine.values import canonical_float
from ..errors import IVMError

FORMAT_VERSION = 2
COLUMNAR_VERSION = 3            # snapshots whose chunks are columnar (see the module docstring)
READABLE_VERSIONS = (FORMAT_VERSION, COLUMNAR_VERSION)
COLUMNAR_CHUNK = 65536          # rows per columnar snapshot line
SNAPSHOT_CHUNK = 4096           # rows per snapshot line
NAME = re.compile(r"[a-z0-9_]{1,63}")


class CheckpointError(IVMError):
    """A checkpoint cannot be written or read (unsupported value, unsafe state directory)."""


# -- values -----------------------------------------------------------------------------------
def encode(v: Any) -> Any:
    """A value → JSON-able data (see the module docstring for the tags)."""
    if v is None or isinstance(v, str | bool):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return ["f", v.hex()]
    if isinstance(v, decimal.Decimal):
        return ["n", str(v)]
    if isinstance(v, _dt.datetime):
        return ["ts", v.isoformat()]
    if isinstance(v, _dt.date):
        return ["d", v.isoformat()]
    if isinstance(v, _dt.time):
        return ["t", v.isoformat()]
    if isinstance(v, _dt.timedelta):
        return ["iv", v.days, v.seconds, v.microseconds]
    if isinstance(v, uuid.UUID):
        return ["u", str(v)]
    if isinstance(v, bytes | bytearray | memoryview):
        return ["b", base64.b64encode(bytes(v)).decode()]
    if isinstance(v, tuple):
        return ["a", [encode(x) for x in v]]
    if isinstance(v, list):
        return ["l", [encode(x) for x in v]]
    if isinstance(v, dict):
        return ["m", [[encode(k), encode(x)] for k, x in v.items()]]
    if isinstance(v, ipaddress.IPv4Interface | ipaddress.IPv6Interface):
        return ["ip", "i", str(v)]
    if isinstance(v, ipaddress.IPv4Network | ipaddress.IPv6Network):
        return ["ip", "n", str(v)]
    if isinstance(v, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return ["ip", "a", str(v)]
    raise CheckpointError(f"cannot checkpoint a value of type {type(v).__name__}")


_IP = {"i": ipaddress.ip_interface, "n": ipaddress.ip_network, "a": ipaddress.ip_address}


def decode(d: Any) -> Any:
    """Inverse of :func:`encode`; anything malformed raises :class:`CheckpointError`."""
    if d is None or isinstance(d, str | bool | int):
        return d
    if not (isinstance(d, list) and d and isinstance(d[0], str)):
        raise CheckpointError(f"malformed checkpoint value {str(d)[:60]!r}")
    tag = d[0]
    try:
        if tag == "f":
            return canonical_float(float.fromhex(d[1]))
        if tag == "n":
            return decimal.Decimal(d[1])
        if tag == "ts":
            return _dt.datetime.fromisoformat(d[1])
        if tag == "d":
            return _dt.date.fromisoformat(d[1])
        if tag == "t":
            return _dt.time.fromisoformat(d[1])
        if tag == "iv":
            return _dt.timedelta(days=d[1], seconds=d[2], microseconds=d[3])
        if tag == "u":
            return uuid.UUID(d[1])
        if tag == "b":
            return base64.b64decode(d[1], validate=True)
        if tag == "a":
            return tuple(decode(x) for x in d[1])
        if tag == "l":
            return [decode(x) for x in d[1]]
        if tag == "m":
            return {_hashable(decode(k)): decode(x) for k, x in d[1]}
        if tag == "ip":
            return _IP[d[1]](d[2])
    except (ValueError, TypeError, IndexError, KeyError, decimal.InvalidOperation) as e:
        raise CheckpointError(f"malformed checkpoint value {str(d)[:60]!r}: {e}") from None
    raise CheckpointError(f"unknown checkpoint value tag {tag!r}")


def _hashable(k):
    if isinstance(k, list | dict):
        raise CheckpointError("malformed checkpoint value: unhashable dict key")
    return k


_PLAIN = (int, str, type(None))


def encode_row(row: tuple) -> list:
    return [v if type(v) in _PLAIN else encode(v) for v in row]


def decode_row(d: Any) -> tuple:
    if type(d) is not list:
        raise CheckpointError("malformed checkpoint row")
    return tuple(decode(v) if type(v) is list or type(v) is dict or type(v) is float else v for v in d)


_PLAIN_COLUMN = frozenset((int, str, bool, type(None)))


def encode_columns(items: list[tuple[tuple, int]]) -> dict:
    """``[(row, count), …]`` (rows of one table, one arity) → a columnar chunk (see the
    module docstring)."""
    rows = list(map(itemgetter(0), items))
    ks = list(map(itemgetter(1), items))
    if len(set(map(len, rows))) > 1:
        raise CheckpointError("cannot checkpoint rows of different lengths in one table")
    cols = []
    for j in range(len(rows[0]) if rows else 0):
        col = list(map(itemgetter(j), rows))
        cols.append(col if set(map(type, col)) <= _PLAIN_COLUMN else {"v": [encode(v) for v in col]})
    return {"n": len(items), "cols": cols, "k": None if ks.count(1) == len(ks) else ks}


def decode_columns(chunk: Any) -> list[tuple[tuple, int]]:
    """Inverse of :func:`encode_columns`; anything malformed raises :class:`CheckpointError`."""
    rows, ks = _column_rows(chunk)
    return list(zip(rows, ks if ks is not None else repeat(1)))


#: tags whose values decode with one call of a C function: a column of only these is
#: decoded by ``map`` (no Python call per value)
_COLUMN_DECODERS = {"f": float.fromhex, "n": decimal.Decimal, "ts": _dt.datetime.fromisoformat,
                    "d": _dt.date.fromisoformat, "t": _dt.time.fromisoformat}


def _decode_column(values: list) -> list:
    """An encoded column's values: one tag throughout (no NULL) decodes column-wise, anything
    else (or malformed) value by value, like :func:`decode`."""
    try:
        tags = set(map(itemgetter(0), values))
        if len(tags) == 1:
            tag = next(iter(tags))
            conv = _COLUMN_DECODERS.get(tag)
            if conv is not None:
                out = list(map(conv, map(itemgetter(1), values)))
                if tag != "f" or not any(map(math.isnan, out)):  # a NaN becomes the canonical one
                    return out
    except (TypeError, ValueError, IndexError, KeyError, decimal.InvalidOperation):
        pass
    return [decode(v) for v in values]


def _column_rows(chunk: Any) -> tuple[list[tuple], list[int] | None]:
    """A columnar chunk → its rows and counts (None: all 1)."""
    try:
        n = chunk["n"]
        cols = []
        for col in chunk["cols"]:
            if type(col) is dict:
                col = _decode_column(col["v"])
            elif type(col) is not list or not set(map(type, col)) <= _PLAIN_COLUMN:
                raise CheckpointError("malformed checkpoint column")
            if len(col) != n:
                raise CheckpointError("malformed checkpoint chunk: columns of different lengths")
            cols.append(col)
        rows = list(zip(*cols)) if cols else [()] * n
        ks = chunk["k"]
        if ks is not None and (type(ks) is not list or len(ks) != n or not set(map(type, ks)) <= {int}):
            raise CheckpointError("malformed checkpoint chunk: bad counts")
        return rows, ks
    except (KeyError, TypeError) as e:
        raise CheckpointError(f"malformed checkpoint chunk: {e}") from None


def decode_chunk(chunk: Any) -> list[tuple[tuple, int]]:
    """A snapshot chunk of either layout (rows ``[[row, k], …]`` or columnar) → ``[(row, k), …]``."""
    if type(chunk) is dict:
        return decode_columns(chunk)
    if type(chunk) is not list:
        raise CheckpointError("malformed checkpoint chunk")
    out = []
    for row, k in chunk:
        if type(k) is not int:
            raise CheckpointError("malformed checkpoint chunk: bad count")
        out.append((decode_row(row), k))
    return out


def snapshot_lines(names: list[str], tables: dict[str, Iterable[tuple[tuple, int]]],
                   columnar: bool) -> Iterable[tuple[str, int]]:
    """The chunk lines of a snapshot (``(line, rows in it)``; tables in ``names`` order)."""
    if columnar:
        for i, t in enumerate(names):
            it = iter(tables[t])
            while chunk := list(islice(it, COLUMNAR_CHUNK)):
                yield json.dumps([i, encode_columns(chunk)]) + "\n", len(chunk)
        return
    for i, t in enumerate(names):
        chunk: list = []
        for item in tables[t]:
            chunk.append([encode_row(item[0]), item[1]])
            if len(chunk) == SNAPSHOT_CHUNK:
                yield json.dumps([i, chunk]) + "\n", len(chunk)
                chunk = []
        if chunk:
            yield json.dumps([i, chunk]) + "\n", len(chunk)


def read_snapshot_lines(lines: Iterable[str], names: list[str]) -> tuple[dict[str, dict[tuple, int]], int]:
    """Chunk lines (after the header) → ``({table: {row: count}}, rows read)``; raises
    :class:`CheckpointError` for anything malformed."""
    tables: dict[str, dict[tuple, int]] = {str(t): {} for t in names}
    n = 0
    try:
        for line in lines:
            i, chunk = json.loads(line)
            if type(i) is not int or i < 0:
                raise CheckpointError(f"bad table index {i!r}")
            if type(chunk) is dict:
                rows, ks = _column_rows(chunk)
                tables[names[i]].update(zip(rows, ks if ks is not None else repeat(1)))
                n += len(rows)
            else:
                pairs = decode_chunk(chunk)
                tables[names[i]].update(pairs)
                n += len(pairs)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise CheckpointError(f"malformed checkpoint snapshot: {e}") from None
    return tables, n


# -- the directory ------------------------------------------------------------------------------
def private_dir(path: Path, create: bool = True) -> Path:
    """``path`` as a private directory: created 0700 (with missing parents 0700 too);
    refused when it is a symlink, not owned by this user, or writable by others; tightened
    to 0700 when others may only read it."""
    path = Path(path)
    if create and not path.exists():
        missing = []
        p = path
        while not p.exists():
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(d, 0o700)
            os.chmod(d, 0o700)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise CheckpointError(f"state directory {path} is not a directory (or is a symlink)")
    if st.st_uid != os.geteuid():
        raise CheckpointError(f"state directory {path} belongs to another user (uid {st.st_uid}): "
                              "use a state_dir of your own")
    if st.st_mode & 0o022:
        raise CheckpointError(f"state directory {path} can be written by other users "
                              f"(mode {stat.S_IMODE(st.st_mode):04o}): its files could be planted; "
                              f"check it, then chmod 700 {path}")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _open_private(path: Path) -> int:
    """Open an existing checkpoint file for reading: a regular file of ours, not a symlink,
    not writable by others."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise CheckpointError(f"checkpoint file {path} is not a private regular file of this user "
                              f"(mode {stat.S_IMODE(st.st_mode):04o}, uid {st.st_uid})")
    return fd


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_LOG_LSN = re.compile(r'\{"lsn": (-?\d+), ')


def read_position(directory: Path, name: str) -> int | None:
    """The position (LSN) a checkpoint is at — its snapshot's, advanced by the complete lines
    of that snapshot's log — without loading rows or changing any file; None without a
    snapshot. Raises :class:`CheckpointError` for an unsafe or malformed file."""
    try:
        return _read_position(Path(directory) / f"{name}.snap", Path(directory) / f"{name}.log")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"checkpoint in {directory} is malformed: {e}") from None


def _read_position(snap: Path, log: Path) -> int | None:
    try:
        fd = _open_private(snap)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "r", encoding="utf-8") as f:
        try:
            header = json.loads(f.readline())
            pos, sid = int(header["lsn"]), header["snapshot"]
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"checkpoint {snap} is malformed: {e}") from None
    try:
        fd = _open_private(log)
    except FileNotFoundError:
        return pos
    with os.fdopen(fd, "r", encoding="utf-8") as f:
        try:
            head = json.loads(f.readline())
        except ValueError:
            return pos
        if not isinstance(head, dict) or head.get("snapshot") != sid:
            return pos
        for line in f:
            if not line.endswith("\n"):
                break
            m = _LOG_LSN.match(line)
            try:
                pos = max(pos, int(m.group(1)) if m else int(json.loads(line)["lsn"]))
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"checkpoint log {log} is malformed: {e}") from None
    return pos


class Checkpoint:
    """What :meth:`CheckpointStore.load` returns."""

    def __init__(self, header: dict, tables: dict[str, dict[tuple, int]], lsn: int):
        self.header = header
        self.tables = tables          # table → {row: count}
        self.lsn = lsn                # snapshot LSN, advanced by the replayed log
        #: log entries after ``load(hold_after=…)``, not merged into ``tables``: [(lsn, changes)]
        self.held: list[tuple[int, dict[str, list[tuple[tuple, int]]]]] = []


class CheckpointStore:
    """The checkpoint files ``name`` (a validated identifier) in ``directory``. ``columnar``:
    snapshots and log lines column by column (see the module docstring); ``sync_each``: every
    :meth:`append` is fsynced before it returns (else :meth:`sync_log` does it, when the owner
    decides). :attr:`position` is the position of the last batch written or loaded (None
    before either)."""

    def __init__(self, directory: Path, name: str, columnar: bool = False, sync_each: bool = False):
        if not NAME.fullmatch(name or ""):
            raise CheckpointError(f"refusing checkpoint name {name!r}: only a-z, 0-9 and _ (at most 63)")
        self.dir = Path(directory)
        self.name = name
        self.snap_path = self.dir / f"{name}.snap"
        self.log_path = self.dir / f"{name}.log"
        self._log = None              # open append handle
        self._log_id = None
        self.log_bytes = 0
        self.snapshot_bytes = 0
        self.snapshot_rows = 0
        self._pending_lsn: int | None = None   # appended, not yet fsynced
        self.log_entries = 0          # batches in the log (replayed by load() or appended since)
        self.columnar = columnar
        self.sync_each = sync_each
        self.position: int | None = None

    # -- writing ---------------------------------------------------------------------------
    def write_snapshot(self, meta: dict, tables: dict[str, Iterable[tuple[tuple, int]]], lsn: int,
                       columnar: bool | None = None) -> None:
        """Atomically replace the snapshot (and start an empty log for it). ``columnar``
        writes version 3 (column-wise chunks: several times faster to load for plain values).
        The snapshot is renamed into place before the new log replaces the old one, so a crash
        in between leaves the new snapshot with a log of the old one, which is ignored."""
        private_dir(self.dir)
        self.close()
        columnar = self.columnar if columnar is None else columnar
        tables = {t: rows.items() if isinstance(rows, Mapping) else rows for t, rows in tables.items()}
        sid = secrets.token_hex(8)
        names = sorted(tables)
        header = dict(meta, version=COLUMNAR_VERSION if columnar else FORMAT_VERSION, snapshot=sid,
                      lsn=lsn, tables=names)
        tmp = self.dir / f".{self.name}.snap.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(header) + "\n")
                n = 0
                for line, rows in snapshot_lines(names, tables, columnar):
                    f.write(line)
                    n += rows
                f.flush()
                os.fsync(f.fileno())
                self.snapshot_bytes = f.tell()
            self.snapshot_rows = n
            os.replace(tmp, self.snap_path)
            _fsync_dir(self.dir)
            self._new_log(sid)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        self._pending_lsn = None
        self.log_entries = 0
        self.position = lsn

    def _new_log(self, sid: str) -> None:
        tmp = self.dir / f".{self.name}.log.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"version": FORMAT_VERSION, "snapshot": sid}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.log_path)
        self._open_log(sid)

    def _open_log(self, sid: str) -> None:
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        self._log = os.fdopen(fd, "a", encoding="utf-8")
        self._log_id = sid
        self.log_bytes = os.fstat(fd).st_size

    def append(self, lsn: int, changes: Mapping[str, Any], columnar: bool | None = None) -> None:
        """Append one applied batch ``{table: [(row, Δk)] or {row: Δk}}`` at position ``lsn``
        (durable after :meth:`sync_log`, or at once with ``sync_each``); ``columnar`` writes the
        changes column by column (faster to replay for large batches). O(changed rows)."""
        if self._log is None:
            raise CheckpointError("append() before a snapshot was written or loaded")
        changes = {t: rows.items() if isinstance(rows, Mapping) else rows for t, rows in changes.items()}
        if self.columnar if columnar is None else columnar:
            entry = {"lsn": lsn, "columns": {t: encode_columns(list(rows)) for t, rows in changes.items() if rows}}
        else:
            entry = {"lsn": lsn, "changes": {t: [[encode_row(r), k] for r, k in rows]
                                             for t, rows in changes.items() if rows}}
        line = json.dumps(entry) + "\n"
        self._log.write(line)
        self.log_bytes += len(line)
        self.log_entries += 1
        self._pending_lsn = lsn
        self.position = lsn if self.position is None else max(self.position, lsn)
        if self.sync_each:
            self.sync_log()

    def sync_log(self) -> int:
        """fsync the log; return the LSN now durable (0 if nothing was appended since)."""
        if self._log is None or self._pending_lsn is None:
            return 0
        self._log.flush()
        os.fsync(self._log.fileno())
        lsn, self._pending_lsn = self._pending_lsn, None
        return lsn

    def close(self) -> None:
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.flush()
                os.fsync(self._log.fileno())
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def remove(self) -> None:
        self.close()
        for p in (self.snap_path, self.log_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    # -- reading ---------------------------------------------------------------------------
    def load(self, hold_after: int | None = None) -> Checkpoint | None:
        """The snapshot plus its log replayed, or None if there is no snapshot. Raises
        :class:`CheckpointError` for an unsafe or malformed file. With ``hold_after``, log
        entries of a higher LSN are returned in ``held``, in order, instead of merged."""
        private_dir(self.dir, create=False) if self.dir.exists() else None
        try:
            fd = _open_private(self.snap_path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CheckpointError(f"cannot open checkpoint {self.snap_path}: {e}") from None
        with os.fdopen(fd, "r", encoding="utf-8") as f:
            try:
                header = json.loads(f.readline())
                if not isinstance(header, dict) or header.get("version") not in READABLE_VERSIONS:
                    raise CheckpointError(f"checkpoint {self.snap_path} has an unknown format")
                names = [str(t) for t in header["tables"]]
                lsn = int(header["lsn"])
                tables, n = read_snapshot_lines(f, names)
                self.snapshot_rows += n
            except (ValueError, KeyError, TypeError, IndexError, CheckpointError) as e:
                raise CheckpointError(f"checkpoint {self.snap_path} is malformed: {e}") from None
            self.snapshot_bytes = f.tell()
        held: list = []
        try:
            lsn = self._replay(header["snapshot"], tables, lsn, hold_after, held)
        except UnicodeDecodeError as e:
            raise CheckpointError(f"checkpoint log {self.log_path} is malformed: {e}") from None
        cp = Checkpoint(header, tables, lsn)
        cp.held = held
        self.position = lsn
        return cp

    def _replay(self, sid: str, tables: dict[str, dict[tuple, int]], lsn: int,
                hold_after: int | None = None, held: list | None = None) -> int:
        try:
            fd = _open_private(self.log_path)
        except FileNotFoundError:
            self._new_log(sid)
            return lsn
        except OSError as e:
            raise CheckpointError(f"cannot open checkpoint log {self.log_path}: {e}") from None
        good = 0
        with os.fdopen(fd, "r", encoding="utf-8") as f:
            first = f.readline()
            try:
                head = json.loads(first)
            except ValueError:
                head = None
            if not isinstance(head, dict) or head.get("snapshot") != sid:
                self._new_log(sid)            # a log of another snapshot: not ours to replay
                return lsn
            good = len(first.encode())
            self.log_entries = 0
            for line in f:
                if not line.endswith("\n"):
                    break                     # torn last line: never acknowledged
                try:
                    entry = json.loads(line)
                    batch_lsn = int(entry["lsn"])
                    if "columns" in entry:
                        changes = {t: decode_columns(c) for t, c in entry["columns"].items()}
                    else:
                        changes = {t: [(decode_row(row), int(k)) for row, k in rows]
                                   for t, rows in entry["changes"].items()}
                    if held is not None and hold_after is not None and batch_lsn > hold_after:
                        held.append((batch_lsn, changes))
                        changes = {}
                    for t, rows in changes.items():
                        cur = tables.setdefault(t, {})
                        for r, k in rows:
                            n = cur.get(r, 0) + k
                            if n:
                                cur[r] = n
                            else:
                                cur.pop(r, None)
                except (ValueError, KeyError, TypeError, AttributeError, CheckpointError) as e:
                    raise CheckpointError(f"checkpoint log {self.log_path} is malformed: {e}") from None
                self.log_entries += 1
                lsn = max(lsn, batch_lsn)
                good += len(line.encode())
        fd = os.open(self.log_path, os.O_WRONLY | os.O_NOFOLLOW)   # drop a torn tail before appending
        try:
            os.ftruncate(fd, good)
        finally:
            os.close(fd)
        self._open_log(sid)
        return lsn
