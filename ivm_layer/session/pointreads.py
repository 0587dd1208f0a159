"""Reads of an incremental view that go straight to the engine, without SQL execution.

Recognised by one regular expression (a session caches the answer per statement text; ``ivm
serve`` reads it once per prepared statement), never by a parse:

- ``SELECT count(*) FROM v`` — the engine's O(1) count;
- ``SELECT * | cols FROM v [LIMIT n]`` — the engine's enumeration, stopped after n rows;
- on a parameterized view, ``SELECT * | cols | count(*) FROM v WHERE input = $1 [AND …]
  [LIMIT n]`` with exactly the view's inputs — ``view.lookup(**inputs)``: an O(1) probe and
  constant-delay enumeration for CQAP0 views.

Values are ``$n``, ``?`` (in order) or literals. Everything else (other filters, joins,
ORDER BY, expressions) goes to the database: DuckDB reads the view through the session's lazy
Arrow reader, PostgreSQL through the lookup's rows sent as arrays. Rows are yielded as they are
enumerated. Cost: the lookup and the rows, no SQL.

:class:`PointReads` is the sessions' side (DuckDB and PostgreSQL alike): a statement's shape
is read once per text (a regular expression), its result description once per *shape* (the
first run of ``SELECT * FROM v WHERE a = …`` goes through the general path, whatever the
value: every later run with any value or literal is answered here), and the inputs are
converted by :mod:`.inputvalues` as the database compares them. A point read then costs the
regular-expression match, a dict probe per input and the rows: no parse, no database round trip.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from itertools import islice
from typing import Any

from ..errors import ProgrammingError
from ..identifiers import IDENT, ascii_lower
from ..sql.sqltext import unquote
from .inputvalues import coerce, family
from .results import RowsResult

_IDENT = IDENT
_VALUE = r"(?:\$\d+|\?|-?\d+(?:\.\d+)?|'(?:[^']|'')*')"
_SHAPE = re.compile(
    rf"\s*SELECT\s+(?P<sel>\*|count\s*\(\s*\*\s*\)(?:\s+(?:AS\s+)?{_IDENT})?|{_IDENT}(?:\s*,\s*{_IDENT})*)"
    rf"\s+FROM\s+(?:(?:main|public)\s*\.\s*)?(?P<view>{_IDENT})(?:\s+(?:AS\s+)?(?P<alias>(?!WHERE\b|LIMIT\b){_IDENT}))?"
    rf"(?:\s+WHERE\s+(?P<where>(?:{_IDENT}\s*\.\s*)?{_IDENT}\s*=\s*{_VALUE}"
    rf"(?:\s+AND\s+(?:{_IDENT}\s*\.\s*)?{_IDENT}\s*=\s*{_VALUE})*))?"
    rf"(?:\s+LIMIT\s+(?P<limit>\d+|\$\d+|\?))?\s*;?\s*", re.IGNORECASE | re.DOTALL)
_COND = re.compile(rf"(?:({_IDENT})\s*\.\s*)?({_IDENT})\s*=\s*({_VALUE})", re.IGNORECASE | re.DOTALL)
_COUNT = re.compile(rf"count\s*\(\s*\*\s*\)(?:\s+(?:AS\s+)?({_IDENT}))?", re.IGNORECASE)


@dataclass(frozen=True)
class Shape:
    """A statement the engine answers: ``select`` is ``None`` for ``*``, else column names;
    ``count`` for ``count(*)`` (its output name); ``conds`` are ``(column, value)`` with
    value ``("$", n)`` or ``("lit", python value)``; ``limit`` likewise or ``None``. ``head``:
    the select list as written (the result description depends on it, not on the values);
    ``nparams``: the statement parameters it takes (-1: ``?`` mixed with ``$n``)."""

    view: str
    select: tuple[str, ...] | None
    count: str | None
    conds: tuple[tuple[str, tuple], ...]
    limit: tuple | None
    head: str = ""
    nparams: int = 0


def _value(text: str, marks: list) -> tuple:
    if text == "?":
        marks.append(None)
        return ("$", len(marks))
    if text.startswith("$"):
        return ("$", int(text[1:]))
    if text.startswith("'"):
        return ("lit", text[1:-1].replace("''", "'"))
    if "." in text:
        return ("lit", Decimal(text))
    return ("lit", int(text))


def shape(text: str, dialect: str = "duckdb") -> Shape | None:
    """The engine-answerable shape of ``text``, or ``None``; names are keys by ``dialect``'s rules."""
    m = _SHAPE.fullmatch(text)
    if not m:
        return None

    def ident(name: str) -> str:
        return unquote(name, dialect)

    view = ident(m.group("view"))
    alias = ident(m.group("alias")) if m.group("alias") else view
    sel = m.group("sel")
    count = None
    select = None
    cm = _COUNT.fullmatch(sel)
    if cm:
        count = ident(cm.group(1)) if cm.group(1) else "count"
    elif sel != "*":
        select = tuple(ident(s.strip()) for s in sel.split(","))
    conds = []
    marks: list = []
    if m.group("where"):
        for q, col, val in _COND.findall(m.group("where")):
            if q and ident(q) not in (alias, view):
                return None
            conds.append((ident(col), _value(val, marks)))
    limit = _value(m.group("limit"), marks) if m.group("limit") else None
    numbered = [v[1] for _, v in conds if v[0] == "$"] + ([limit[1]] if limit and limit[0] == "$" else [])
    nparams = len(marks) if marks else max(numbered, default=0)
    if marks and "$" in text:
        nparams = -1            # ? mixed with $n: the general path says what the database says
    return Shape(view, select, count, tuple(conds), limit, " ".join(sel.split()), nparams)


