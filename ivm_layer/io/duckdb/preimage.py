"""Reading a DuckDB ``UPDATE`` statement without running it: the ``SELECT`` of the rows it is
about to change.

- :func:`update_rows_select`: for ``UPDATE t SET c = e, … [WHERE …]`` (no ``FROM``, no
  ``RETURNING``, no subqueries, only transaction-stable functions), one ``SELECT`` of the new
  values of the assigned columns and of the old rows, so the UPDATE itself can run without
  ``RETURNING``;
- :func:`update_preimage_lexical` / :func:`update_preimage`: the old rows of any other UPDATE
  (also ``… FROM``), cut from its top-level clauses or, failing that, parsed by sqlglot.

Each keeps the statement's ``?`` parameter marks in their order (and says which it uses).
All are pure functions of the statement text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ...identifiers import ascii_lower
from ...sql.sqltext import skip_literal, unquote

if TYPE_CHECKING:  # pragma: no cover - sqlglot loads when an UPDATE is first read
    from sqlglot import exp


def quote(name: str) -> str:
    """A DuckDB identifier, double-quoted."""
    return '"' + str(name).replace('"', '""') + '"'


_TOP_WORDS = re.compile(r"\b(UPDATE|SET|FROM|WHERE|RETURNING)\b", re.IGNORECASE)
_ALIAS = re.compile(r'^(?P<table>.+?)(?:\s+(?:AS\s+)?(?P<alias>"(?:[^"]|"")+"|[^\W\d][\w$]*))?$', re.IGNORECASE | re.DOTALL)


def top_level(text: str, words: re.Pattern = _TOP_WORDS) -> list[tuple[str, int, int]]:
    """``(KEYWORD, start, end)`` of the ``words`` (by default UPDATE/SET/FROM/WHERE/RETURNING)
    outside parentheses, quotes and comments, in order; one pass over the text."""
    out = []
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        end = skip_literal(text, i)
        if end is not None:
            i = end
        elif c == "(":
            depth += 1
            i += 1
        elif c == ")":
            depth -= 1
            i += 1
        elif depth == 0 and (c.isalpha()) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_$")):
            m = words.match(text, i)
            if m:
                out.append((" ".join(m.group(1).upper().split()), m.start(), m.end()))
                i = m.end()
            else:
                while i < n and (text[i].isalnum() or text[i] in "_$"):
                    i += 1
        else:
            i += 1
    return out


def _target(text: str) -> tuple[str, str] | None:
    """``(FROM text, alias)`` of an UPDATE's target ``t [[AS] a]``."""
    m = _ALIAS.match(text.strip())
    if not m:
        return None
    target = m.group("table").strip()
    alias = m.group("alias") or target.split(".")[-1].strip()
    return (f"{target} AS {alias}" if m.group("alias") else target), alias


def update_preimage_lexical(text: str, columns: Sequence[str]) -> tuple[str, list] | None:
    """:func:`update_preimage` without a parse, for ``UPDATE t [[AS] a] SET … [FROM …]
    [WHERE …] [RETURNING …]`` with ``?`` or no parameters: the target, ``FROM`` and ``WHERE``
    texts are cut at their top-level keywords. ``None`` for anything else (the parser then
    decides)."""
    words = top_level(text)
    kinds = [w for w, _, _ in words]
    if kinds[:2] != ["UPDATE", "SET"] or kinds.count("FROM") > 1 or kinds.count("WHERE") > 1 \
            or kinds.count("SET") > 1 or "$" in text:
        return None
    pos = {w: (a, b) for w, a, b in words}
    order = [w for w in ("FROM", "WHERE", "RETURNING") if w in pos]
    if order != sorted(order, key=lambda w: pos[w][0]):
        return None

    def section(word: str) -> str | None:
        if word not in pos:
            return None
        start = pos[word][1]
        ends = [pos[w][0] for w in ("FROM", "WHERE", "RETURNING") if w in pos and pos[w][0] > start]
        return text[start:min(ends) if ends else len(text)].strip()

    got = _target(text[pos["UPDATE"][1]:pos["SET"][0]])
    if got is None:
        return None
    src, alias = got
    qcols = [f"{alias}.{quote(c)}" for c in columns]
    cols = f"{', '.join(qcols)}, hash({', '.join(qcols)})"
    # positional parameters: those of SET come first; the pre-image uses FROM's and WHERE's
    before = count_marks(text[pos["SET"][1]:pos[order[0]][0]] if order else text[pos["SET"][1]:])
    frm, where = section("FROM"), section("WHERE")
    n_from, n_where = count_marks(frm or ""), count_marks(where or "")
    wanted = list(range(before, before + n_from + n_where))
    cond = f" WHERE {where}" if where else ""
    if frm is None:
        return f"SELECT {cols} FROM {src}{cond}", wanted
    return (f"SELECT {cols} FROM {src} WHERE {alias}.rowid IN "
            f"(SELECT {alias}.rowid FROM {src}, {frm}{cond})", wanted)


