"""Turn results into text: psql-style aligned tables, expanded records (``\\x``), CSV, JSON.

Aligned output ends with a row count (``(3 rows)``); NULL is drawn as the ``null`` string of
:class:`Display` (``NULL`` by default, dimmed on a colour terminal so it differs from the
string ``'NULL'``); CSV writes NULL as an empty field, JSON as ``null``. When ``width`` is
known (a terminal), wide tables are fitted to it: long values are cut with ``…``, the widest
columns first, and columns that still do not fit are left out with a note saying which.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

_DIM, _RESET = "\x1b[2m", "\x1b[0m"
_MIN_WIDTH = 6          # a column is never cut narrower than this (or its natural width)


@dataclass
class Display:
    """How results are shown; ``\\x`` and ``\\timing`` change it at run time."""

    format: str = "aligned"     # "aligned" | "csv" | "json"
    expanded: str = "off"       # "off" | "on" | "auto" (expanded when a table is too wide)
    timing: bool = False        # print "Time: … ms" after each statement
    quiet: bool = False         # no command tags, banner or timing
    null: str = "NULL"
    color: bool = False         # dim NULLs (a terminal)
    width: int | None = None    # fit tables to this many characters; None: never cut


def format_value(v: object) -> str:
    """A non-NULL value as text, the way the database's own CLI would show it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return v.replace("\r\n", "\n").replace("\t", "\\t")
    return str(v)


def one_line(text: str) -> str:
    """``text`` with line breaks shown as ``\\n`` (``\\watch`` change lines)."""
    return text.replace("\n", "\\n")


def _json_value(v: object):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (datetime.date, datetime.time, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, (decimal.Decimal, uuid.UUID, datetime.timedelta)):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    return str(v)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


class _Cell:
    """One value as the lines it is drawn on (psql draws a value with line breaks on several
    lines, ``+`` marking the lines that continue)."""

    __slots__ = ("lines", "null", "right", "width")

    def __init__(self, v: object, display: Display):
        self.null = v is None
        self.lines = (display.null if v is None else format_value(v)).split("\n")
        self.width = max(len(ln) for ln in self.lines)
        self.right = _is_number(v)

    def draw(self, i: int, width: int, display: Display) -> str:
        """Line ``i`` of the value, padded (or cut) to ``width``; blank past its last line."""
        text = _cut(self.lines[i], width) if i < len(self.lines) else ""
        pad = " " * (width - len(text))
        if self.null and display.color:
            text = _DIM + text + _RESET
        return pad + text if self.right else text + pad

    def more(self, i: int) -> bool:
        return i + 1 < len(self.lines)


