"""``COPY … FROM STDIN`` and ``COPY … TO STDOUT``: options, and the rows of what a client sent.

Both text format (tab-separated, ``\\N`` for NULL, backslash escapes) and CSV (``FORMAT csv``,
``HEADER``, ``DELIMITER``, ``NULL``, ``QUOTE``), in the option syntax of PostgreSQL 9+ and in
the older one psql's ``\\copy … with csv header`` still sends. ``COPY (query) TO STDOUT`` runs
the query like any read (served views included); ``COPY t TO STDOUT`` reads ``t``. Binary
COPY is refused (0A000). What a client sends is spooled to a temporary file first, so a large
``COPY`` uses bounded memory until it is complete, and nothing is applied if it is cut short.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from ..session.router import Route
from .results import CopyOut, parse_copy_text
from ..identifiers import IDENT
from .sqlstate import ServeError

_IDENT = IDENT
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})*"
_IN = re.compile(rf"\s*COPY\s+(?P<table>{_NAME})\s*(?P<cols>\([^()]*\))?\s*FROM\s+STDIN\b(?P<opts>.*)", re.IGNORECASE | re.DOTALL)
_OUT_Q = re.compile(r"\s*COPY\s*\((?P<query>.*)\)\s*TO\s+STDOUT\b(?P<opts>.*)", re.IGNORECASE | re.DOTALL)
_OUT_T = re.compile(rf"\s*COPY\s+(?P<table>{_NAME})\s*(?P<cols>\([^()]*\))?\s*TO\s+STDOUT\b(?P<opts>.*)", re.IGNORECASE | re.DOTALL)


@dataclass
class CopyFormat:
    direction: str                  # "in" or "out"
    fmt: str = "text"
    delimiter: str = "\t"
    null: str = "\\N"
    header: bool = False
    quote: str = '"'
    columns: list[str] | None = None
    query: str | None = None        # out: the SELECT to run

    @property
    def out(self) -> CopyOut:
        return CopyOut(self.fmt, self.delimiter, self.null, self.header)


def _unquote(s: str) -> str:
    s = s.strip()
    if s.upper().startswith("E'") and s.endswith("'"):
        return s[2:-1].encode().decode("unicode_escape")
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1].replace(s[0] * 2, s[0])
    return s


def _parse_options(text: str, f: CopyFormat) -> None:
    text = text.strip().rstrip(";").strip()
    if text.upper().startswith("WITH"):
        text = text[4:].strip()
    if text.startswith("("):
        body = text[1:text.rfind(")")]
        parts = [p.strip() for p in re.split(r",(?=(?:[^']*'[^']*')*[^']*$)", body) if p.strip()]
        for part in parts:
            key, _, value = part.partition(" ")
            key = key.lower()
            value = _unquote(value) if value else ""
            if key == "format":
                f.fmt = value.lower()
            elif key == "delimiter":
                f.delimiter = value
            elif key == "null":
                f.null = value
            elif key == "header":
                f.header = value.lower() not in ("false", "off", "0")
            elif key == "quote":
                f.quote = value
            elif key in ("encoding", "escape", "force_quote", "force_not_null", "force_null", "freeze"):
                continue
            else:
                raise ServeError("42601", f'option "{key}" not recognized')
    else:
        tokens = re.findall(r"E?'(?:[^']|'')*'|\S+", text)
        i = 0
        while i < len(tokens):
            t = tokens[i].upper()
            if t == "CSV":
                f.fmt = "csv"
            elif t == "BINARY":
                f.fmt = "binary"
            elif t == "HEADER":
                f.header = True
            elif t in ("DELIMITER", "NULL", "QUOTE", "ESCAPE"):
                i += 1
                if i < len(tokens) and tokens[i].upper() == "AS":
                    i += 1
                value = _unquote(tokens[i]) if i < len(tokens) else ""
                if t == "DELIMITER":
                    f.delimiter = value
                elif t == "NULL":
                    f.null = value
                elif t == "QUOTE":
                    f.quote = value
            elif t in ("FORCE", "NOT", "QUOTE", "ENCODING"):
                pass
            i += 1
    if f.fmt == "binary":
        raise ServeError("0A000", "binary COPY is not supported by ivm serve: use FORMAT text or csv")
    if f.fmt not in ("text", "csv"):
        raise ServeError("22023", f'COPY format "{f.fmt}" not recognized')
    if f.fmt == "csv":
        if f.delimiter == "\t" and "delimiter" not in text.lower():
            f.delimiter = ","
        if f.null == "\\N" and "null" not in text.lower():
            f.null = ""


def _columns(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [c.strip().strip('"') for c in text[1:-1].split(",") if c.strip()]


def copy_options(text: str, r: Route) -> CopyFormat | None:
    """How a ``COPY`` to or from the client is to be run; ``None`` for anything else."""
    if not re.match(r"\s*COPY\b", text, re.IGNORECASE):
        return None
    m = _IN.fullmatch(text)
    if m:
        f = CopyFormat("in", columns=_columns(m.group("cols")))
        _parse_options(m.group("opts"), f)
        return f
    m = _OUT_Q.fullmatch(text)
    if m:
        f = CopyFormat("out", query=m.group("query").strip())
        _parse_options(m.group("opts"), f)
        return f
    m = _OUT_T.fullmatch(text)
    if m:
        cols = _columns(m.group("cols"))
        sel = ", ".join(f'"{c}"' for c in cols) if cols else "*"
        f = CopyFormat("out", columns=cols, query=f"SELECT {sel} FROM {m.group('table')}")
        _parse_options(m.group("opts"), f)
        return f
    return None


def copy_in_rows(data, f: CopyFormat, ncols: int) -> list[tuple]:
    """The rows in a spooled ``COPY FROM STDIN`` payload (a binary file object)."""
    data.seek(0)
    text = io.TextIOWrapper(data, encoding="utf-8", newline="")
    rows: list[tuple] = []
    if f.fmt == "csv":
        reader = csv.reader(text, delimiter=f.delimiter, quotechar=f.quote)
        first = True
        for cells in reader:
            if first and f.header:
                first = False
                continue
            first = False
            if cells == ["\\."]:
                break
            rows.append(_check(tuple(None if c == f.null else c for c in cells), ncols, len(rows)))
    else:
        lines = text.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for i, line in enumerate(lines):
            line = line.removesuffix("\r")
            if line == "\\.":
                break
            if i == 0 and f.header:
                continue
            rows.append(_check(tuple(parse_copy_text(line, f.delimiter, f.null)), ncols, len(rows)))
    text.detach()
    return rows


def _check(row: tuple, ncols: int, line: int) -> tuple:
    if len(row) < ncols:
        raise ServeError("22P04", f"missing data for column {len(row) + 1}", detail=f"COPY line {line + 1}")
    if len(row) > ncols:
        raise ServeError("22P04", "extra data after last expected column", detail=f"COPY line {line + 1}")
    return row
