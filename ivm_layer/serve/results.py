"""What a statement hands back to the wire: columns, a lazy row iterator, a command tag.

A backend (:mod:`.embedded`, :mod:`.proxy`) answers a statement with a :class:`Result`. Rows
are produced lazily in the worker thread (the engine's enumeration, DuckDB's streaming
result) and encoded as DataRow messages by a :class:`RowEncoder` in the formats the client
asked for. A result that reads the engine holds the views' gate shared (``release`` gives it
back); when a writer waits, or when a portal is suspended half-read, the rest of the rows is
moved into a :class:`Spool` — memory up to a bound, then a temporary file — so neither a
writer nor the client's connection waits on a slow reader.
"""

from __future__ import annotations

import contextlib
import pickle
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from . import codec, pgtypes
from .pgcompat import column_name

#: yielded by a row iterator that has nothing more for now (a subscription between commits):
#: the sender puts out the rows it holds instead of waiting to fill a chunk
FLUSH = object()


@dataclass(frozen=True)
class Column:
    name: str
    oid: int
    typlen: int = -1
    typmod: int = -1

    @classmethod
    def of(cls, name: str, duck_type: str) -> Column:
        oid, typlen, typmod = pgtypes.pg_type(duck_type)
        return cls(name, oid, typlen, typmod)


@dataclass
class Result:
    """One statement's answer. ``columns`` is None for a command without rows; ``tag`` is the
    command tag without the row count for row-returning commands (``SELECT``, ``INSERT 0``,
    ``UPDATE`` …: the count is appended), or the full tag (``CREATE TABLE``) otherwise."""

    tag: str
    columns: list[Column] | None = None
    rows: Iterator[tuple] | None = None
    count_in_tag: bool = True
    rowcount: int | None = None           # a command's own count (UPDATE 3) when it has no rows
    release: Callable[[], None] | None = None
    holds_gate: bool = False
    copy_out: CopyOut | None = None
    copy_in: CopyIn | None = None
    stream: object | None = None          # a subscription (never ends by itself)
    notice: tuple[str, str] | None = None  # (SQLSTATE, message) sent as a NoticeResponse/WARNING
    raw_formats: list[int] | None = None   # rows are already wire values (bytes) in these formats
    tag_source: Callable[[], str] | None = None  # the command tag known only at the end (a proxy)

    def close(self) -> None:
        rel, self.release = self.release, None
        self.holds_gate = False
        if rel is not None:
            rel()

    def complete_tag(self, n: int) -> str:
        if self.tag_source is not None and (tag := self.tag_source()):
            return tag
        if not self.count_in_tag:
            return self.tag
        if self.columns is None and self.rowcount is not None:
            return f"{self.tag} {self.rowcount}"
        return f"{self.tag} {n}"


@dataclass
class CopyOut:
    """``COPY … TO STDOUT``: rows are sent as CopyData lines in ``fmt`` (text or csv)."""

    fmt: str = "text"
    delimiter: str = "\t"
    null: str = "\\N"
    header: bool = False
    names: list[str] = field(default_factory=list)
    raw: bool = False               # rows are CopyData payloads already (a proxied COPY)


@dataclass
class CopyIn:
    """``COPY … FROM STDIN``: the backend's ``finish(data_file)`` loads what the client sent."""

    columns: int
    finish: Callable[[object], Result]
    fmt: str = "text"


@dataclass(frozen=True)
class RawParams:
    """Bind parameters as the client sent them (a proxy forwards them untouched)."""

    values: tuple[bytes | None, ...]
    formats: tuple[int, ...]
    oids: tuple[int, ...]


class RawEncoder:
    """Rows that are wire values already: only framed as DataRow messages."""

    def __init__(self, formats: list[int]):
        self.formats = formats

    def fields(self, columns: list[Column]) -> list[tuple[str, int, int, int, int]]:
        return [(c.name, c.oid, c.typlen, c.typmod, f) for c, f in zip(columns, self.formats)]

    def __call__(self, row) -> bytes:
        return codec.data_row(row)


class RowEncoder:
    """Values → DataRow bytes, one encoder per column in the format the client asked for."""

    def __init__(self, columns: list[Column], formats: Callable[[int], int] | None = None):
        encs = []
        self.formats = []
        for i, c in enumerate(columns):
            fmt = formats(i) if formats is not None else 0
            enc = pgtypes.binary_encoder(c.oid) if fmt == 1 else None
            if enc is None:
                fmt = 0
                enc = pgtypes.text_encoder(c.oid)
            self.formats.append(fmt)
            encs.append(enc)
        self.encoders = encs

    def fields(self, columns: list[Column]) -> list[tuple[str, int, int, int, int]]:
        return [(c.name, c.oid, c.typlen, c.typmod, f) for c, f in zip(columns, self.formats)]

    def __call__(self, row) -> bytes:
        return codec.data_row([None if v is None else enc(v) for enc, v in zip(self.encoders, row)])


