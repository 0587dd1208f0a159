"""Statements ``ivm serve`` answers itself, read by their leading words (no SQL parser).

- ``SET``/``SHOW``/``RESET`` of PostgreSQL settings (:mod:`.settings`), ``SET TRANSACTION``,
  ``DISCARD``, ``DEALLOCATE``, ``LISTEN``, ``SAVEPOINT``/``RELEASE``;
- the incremental-view extras, Materialize-style: ``SHOW INCREMENTAL VIEWS``,
  ``EXPLAIN INCREMENTAL VIEW v``, ``SUBSCRIBE [TO] v [WHERE input = value [AND …]]
  [WITH (SNAPSHOT = false, RESUME FROM n, PROGRESS)] [AS OF n]`` and
  ``COPY (SUBSCRIBE …) TO STDOUT``.

:func:`parse` returns one of the dataclasses below, or ``None`` for every other statement
(which goes to the database). View names are taken as identifiers only — a name with quotes,
semicolons or anything but an identifier is refused (42601), so nothing a client writes after
``SUBSCRIBE`` reaches SQL text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..identifiers import IDENT
from ..sql.sqltext import unquote
from .sqlstate import ServeError

_IDENT = IDENT
_HEAD = re.compile(r"\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*([A-Za-z]+)", re.DOTALL)


@dataclass(frozen=True)
class SetCmd:
    name: str
    value: str | None          # None: DEFAULT (reset)
    local: bool = False


@dataclass(frozen=True)
class ShowCmd:
    name: str


@dataclass(frozen=True)
class ResetCmd:
    name: str


@dataclass(frozen=True)
class ShowViews:
    pass


@dataclass(frozen=True)
class ExplainView:
    name: str


@dataclass(frozen=True)
class Noop:
    tag: str


@dataclass(frozen=True)
class Deallocate:
    name: str | None           # None: ALL


@dataclass(frozen=True)
class Savepoint:
    verb: str                  # SAVEPOINT, RELEASE, ROLLBACK TO
    name: str


@dataclass(frozen=True)
class Subscribe:
    view: str
    inputs: tuple[tuple[str, str], ...] = ()   # (input name, value text: literal or $n)
    snapshot: bool = True
    resume: int | None = None
    progress: bool = False
    copy: bool = False
    copy_options: dict = field(default_factory=dict, compare=False)


def ident(text: str) -> str:
    """An identifier as PostgreSQL resolves it (quoted: as written; else ASCII lower-cased); the
    session then finds the view by :func:`ivm_layer.identifiers.resolve`."""
    return unquote(text, "postgres")


def _value(text: str) -> str:
    text = text.strip()
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1].replace("''", "'")
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    return text


def _strip(text: str) -> str:
    text = text.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


_SET = re.compile(rf"SET\s+(?:(SESSION|LOCAL)\s+)?({_IDENT}(?:\.{_IDENT})?)\s*(?:=|\s+TO\s+)\s*(.+)", re.IGNORECASE | re.DOTALL)
_SET_TZ = re.compile(r"SET\s+(?:(SESSION|LOCAL)\s+)?TIME\s+ZONE\s+(.+)", re.IGNORECASE | re.DOTALL)
_SET_NAMES = re.compile(r"SET\s+NAMES\s+(.+)", re.IGNORECASE | re.DOTALL)
_SHOW = re.compile(rf"SHOW\s+({_IDENT}(?:\.{_IDENT})?|TRANSACTION\s+ISOLATION\s+LEVEL|TIME\s+ZONE|ALL)", re.IGNORECASE)
_RESET = re.compile(rf"RESET\s+({_IDENT}(?:\.{_IDENT})?|ALL|TIME\s+ZONE)", re.IGNORECASE)
_SHOW_VIEWS = re.compile(r"SHOW\s+INCREMENTAL\s+(?:MATERIALIZED\s+)?VIEWS", re.IGNORECASE)
_EXPLAIN_VIEW = re.compile(rf"EXPLAIN\s+INCREMENTAL\s+(?:MATERIALIZED\s+)?VIEW\s+({_IDENT})", re.IGNORECASE)
_SUBSCRIBE = re.compile(
    rf"SUBSCRIBE\s+(?:TO\s+)?(?P<view>{_IDENT})"
    rf"(?:\s+WHERE\s+(?P<where>.+?))?"
    rf"(?:\s+WITH\s*\((?P<with>[^()]*)\))?"
    rf"(?:\s+AS\s+OF\s+(?P<asof>\d+))?",
    re.IGNORECASE | re.DOTALL)
_COPY_SUB = re.compile(r"COPY\s*\(\s*(?P<sub>SUBSCRIBE\b.*)\)\s*TO\s+STDOUT(?:\s+(?:WITH\s*)?\((?P<opts>[^()]*)\))?"
                       r"(?:\s+(?P<bare>.*))?", re.IGNORECASE | re.DOTALL)
_COND = re.compile(rf"({_IDENT})\s*=\s*('(?:[^']|'')*'|-?\d+(?:\.\d+)?|\$\d+|TRUE|FALSE)", re.IGNORECASE)
_SHOW_ALIASES = {"transaction isolation level": "transaction_isolation", "time zone": "timezone"}


def parse(text: str):
    """The command ``text`` is, or ``None`` when the database should run it."""
    m = _HEAD.match(text)
    if not m:
        return None
    head = m.group(1).upper()
    if head not in ("SET", "SHOW", "RESET", "EXPLAIN", "SUBSCRIBE", "COPY", "DISCARD", "DEALLOCATE",
                    "LISTEN", "UNLISTEN", "SAVEPOINT", "RELEASE", "ROLLBACK", "NOTIFY"):
        return None
    body = _strip(text[m.start(1):])
    if head == "SET":
        return _set(body)
    if head == "SHOW":
        if _SHOW_VIEWS.fullmatch(body):
            return ShowViews()
        sm = _SHOW.fullmatch(body)
        if sm:
            name = " ".join(sm.group(1).lower().split())
            return ShowCmd(_SHOW_ALIASES.get(name, ident(sm.group(1)) if "." not in name else name))
        return None
    if head == "RESET":
        rm = _RESET.fullmatch(body)
        if rm:
            name = " ".join(rm.group(1).lower().split())
            return ResetCmd(_SHOW_ALIASES.get(name, name))
        return None
    if head == "EXPLAIN":
        em = _EXPLAIN_VIEW.fullmatch(body)
        if em:
            return ExplainView(ident(em.group(1)))
        if re.match(r"EXPLAIN\s+INCREMENTAL\b", body, re.IGNORECASE):
            raise ServeError("42601", "syntax: EXPLAIN INCREMENTAL VIEW name")
        return None
    if head == "SUBSCRIBE":
        return subscribe(body)
    if head == "COPY":
        cm = _COPY_SUB.fullmatch(body)
        if not cm:
            if re.match(r"COPY\s*\(\s*SUBSCRIBE\b", body, re.IGNORECASE):
                raise ServeError("42601", "syntax: COPY (SUBSCRIBE v …) TO STDOUT [WITH (FORMAT text|csv)]")
            return None
        sub = subscribe(_strip(cm.group("sub")))
        opts = _options(cm.group("opts") or cm.group("bare") or "")
        return Subscribe(sub.view, sub.inputs, sub.snapshot, sub.resume, sub.progress, True, opts)
    if head == "DISCARD":
        return Noop("DISCARD ALL" if re.search(r"\bALL\b", body, re.IGNORECASE) else "DISCARD")
    if head == "DEALLOCATE":
        dm = re.fullmatch(rf"DEALLOCATE\s+(?:PREPARE\s+)?({_IDENT}|ALL)", body, re.IGNORECASE)
        if not dm:
            return None
        return Deallocate(None if dm.group(1).upper() == "ALL" else ident(dm.group(1)))
    if head in ("LISTEN", "UNLISTEN", "NOTIFY"):
        return Noop(head)
    if head == "SAVEPOINT":
        return Savepoint("SAVEPOINT", body.split(None, 1)[1] if len(body.split()) > 1 else "")
    if head == "RELEASE":
        return Savepoint("RELEASE", body.split()[-1])
    if head == "ROLLBACK":
        rm = re.fullmatch(rf"ROLLBACK\s+(?:WORK\s+|TRANSACTION\s+)?TO\s+(?:SAVEPOINT\s+)?({_IDENT})", body, re.IGNORECASE)
        return Savepoint("ROLLBACK TO", rm.group(1)) if rm else None
    return None


def _set(body: str):
    if re.match(r"SET\s+(?:SESSION\s+CHARACTERISTICS\s+AS\s+)?TRANSACTION\b", body, re.IGNORECASE):
        return Noop("SET")
    if re.match(r"SET\s+(?:SESSION\s+|LOCAL\s+)?(?:SESSION\s+AUTHORIZATION|ROLE)\b", body, re.IGNORECASE):
        return Noop("SET")
    tz = _SET_TZ.fullmatch(body)
    if tz:
        return SetCmd("TimeZone", _value(tz.group(2)), (tz.group(1) or "").upper() == "LOCAL")
    nm = _SET_NAMES.fullmatch(body)
    if nm:
        return SetCmd("client_encoding", _value(nm.group(1)))
    sm = _SET.fullmatch(body)
    if not sm:
        return None
    name = sm.group(2)
    raw = sm.group(3).strip()
    if raw.upper() == "DEFAULT":
        return SetCmd(name, None, (sm.group(1) or "").upper() == "LOCAL")
    parts = [_value(p) for p in _split_values(raw)]
    return SetCmd(name if name.startswith('"') is False else ident(name), ", ".join(parts),
                  (sm.group(1) or "").upper() == "LOCAL")


def _split_values(raw: str) -> list[str]:
    out, cur, q = [], [], None
    for ch in raw:
        if q:
            cur.append(ch)
            if ch == q:
                q = None
        elif ch in "'\"":
            q = ch
            cur.append(ch)
        elif ch == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


def _options(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in _split_values(text):
        kv = re.fullmatch(r"([A-Za-z_]+(?:\s+FROM)?)\s*(?:=\s*|\s+)?(.*)", part.strip(), re.DOTALL)
        if not kv:
            raise ServeError("42601", f"cannot read option {part!r}")
        out[" ".join(kv.group(1).lower().split())] = _value(kv.group(2)) if kv.group(2) else ""
    return out


def _truth(v: str, name: str) -> bool:
    low = v.lower()
    if low in ("", "true", "on", "1", "yes"):
        return True
    if low in ("false", "off", "0", "no"):
        return False
    raise ServeError("22023", f"{name} takes true or false, not {v!r}")


def subscribe(body: str) -> Subscribe:
    m = _SUBSCRIBE.fullmatch(body)
    if not m:
        raise ServeError("42601", "syntax: SUBSCRIBE [TO] view [WHERE input = value [AND …]] "
                                  "[WITH (SNAPSHOT = true|false, RESUME FROM n, PROGRESS)] [AS OF n]")
    inputs: list[tuple[str, str]] = []
    if m.group("where"):
        conds = re.split(r"\s+AND\s+", m.group("where").strip(), flags=re.IGNORECASE)
        for c in conds:
            cm = _COND.fullmatch(c.strip())
            if not cm:
                raise ServeError("42601", f"SUBSCRIBE … WHERE takes input = value conditions joined by AND, "
                                          f"not {c.strip()!r}")
            inputs.append((ident(cm.group(1)), cm.group(2)))
    opts = _options(m.group("with") or "")
    snapshot, resume, progress = True, None, False
    for k, v in opts.items():
        if k == "snapshot":
            snapshot = _truth(v, "SNAPSHOT")
        elif k in ("resume from", "resume", "as of"):
            if not re.fullmatch(r"\d+", v):
                raise ServeError("22023", f"RESUME FROM takes an ivm_progress value, not {v!r}")
            resume = int(v)
        elif k == "progress":
            progress = _truth(v, "PROGRESS")
        else:
            raise ServeError("42601", f"unknown SUBSCRIBE option {k!r} (SNAPSHOT, RESUME FROM, PROGRESS)")
    if m.group("asof"):
        resume = int(m.group("asof"))
    if resume is not None:
        snapshot = False
    return Subscribe(ident(m.group("view")), tuple(inputs), snapshot, resume, progress)
