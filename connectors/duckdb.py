"""Change capture for DuckDB tables, in O(changed rows).

A session runs every write to a table that an incremental view reads so that DuckDB hands
back exactly the rows it changed (:class:`TableCapture`):

- ``INSERT`` (also ``INSERT … SELECT``, ``OR IGNORE``, ``ON CONFLICT DO NOTHING``) and
  ``DELETE`` (also ``DELETE … USING``) get a ``RETURNING`` clause listing the table's
  columns and ``hash(columns)``; a user's own ``RETURNING`` list is kept and ours appended
  after it, so the user still sees exactly their columns;
- ``TRUNCATE t`` runs as ``DELETE FROM t RETURNING …``;
- ``UPDATE`` first reads the rows it is about to change (a ``SELECT`` built from the
  statement's own ``FROM``/``WHERE``, :func:`update_preimage`), then runs with
  ``RETURNING`` for the new rows;
- ``COPY t [(cols)] FROM …`` loads into a temporary stage table with the same columns, then
  ``INSERT INTO t SELECT … FROM stage RETURNING …``.

Statements whose old rows DuckDB cannot hand back (``INSERT OR REPLACE``, ``ON CONFLICT DO
UPDATE``, ``MERGE``) and writes made around the session (another connection, another
process) are found by the fallback: a **fingerprint** of the table — its row count and the
64-bit wrap-around sum of ``hash(columns)`` over its rows, one vectorized scan (about 20 ms
per million rows) — is kept up to date from the captured rows, so a mismatch proves a write
the session did not see; only then is the table diffed against the engine's copy of its rows
(:func:`diff_against`, O(table)). The fingerprint is checked on ``sync()``/``poll()`` and after
statements the router cannot attribute to one table, never after an ordinary write.

Every function runs on the given connection, inside the caller's transaction if one is open.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from .sqltext import skip_literal

SCHEMA = "ivm"
_WRAP = 1 << 64
STAGE = "_ivm_copy_stage"


def quote(name: str) -> str:
    """A DuckDB identifier, double-quoted."""
    return '"' + str(name).replace('"', '""') + '"'


def ensure_catalog(conn) -> None:
    """Create the ``ivm`` schema and the ``ivm.views`` catalog table if missing."""
    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.views ("
                 "name VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, definition VARCHAR NOT NULL)")


def drop_legacy_shadows(conn) -> None:
    """Drop the ``ivm.shadow_*`` tables that earlier versions kept (the layer's own objects)."""
    rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = ? "
                        "AND table_name LIKE 'shadow\\_%' ESCAPE '\\'", [SCHEMA]).fetchall()
    for (name,) in rows:
        conn.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{quote(name)}")


def table_columns(conn, table: str, schema: str = "main") -> dict[str, str] | None:
    """``{column: type}`` of a base table in column order, or None when there is no such table."""
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = ? AND lower(table_name) = lower(?) "
        "AND table_name IN (SELECT table_name FROM information_schema.tables "
        "                   WHERE table_schema = ? AND table_type = 'BASE TABLE') "
        "ORDER BY ordinal_position", [schema, table, schema]).fetchall()
    if not rows:
        return None
    return {name: typ for name, typ in rows}


def table_comment(conn, table: str) -> str | None:
    """The comment of base table ``main.table`` (``None`` when absent or no such table)."""
    row = conn.execute("SELECT comment FROM duckdb_tables() WHERE schema_name = 'main' AND "
                       "database_name = current_database() AND lower(table_name) = lower(?)",
                       [table]).fetchall()
    return row[0][0] if row else None