class Spool:
    """Rows kept for later: in memory up to ``memory_rows``, then pickled to a temporary file
    in chunks. Iterating gives them back in order, once."""

    def __init__(self, memory_rows: int = 100_000):
        self.memory_rows = memory_rows
        self._mem: list[tuple] = []
        self._file = None
        self._chunks = 0
        self.rows = 0

    def extend(self, rows: Iterator[tuple], chunk: int = 8192) -> None:
        it = iter(rows)
        while True:
            part = list(islice(it, chunk))
            if not part:
                return
            self.rows += len(part)
            if self._file is None and len(self._mem) + len(part) <= self.memory_rows:
                self._mem.extend(part)
                continue
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="ivm-serve-spool-")  # noqa: SIM115
            pickle.dump(part, self._file, protocol=pickle.HIGHEST_PROTOCOL)
            self._chunks += 1

    def __iter__(self) -> Iterator[tuple]:
        yield from self._mem
        self._mem = []
        if self._file is not None:
            self._file.seek(0)
            for _ in range(self._chunks):
                yield from pickle.load(self._file)
            self.close()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def spill(result: Result, memory_rows: int) -> None:
    """Move the rest of ``result``'s rows into a :class:`Spool` and release what it holds."""
    if result.rows is None:
        result.close()
        return
    spool = Spool(memory_rows)
    try:
        spool.extend(result.rows)
    finally:
        result.close()
    result.rows = iter(spool)


# -- COPY text and CSV --------------------------------------------------------------------------

_ESC = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
                      "\v": "\\v"})


def copy_line(values: list[bytes | None], out: CopyOut) -> bytes:
    """One row in COPY's text or CSV format (values already in PostgreSQL's text output)."""
    cells = []
    if out.fmt == "csv":
        for v in values:
            if v is None:
                cells.append(out.null)
                continue
            s = v.decode("utf-8")
            if any(ch in s for ch in (out.delimiter, '"', "\n", "\r")) or s == "" or s == out.null:
                s = '"' + s.replace('"', '""') + '"'
            cells.append(s)
    else:
        for v in values:
            cells.append(out.null if v is None else v.decode("utf-8").translate(_ESC))
    return (out.delimiter.join(cells) + "\n").encode("utf-8")


def parse_copy_text(line: str, delimiter: str = "\t", null: str = "\\N") -> list[str | None]:
    """One line of COPY's text format → cells (``None`` for NULL), backslash escapes undone."""
    out: list[str | None] = []
    for raw in line.split(delimiter):
        if raw == null:
            out.append(None)
            continue
        if "\\" not in raw:
            out.append(raw)
            continue
        buf = []
        i = 0
        while i < len(raw):
            ch = raw[i]
            if ch == "\\" and i + 1 < len(raw):
                nxt = raw[i + 1]
                buf.append({"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "v": "\v"}.get(nxt, nxt))
                i += 2
                continue
            buf.append(ch)
            i += 1
        out.append("".join(buf))
    return out


# -- command tags and result columns -----------------------------------------------------------

def command_tag(r) -> str:
    """The CommandComplete tag of a routed statement (without its row count)."""
    kind = r.kind
    if kind == "read":
        return "SELECT"
    fixed = {"insert": "INSERT 0", "update": "UPDATE", "delete": "DELETE", "merge": "MERGE",
             "copy_from": "COPY", "truncate": "TRUNCATE TABLE", "create_view": "CREATE VIEW"}
    if kind in fixed:
        return fixed[kind]
    words = re.findall(r"[A-Za-z]+", _head(r.text))[:3]
    if not words:
        return "OK"
    w = [x.upper() for x in words]
    if w[0] in ("CREATE", "DROP", "ALTER") and len(w) > 1:
        if w[1] in ("OR", "TEMP", "TEMPORARY", "UNIQUE") and len(w) > 2:
            return f"{w[0]} {w[2] if w[1] != 'UNIQUE' else 'INDEX'}"
        return f"{w[0]} {w[1]}"
    return w[0]


def _head(text: str) -> str:
    return re.sub(r"(?:\s+|--[^\n]*|/\*.*?\*/)+", " ", text[:200], flags=re.DOTALL).strip()


def description_columns(desc) -> list[Column]:
    """Columns of a DuckDB result description, named as PostgreSQL names them."""
    return [Column.of(column_name(d[0]), str(d[1])) for d in desc]