_ASSIGN = re.compile(r'\s*(?:[^\W\d][\w$]*\.)?(?P<col>"(?:[^"]|"")+"|[^\W\d][\w$]*)\s*=(?!=)', re.DOTALL)
CALL = re.compile(r'([A-Za-z_][A-Za-z0-9_$]*)\s*\(')
#: words that may stand before a parenthesis in an expression without being a function call
_NOT_CALLS = frozenset({"in", "and", "or", "not", "cast", "try_cast", "is", "then", "else", "when",
                        "case", "like", "ilike", "between", "as", "distinct", "from", "end",
                        "values", "conflict", "exists"})
#: ``INSERT … INTO t (a, b)``: the target's column list, not a call
_INTO_COLUMNS = re.compile(r'\binto\s+(?:[A-Za-z_][A-Za-z0-9_$]*\.)?([A-Za-z_][A-Za-z0-9_$]*)\s*\(',
                           re.IGNORECASE)
#: SQL forms written like calls that duckdb_functions() does not list
SPECIAL_FORMS = frozenset({"coalesce", "extract", "row", "position", "substring", "trim"})
_NEEDS_RETURNING = re.compile(r"\b(select|default|over|filter)\b", re.IGNORECASE)


def call_names(text: str) -> set[str]:
    """The names ``text`` writes before a parenthesis, lower-cased, keywords (``IN (…)``) left
    out, and an INSERT's ``INTO t (cols)`` too: the functions it may call."""
    targets = {m.end() for m in _INTO_COLUMNS.finditer(text)}
    return {m.group(1).lower() for m in CALL.finditer(text) if m.end() not in targets} - _NOT_CALLS


def calls_only(text: str, stable: frozenset[str]) -> bool:
    """Whether every call in ``text`` is of a function in ``stable``; anything else —
    ``random()``, ``nextval()``, a user's macro, a name not known when ``stable`` was read —
    may differ between two statements."""
    return not call_names(text) - stable