class TableCapture:
    """Capture of one DuckDB table: the ``RETURNING`` list and the expected fingerprint."""

    def __init__(self, table: str, columns: Sequence[str]):
        self.table = table
        self.columns = list(columns)
        self.width = len(self.columns)
        self.qtable = f"main.{quote(table)}"
        cols = ", ".join(quote(c) for c in self.columns)
        self.select_list = cols
        self.returning = f"{cols}, hash({cols})"
        self.fingerprint: tuple[int, int] | None = None

    # -- fingerprint ----------------------------------------------------------------------
    def current_fingerprint(self, conn) -> tuple[int, int]:
        """``(rows, sum of hash(columns) mod 2**64)`` of the table now: one scan."""
        n, s = conn.execute(f"SELECT count(*), coalesce(sum(hash({self.select_list})::HUGEINT), 0) "
                            f"FROM {self.qtable}").fetchall()[0]
        return int(n), int(s) % _WRAP

    def note(self, hashed_rows: Sequence[tuple], sign: int) -> None:
        """Account captured rows (each ending with its hash) in the expected fingerprint."""
        if self.fingerprint is None or not hashed_rows:
            return
        n, s = self.fingerprint
        w = self.width
        self.fingerprint = (n + sign * len(hashed_rows), (s + sign * sum(r[w] for r in hashed_rows)) % _WRAP)

    def changed(self, conn) -> bool:
        """Whether the table differs from what the session has seen (fingerprint check)."""
        return self.current_fingerprint(conn) != self.fingerprint

    # -- reading --------------------------------------------------------------------------
    def scan(self, conn, chunk: int = 65_536) -> Iterator[list[tuple]]:
        """The table's rows in chunks (for the initial load), without the hash."""
        res = conn.execute(f"SELECT {self.select_list} FROM {self.qtable}")
        while True:
            rows = res.fetchmany(chunk)
            if not rows:
                return
            yield rows

    def strip(self, hashed_rows: Sequence[tuple]) -> list[tuple]:
        w = self.width
        return [r[:w] for r in hashed_rows]

    # -- statements -----------------------------------------------------------------------
    def with_returning(self, text: str, user_returning: bool) -> str:
        return f"{text}, {self.returning}" if user_returning else f"{text}\nRETURNING {self.returning}"

    def run_returning(self, conn, text: str, params, user_returning: bool) -> tuple[Any, list, list[tuple]]:
        """Run an INSERT/DELETE with our RETURNING list: ``(user description or None,
        user rows, captured rows with their hash)``."""
        res = _execute(conn, self.with_returning(text, user_returning), params)
        rows = res.fetchall()
        if not user_returning:
            return None, [], rows
        m = len(res.description) - self.width - 1
        return res.description[:m], [r[:m] for r in rows], [r[m:] for r in rows]

    def delete_all(self, conn) -> list[tuple]:
        """``TRUNCATE``: delete every row, returning them."""
        return conn.execute(f"DELETE FROM {self.qtable}\nRETURNING {self.returning}").fetchall()

    def copy_from(self, conn, text: str, span: tuple[int, int], columns: str | None) -> list[tuple]:
        """``COPY t [(cols)] FROM …`` through a stage table; returns the inserted rows."""
        conn.execute(f"CREATE OR REPLACE TEMP TABLE {STAGE} AS FROM {self.qtable} LIMIT 0")
        try:
            conn.execute(text[:span[0]] + f"temp.{STAGE}" + text[span[1]:])
            cols = columns or ""
            sel = columns[1:-1] if columns else "*"
            return conn.execute(f"INSERT INTO {self.qtable} {cols} SELECT {sel} FROM temp.{STAGE}\n"
                                f"RETURNING {self.returning}").fetchall()
        finally:
            conn.execute(f"DROP TABLE IF EXISTS temp.{STAGE}")

    def preimage(self, conn, text: str, params) -> list[tuple] | None:
        """The rows an UPDATE is about to change (with their hash), or None when the statement
        cannot be read (the caller then falls back to a diff)."""
        built = update_preimage_lexical(text, self.columns) or update_preimage(text, self.columns)
        if built is None:
            return None
        sql, wanted = built
        try:
            sub = _param_subset(params, wanted)
        except (IndexError, KeyError, TypeError):
            return None
        return _execute(conn, sql, sub).fetchall()

    def diff_against(self, conn, stored: Mapping[tuple, int]) -> tuple[list[tuple], list[tuple]]:
        """``(deleted, inserted)`` rows between the engine's copy ``stored`` and the table now
        (the fallback, O(table)); resets the expected fingerprint."""
        now: Counter = Counter()
        for rows in self.scan(conn):
            now.update(rows)
        deleted: list[tuple] = []
        inserted: list[tuple] = []
        for row, k in stored.items():
            d = now.get(row, 0) - k
            if d < 0:
                deleted.extend([row] * -d)
        for row, k in now.items():
            d = k - stored.get(row, 0)
            if d > 0:
                inserted.extend([row] * d)
        self.fingerprint = self.current_fingerprint(conn)
        return deleted, inserted


def _execute(conn, sql: str, params):
    return conn.execute(sql, params) if params is not None else conn.execute(sql)


_TOP_WORDS = re.compile(r"\b(UPDATE|SET|FROM|WHERE|RETURNING)\b", re.I)
_ALIAS = re.compile(r'^(?P<table>.+?)(?:\s+(?:AS\s+)?(?P<alias>"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*))?$', re.I | re.S)


def _top_level(text: str) -> list[tuple[str, int, int]]:
    """``(KEYWORD, start, end)`` of UPDATE/SET/FROM/WHERE/RETURNING outside parentheses,
    quotes and comments, in order; one pass over the text."""
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
            m = _TOP_WORDS.match(text, i)
            if m:
                out.append((m.group(1).upper(), m.start(), m.end()))
                i = m.end()
            else:
                while i < n and (text[i].isalnum() or text[i] in "_$"):
                    i += 1
        else:
            i += 1
    return out


def update_preimage_lexical(text: str, columns: Sequence[str]) -> tuple[str, list] | None:
    """:func:`update_preimage` without a parse, for ``UPDATE t [[AS] a] SET … [FROM …]
    [WHERE …] [RETURNING …]`` with ``?`` or no parameters: the target, ``FROM`` and ``WHERE``
    texts are cut at their top-level keywords. ``None`` for anything else (the parser then
    decides)."""
    words = _top_level(text)
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

    m = _ALIAS.match(text[pos["UPDATE"][1]:pos["SET"][0]].strip())
    if not m:
        return None
    target = m.group("table").strip()
    alias = m.group("alias") or target.split(".")[-1].strip()
    src = f"{target} AS {alias}" if m.group("alias") else target
    qcols = [f"{alias}.{quote(c)}" for c in columns]
    cols = f"{', '.join(qcols)}, hash({', '.join(qcols)})"
    # positional parameters: those of SET come first; the pre-image uses FROM's and WHERE's
    before = _count_marks(text[pos["SET"][1]:pos[order[0]][0]] if order else text[pos["SET"][1]:])
    frm, where = section("FROM"), section("WHERE")
    n_from, n_where = _count_marks(frm or ""), _count_marks(where or "")
    wanted = list(range(before, before + n_from + n_where))
    cond = f" WHERE {where}" if where else ""
    if frm is None:
        return f"SELECT {cols} FROM {src}{cond}", wanted
    return (f"SELECT {cols} FROM {src} WHERE {alias}.rowid IN "
            f"(SELECT {alias}.rowid FROM {src}, {frm}{cond})", wanted)


def _count_marks(text: str) -> int:
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
    return [n for n in node.dfs() if isinstance(n, exp.Placeholder)]


def _q(name: str) -> str:
    return quote(name)


def _param_subset(params, wanted: list):
    if params is None:
        return None if not wanted else params
    if isinstance(params, Mapping):
        return {k: params[k] for k in wanted}
    return [params[i] for i in wanted]