def _fit(natural: list[int], headers: list[str], width: int) -> tuple[list[int], int]:
    """Column widths fitting ``width`` and how many leading columns are shown."""
    def total(ws: Sequence[int]) -> int:
        return sum(ws) + 3 * (len(ws) - 1) + 2

    floors = [min(w, max(_MIN_WIDTH, min(len(h), 12))) for w, h in zip(natural, headers)]
    if total(natural) <= width:
        return natural, len(natural)
    shown = len(natural)
    while shown > 1 and total(floors[:shown]) > width - 2:  # leave room for the "…" column mark
        shown -= 1
    nat, flo = natural[:shown], floors[:shown]
    room = width - (2 if shown < len(natural) else 0)
    lo, hi = 0, max(nat)
    while lo < hi:  # the largest cap c with sum(max(floor, min(w, c))) fitting
        mid = (lo + hi + 1) // 2
        if total([max(f, min(w, mid)) for w, f in zip(nat, flo)]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return [max(f, min(w, lo)) for w, f in zip(nat, flo)], shown


def _center(text: str, width: int) -> str:
    """psql's centring: an odd space goes to the right."""
    left = (width - len(text)) // 2
    return " " * left + text + " " * (width - len(text) - left)


def _rows_footer(n: int) -> str:
    return f"({n} row{'' if n == 1 else 's'})"


def render_aligned(columns: list[str], rows: list[tuple], display: Display) -> str:
    """A psql-style table: centred headers, numbers right-aligned, ``(n rows)`` below; a value
    with line breaks takes several lines, each but its last marked ``+``."""
    cells = [[_Cell(v, display) for v in row] for row in rows]
    natural = [max([len(c)] + [r[i].width for r in cells]) for i, c in enumerate(columns)]
    widths, shown = natural, len(columns)
    if display.width is not None and columns:
        widths, shown = _fit(natural, list(columns), display.width)
    more = shown < len(columns)
    tail = " | …" if more else ""
    out = []
    head = " | ".join(_center(_cut(c, w), w) for c, w in zip(columns[:shown], widths))
    out.append(" " + head + tail)
    out.append("-" + "-+-".join("-" * w for w in widths) + ("-+--" if more else "-"))
    for r in cells:
        row = r[:shown]
        height = max((len(c.lines) for c in row), default=1)
        for i in range(height):
            segs = [c.draw(i, w, display) + ("+" if c.more(i) else " ") for c, w in zip(row, widths)]
            out.append(" " + "| ".join(segs) + tail)
    out = [ln.rstrip() for ln in out]
    out.append(_rows_footer(len(rows)))
    if more:
        hidden = columns[shown:]
        what = f"{len(hidden)} column{'' if len(hidden) == 1 else 's'} not shown"
        note = f"({what}: {', '.join(hidden)}; \\x shows every column)"
        if display.width is not None and len(note) > display.width:
            note = f"({what}; \\x shows every column)"
        out.append(note)
    return "\n".join(out) + "\n\n"


def render_expanded(columns: list[str], rows: list[tuple], display: Display) -> str:
    """One ``-[ RECORD n ]`` block per row, ``column | value`` lines (psql's ``\\x``): every
    record line as wide as the widest line of the result, no row count."""
    if not rows:
        return "(0 rows)\n\n"
    kw = max(len(c) for c in columns) if columns else 0
    vw = None if display.width is None else max(display.width - kw - 3, _MIN_WIDTH)
    blocks = [[_Cell(v, display) for v in row] for row in rows]
    widest = max(min(c.width, vw) if vw is not None else c.width for cells in blocks for c in cells) \
        if columns else 0
    out = []
    for n, cells in enumerate(blocks, 1):
        title = f"-[ RECORD {n} ]"
        if len(title) < kw + 1:
            title += "-" * (kw + 1 - len(title)) + "+" + "-" * (widest + 1)
        else:
            title += "-" * max(kw + 3 + widest - len(title), 0)
        out.append(title)
        for col, cell in zip(columns, cells):
            for i in range(len(cell.lines)):
                key = col.ljust(kw) if i == 0 else " " * kw
                w = min(widest, vw) if vw is not None else widest
                text = _cut(cell.lines[i], w)
                if cell.more(i):
                    text = text.ljust(w) + "+"
                elif cell.null and display.color:
                    text = _DIM + text + _RESET
                out.append(f"{key} | {text}".rstrip())
    return "\n".join(out) + "\n\n"


def render_plan(rows: list[tuple]) -> str:
    """DuckDB's ``EXPLAIN`` result (``explain_key``, ``explain_value`` rows holding a drawn
    plan) as its lines, the way DuckDB's CLI prints it."""
    return "".join(str(value).rstrip("\n") + "\n" for _key, value in rows) + "\n"


def render_csv(columns: list[str], rows: list[tuple]) -> str:
    """RFC 4180 CSV with a header line; NULL is an empty field."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow(["" if v is None else format_value(v) if not isinstance(v, str) else v for v in row])
    return buf.getvalue()


def render_json(columns: list[str], rows: list[tuple]) -> str:
    """One line: a JSON array with one object per row (NULL → null)."""
    return json.dumps([{c: _json_value(v) for c, v in zip(columns, row)} for row in rows],
                      ensure_ascii=False) + "\n"


def table_width(columns: list[str], rows: list[tuple], display: Display) -> int:
    """The width of the aligned table of these rows, uncut."""
    natural = [max([len(c)] + [max(map(len, (display.null if r[i] is None else format_value(r[i])).split("\n")))
                               for r in rows]) for i, c in enumerate(columns)]
    return sum(natural) + 3 * (len(natural) - 1) + 2


def render_result(columns: list[str], rows: list[tuple], display: Display) -> str:
    """Rows in the display's format (and expanded mode)."""
    if display.format == "csv":
        return render_csv(columns, rows)
    if display.format == "json":
        return render_json(columns, rows)
    expanded = display.expanded == "on" or (
        display.expanded == "auto" and display.width is not None and rows
        and table_width(columns, rows, display) > display.width)
    if expanded:
        return render_expanded(columns, rows, display)
    return render_aligned(columns, rows, display)


def render_change(columns: list[str], row: tuple, k: int, display: Display) -> str:
    """One line of ``\\watch``: ``+ v1 | v2`` (an insertion) or ``- v1 | v2`` (a deletion), with
    ``(×k)`` when the multiplicity changed by more than one; JSON/CSV for scripts."""
    op = "+" if k > 0 else "-"
    if display.format == "json":
        return json.dumps({"op": op, "count": abs(k),
                           "row": {c: _json_value(v) for c, v in zip(columns, row)}},
                          ensure_ascii=False) + "\n"
    if display.format == "csv":
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(
            [op, abs(k)] + ["" if v is None else v if isinstance(v, str) else format_value(v) for v in row])
        return buf.getvalue()
    vals = []
    for v in row:
        text = display.null if v is None else one_line(format_value(v))
        vals.append(_DIM + text + _RESET if v is None and display.color else text)
    line = f"{op} " + " | ".join(vals)
    if abs(k) > 1:
        line += f"   (×{abs(k)})"
    return line + "\n"


_QUERY_WORDS = {"SELECT", "WITH", "VALUES", "FROM", "TABLE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN",
                "PRAGMA", "CALL", "SUMMARIZE", "PIVOT", "UNPIVOT", "(", "FETCH"}
_OBJECT_WORDS = {"TABLE", "VIEW", "INDEX", "SCHEMA", "SEQUENCE", "ROLE", "USER", "TYPE", "FUNCTION",
                 "MACRO", "DATABASE", "EXTENSION", "SECRET", "TRIGGER", "PUBLICATION",
                 "SUBSCRIPTION", "PROCEDURE", "DOMAIN", "POLICY", "RULE", "AGGREGATE", "SERVER",
                 "TABLESPACE", "COLLATION", "CAST", "OPERATOR", "GROUP"}
_SKIP_WORDS = {"OR", "REPLACE", "TEMP", "TEMPORARY", "UNIQUE", "IF", "NOT", "EXISTS", "UNLOGGED",
               "PERSISTENT", "GLOBAL", "LOCAL", "CONCURRENTLY"}
_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+|\(")


def leading_words(sql: str, n: int = 8) -> list[str]:
    """The first keywords of a statement, upper-cased, comments skipped."""
    body = sql[_COMMENTS.match(sql).end():]
    return [w.upper() for w in _WORD.findall(body[:200])[:n]]


def is_query(sql: str) -> bool:
    """Whether the statement is meant to return rows (SELECT, WITH, SHOW, …)."""
    words = leading_words(sql, 1)
    return bool(words) and words[0] in _QUERY_WORDS


def command_tag(sql: str, rowcount: int) -> str:
    """psql's completion tag: ``INSERT 0 3``, ``UPDATE 2``, ``CREATE TABLE``, ``BEGIN``…"""
    words = leading_words(sql)
    if not words:
        return ""
    head = words[0]
    if head == "INSERT":
        return f"INSERT 0 {max(rowcount, 0)}"
    if head in ("UPDATE", "DELETE", "MERGE", "COPY"):
        return f"{head} {max(rowcount, 0)}"
    if head in ("CREATE", "DROP", "ALTER"):
        tag = [head]
        for w in words[1:]:
            if w in _SKIP_WORDS:
                continue
            tag.append(w)
            if w in _OBJECT_WORDS:
                break
        return " ".join(tag)
    return head