def split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` cut at ``sep`` outside parentheses, quotes and comments."""
    out, depth, i, start, n = [], 0, 0, 0, len(text)
    while i < n:
        end = skip_literal(text, i)
        if end is not None:
            i = end
            continue
        c = text[i]
        depth += (c == "(") - (c == ")")
        if c == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
        i += 1
    out.append(text[start:])
    return out


def update_rows_select(text: str, columns: Sequence[str], types: Sequence[str],
                       stable: frozenset[str]) -> tuple[str, list[int]] | None:
    """For ``UPDATE t [[AS] a] SET c = e, … [WHERE …]`` with ``?`` or no parameters: a
    ``SELECT`` of the rows it changes — the new values of the assigned columns, then the old
    row — whose parameter marks are the statement's own, in the same order, and the
    positions of the assigned columns. ``None`` when the new rows
    cannot be computed that way: ``FROM``, ``RETURNING``, subqueries, ``DEFAULT``, window or
    filtered aggregates, or a call of anything but a transaction-stable scalar function."""
    words = top_level(text)
    kinds = [w for w, _, _ in words]
    if kinds not in (["UPDATE", "SET"], ["UPDATE", "SET", "WHERE"]):
        return None
    pos = {w: (a, b) for w, a, b in words}
    set_text = text[pos["SET"][1]:pos["WHERE"][0] if "WHERE" in pos else len(text)]
    if _NEEDS_RETURNING.search(set_text):
        return None
    if not calls_only(text[pos["SET"][1]:], stable):     # SET and WHERE
        return None
    got = _target(text[pos["UPDATE"][1]:pos["SET"][0]])
    if got is None:
        return None
    src, alias = got
    lower = [ascii_lower(c) for c in columns]
    new: dict[int, str] = {}
    for part in split_top(set_text):
        a = _ASSIGN.match(part)
        if a is None or unquote(a.group("col")) not in lower:
            return None
        i = lower.index(unquote(a.group("col")))
        if i in new or not part[a.end():].strip():
            return None
        new[i] = part[a.end():].strip()
    if "?" in set_text and sorted(new) != list(new):   # marks must stay in statement order
        return None
    olds = [f"{alias}.{quote(c)}" for c in columns]
    news = [f"CAST(({new[i]}) AS {types[i]})" for i in sorted(new)]
    where = f" WHERE {text[pos['WHERE'][1]:].strip()}" if "WHERE" in pos else ""
    # the new values come first, so the SET's parameter marks precede the WHERE's
    return f"SELECT {', '.join(news + olds)} FROM {src}{where}", sorted(new)


def count_marks(text: str) -> int:
    """``?`` parameter marks outside quotes and comments."""
    n, i, size = 0, 0, len(text)
    while i < size:
        end = skip_literal(text, i)
        if end is not None:
            i = end
            continue
        n += text[i] == "?"
        i += 1
    return n


def update_preimage(text: str, columns: Sequence[str]) -> tuple[str, list] | None:
    """A ``SELECT`` of the rows an ``UPDATE`` changes (its ``columns`` and their hash), and which
    of the statement's parameters it uses (positions for ``?``, names or numbers for ``$x``).
    ``None`` when sqlglot cannot read the statement."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        node = sqlglot.parse_one(text, read="duckdb")
    except (SqlglotError, RecursionError, ValueError):
        return None
    if not isinstance(node, exp.Update) or not isinstance(node.this, exp.Table):
        return None
    # Positional ``?`` parameters are numbered in the order they appear: SET, FROM, WHERE.
    counter = 0
    wanted: list = []
    parts = [("set", e) for e in node.expressions]
    for key in ("from_", "from", "where"):
        if node.args.get(key) is not None:
            parts.append((key, node.args[key]))
    for role, part in parts:
        for ph in list(part.find_all(exp.Placeholder)) if role == "set" else _dfs_placeholders(part):
            if ph.this is None or ph.this == "":
                counter += 1
                if role != "set":
                    wanted.append(counter - 1)
                    ph.set("this", str(len(wanted)))
            elif role != "set":
                key_ = int(ph.this) - 1 if str(ph.this).isdigit() else str(ph.this)
                wanted.append(key_)
                if isinstance(key_, int):
                    ph.set("this", str(len(wanted)))
    table = node.this
    alias = _q(table.alias_or_name)
    src = table.sql(dialect="duckdb")
    qcols = [f"{alias}.{quote(c)}" for c in columns]
    cols = f"{', '.join(qcols)}, hash({', '.join(qcols)})"
    where = node.args.get("where")
    cond = f" WHERE {where.this.sql(dialect='duckdb')}" if where is not None else ""
    frm = node.args.get("from_") or node.args.get("from")
    if frm is None:
        return f"SELECT {cols} FROM {src}{cond}", wanted
    # UPDATE … FROM: a target row joined to several rows is still changed once.
    others = ", ".join(e.sql(dialect="duckdb") for e in [frm.this, *frm.expressions] if e is not None)
    joins = "".join(" " + j.sql(dialect="duckdb") for j in node.args.get("joins") or ())
    return (f"SELECT {cols} FROM {src} WHERE {alias}.rowid IN "
            f"(SELECT {alias}.rowid FROM {src}, {others}{joins}{cond})", wanted)


def _dfs_placeholders(node: exp.Expression) -> list[exp.Placeholder]:
    from sqlglot import exp

    return [n for n in node.dfs() if isinstance(n, exp.Placeholder)]


def _q(name: str) -> str:
    return quote(name)


def param_subset(params, wanted: list):
    if params is None:
        return None if not wanted else params
    if isinstance(params, Mapping):
        return {k: params[k] for k in wanted}
    return [params[i] for i in wanted]