def bind(value: tuple, params) -> object:
    kind, v = value
    if kind == "$":
        if params is None or v > len(params):
            raise IndexError(f"there is no parameter ${v}")
        return params[v - 1]
    return v


def rows(view, sh: Shape, params, inputs: dict | None, project: list[int] | None):
    """The answer's rows (``inputs``: the lookup's values, already of the inputs' types)."""
    if sh.count is not None:
        yield (len(view) if inputs is None else sum(k for _, k in view.lookup(**inputs)),)
        return
    pairs = view.lookup(**inputs) if inputs is not None else view.rows()
    limit = None if sh.limit is None else int(bind(sh.limit, params))
    out = _expand(pairs, project)
    yield from (out if limit is None else islice(out, limit))


def _expand(pairs, project):
    for row, k in pairs:
        if project is not None:
            row = tuple(row[i] for i in project)
        if k == 1:
            yield row
        else:
            for _ in range(k):
                yield row


_family = lru_cache(maxsize=256)(family)


@dataclass
class _Plan:
    """A text known to be a point read: its view state, description, projection and, per
    condition, ``(input, value, SQL type, family)``."""

    vs: Any
    description: Any
    sh: Shape
    project: list[int] | None
    conds: list[tuple[str, tuple, str | None, str]]


class PointReads:
    """One session's point reads of parameterized views (see the module docstring).
    ``count_rows``: the result's ``rowcount`` is its number of rows (PostgreSQL's), else -1
    (DuckDB's). Per statement text the checks are made once (:class:`_Plan`); a read then
    costs a dict probe, the inputs' conversion, the lookup and its rows."""

    def __init__(self, dialect: str, count_rows: bool = False):
        self.dialect = dialect
        self.count_rows = count_rows
        self._shapes: dict[str, Shape | None] = {}
        self._descs: dict[tuple, tuple[Any, Any]] = {}     # (view, select list) -> (view state, description)
        self._plans: dict[str, _Plan] = {}

    def shape(self, text: str) -> Shape | None:
        """The statement's shape, read once per text."""
        try:
            return self._shapes[text]
        except KeyError:
            pass
        if len(self._shapes) > 4096:
            self._shapes.clear()
        sh = self._shapes[text] = shape(text, self.dialect)
        return sh

    def known(self, text: str) -> str | None:
        """The view ``text`` reads when it was answered here before (a session may then skip
        its routing), else ``None``."""
        plan = self._plans.get(text)
        return None if plan is None else plan.sh.view

    def answer(self, text: str, params, views: Mapping, cast: Callable[[Any, str], Any],
               convert: Callable[[Any], Callable[[tuple], tuple] | None] | None = None) -> RowsResult | None:
        """The engine's answer to ``text`` when it is a point read of a parameterized view whose
        result description is known, else ``None`` (the caller runs the general path and then
        :meth:`remember`). ``cast(value, type)``: the database's conversion of a value it must
        read (a string for a DATE input); ``convert(view state)``: how each output row becomes
        what the driver returns (``None``: as it is)."""
        plan = self._plans.get(text)
        if plan is None or views.get(plan.sh.view) is not plan.vs:
            plan = self._plan(text, params, views, convert)
            if plan is None:
                return None
        vs = plan.vs
        if vs.error is not None:
            return None
        sh = plan.sh
        kind = type(params)
        if kind is not list and kind is not tuple and (params is None or isinstance(params, Mapping)):
            if params is not None or sh.nparams:
                return self._count_error(sh, params)
        elif len(params) != sh.nparams:
            return self._count_error(sh, params)
        inputs = {}
        for name, value, sql_type, fam in plan.conds:
            v = params[value[1] - 1] if value[0] == "$" else value[1]
            if v is None or type(v) is not int or fam != "int":
                v = coerce(v, sql_type, fam, cast, f"input {name} of incremental view {vs.name!r}")
            inputs[name] = v
        view = vs.view
        if sh.count is None and sh.limit is None and plan.project is None:
            out: list = []
            for row, k in view.lookup(**inputs):
                if k == 1:
                    out.append(row)
                else:
                    out.extend([row] * k)
        else:
            out = list(rows(view, sh, params, inputs, plan.project))
        fix = convert(vs) if convert is not None and sh.count is None else None
        if fix is not None:
            out = [fix(r) for r in out]
        return RowsResult(plan.description, out, len(out) if self.count_rows else -1)

    @staticmethod
    def _count_error(sh: Shape, params):
        if isinstance(params, Mapping) or sh.nparams < 0:
            return   # named or mixed placeholders: the general path says
        given = 0 if params is None else len(params)
        raise ProgrammingError(f"the statement takes {sh.nparams} parameter(s), {given} were given",
                               sqlstate="42P02")

    def _plan(self, text: str, params, views: Mapping, convert) -> _Plan | None:
        sh = self.shape(text)
        if sh is None:
            return None
        vs = views.get(sh.view)
        if vs is None or vs.error is not None or not getattr(vs.view, "params", None):
            return None
        if sh.nparams < 0 or isinstance(params, Mapping):
            return None
        given = 0 if params is None else len(params)
        if given != sh.nparams:
            self._count_error(sh, params)
        got = self._descs.get((sh.view, sh.head))
        if got is None or got[0] is not vs:
            return None
        wanted = vs.view.params
        if len(sh.conds) != len(wanted) or {c for c, _ in sh.conds} != set(wanted):
            return None
        project = None
        if sh.select is not None and sh.count is None:
            index = self._index(vs)
            if any(x not in index for x in sh.select):
                return None
            project = [index[x] for x in sh.select]
        types = vs.input_types
        conds = [(c, v, types.get(c), _family(types.get(c))) for c, v in sh.conds]
        if len(self._plans) > 4096:
            self._plans.clear()
        plan = self._plans[text] = _Plan(vs, got[1], sh, project, conds)
        return plan

    def remember(self, text: str, views: Mapping, description) -> None:
        """After ``text`` ran through the general path: keep its result description for its shape."""
        sh = self._shapes.get(text)
        vs = views.get(sh.view) if sh is not None else None
        if vs is None or description is None or not getattr(vs.view, "params", None):
            return
        if len(self._descs) > 1024:
            self._descs.clear()
        self._descs[(sh.view, sh.head)] = (vs, description)

    def _index(self, vs) -> dict[str, int]:
        if self.dialect == "postgres":
            return {c: i for i, c in enumerate(vs.columns)}
        return {ascii_lower(c): i for i, c in enumerate(vs.columns)}
