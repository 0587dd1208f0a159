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

import contextlib
import copy
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ...identifiers import ascii_lower, sql_fold
from .preimage import (
    SPECIAL_FORMS,
    call_names,
    param_subset,
    quote,
    update_preimage,
    update_preimage_lexical,
    update_rows_select,
)
from ...engine import temporal
from .upserts import upsert_preimage

SCHEMA = "ivm"
_WRAP = 1 << 64
STAGE = "_ivm_copy_stage"


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


#: a catalog row's table_name matches the key ``?`` (DuckDB: case-insensitive in ASCII only)
_NAME_IS = f"{sql_fold('table_name')} = {sql_fold('?')}"


def table_columns(conn, table: str, schema: str = "main") -> dict[str, str] | None:
    """``{column: type}`` of a base table in column order, or None when there is no such table."""
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = ? AND {_NAME_IS} "
        "AND table_name IN (SELECT table_name FROM information_schema.tables "
        "                   WHERE table_schema = ? AND table_type = 'BASE TABLE') "
        "ORDER BY ordinal_position", [schema, table, schema]).fetchall()
    if not rows:
        return None
    return {name: typ for name, typ in rows}


def generated_columns(conn, table: str, schema: str = "main") -> list[str]:
    """The generated (computed) columns of a base table."""
    return [n for (n,) in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
        f"AND {_NAME_IS} AND is_generated = 'ALWAYS' ORDER BY ordinal_position",
        [schema, table]).fetchall()]


def unique_key(conn, table: str, schema: str = "main") -> list[str] | None:
    """The columns of the table's one key (its only ``PRIMARY KEY`` or ``UNIQUE``
    constraint), or None when it has none or several (an upsert may then conflict on any)."""
    rows = conn.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() WHERE schema_name = ? "
        f"AND database_name = current_database() AND {_NAME_IS} "
        "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')", [schema, table]).fetchall()
    return list(rows[0][0]) if len(rows) == 1 else None


def table_comment(conn, table: str) -> str | None:
    """The comment of base table ``main.table`` (``None`` when absent or no such table)."""
    row = conn.execute("SELECT comment FROM duckdb_tables() WHERE schema_name = 'main' AND "
                       f"database_name = current_database() AND {_NAME_IS}",
                       [table]).fetchall()
    return row[0][0] if row else None


#: column types whose values survive a round trip through Python unchanged, so their hash can
#: be computed later from the captured values (:meth:`TableCapture.settle`)
_ROUND_TRIP = re.compile(r"(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|"
                         r"UBIGINT|FLOAT|DOUBLE|DECIMAL\(\d+,\s*\d+\)|VARCHAR|DATE|TIMESTAMP|UUID|BLOB)")
#: column types whose values DuckDB's ``fetchnumpy`` hands back as the same Python values as
#: ``fetchall`` (NULL as None): bulk results are read column-wise (:meth:`TableCapture.bulk_rows`)
_COLUMNWISE = re.compile(r"BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|"
                         r"FLOAT|DOUBLE|VARCHAR")
#: captured rows held unhashed before their hashes are summed in one statement
SETTLE_AT = 16_384


class TableCapture:
    """Capture of one DuckDB table: the ``RETURNING`` list and the expected fingerprint.

    The fingerprint ``(rows, sum of hash(columns))`` is kept from the captured rows. Statements
    that usually touch few rows (``INSERT … VALUES``, ``UPDATE``) do not ask DuckDB for the
    hash (each hash expression costs a statement about 0.15 ms of planning); their rows are
    kept and hashed in one statement when the fingerprint is next checked or when 16k rows
    are waiting (:meth:`settle`). Bulk statements (``INSERT … SELECT``, ``COPY``, ``DELETE``,
    ``TRUNCATE``) get the hash in their ``RETURNING``, where it is nearly free per row."""

    def __init__(self, table: str, columns: Sequence[str], types: Sequence[str] | None = None,
                 generated: bool = False, key: Sequence[str] | None = None):
        self.table = table
        self.columns = list(columns)
        #: the columns' DuckDB types (hashes of captured rows are computed later with them);
        #: None: every captured row comes with its hash
        self.types = list(types) if types is not None else None
        #: ``(position, kind)`` of DATE/TIMESTAMP/TIMESTAMPTZ columns: read as text, because
        #: DuckDB's Python client hands back ±infinity as ``date.max``/``datetime.max``
        #: (:mod:`~ivm_layer.engine.temporal`); their rows are always hashed by DuckDB
        self.temporal = [(i, k) for i, t in enumerate(self.types or [])
                         if (k := temporal.kind_of(t)) is not None]
        self.lazy = self.types is not None and not self.temporal and \
            all(_ROUND_TRIP.fullmatch(t) for t in self.types)
        self.columnwise = self.types is not None and all(_COLUMNWISE.fullmatch(t) for t in self.types)
        #: an UPDATE's new rows can be computed from its SET list (:meth:`update_rows`): not
        #: when the table has generated columns, whose new values DuckDB computes
        self.in_place = self.lazy and not generated
        #: the table's one key (see :func:`unique_key`): upserts read the rows they may replace
        self.key = [ascii_lower(k) for k in key] if key and types is not None and not self.temporal else None
        self._stable: frozenset[str] | None = None
        self.width = len(self.columns)
        self.qtable = f"main.{quote(table)}"
        cols = ", ".join(quote(c) for c in self.columns)
        #: the columns as hashed for the fingerprint
        self.hashed_list = cols
        kinds = dict(self.temporal)
        self.select_list = ", ".join(f"{quote(c)}::VARCHAR" if i in kinds else quote(c)
                                     for i, c in enumerate(self.columns))
        self.returning = f"{self.select_list}, hash({cols})"
        self._known = False
        self._n = 0
        self._s = 0
        self._plus: list[tuple] = []
        self._minus: list[tuple] = []
        self._epoch = 0

    # -- fingerprint ----------------------------------------------------------------------
    def current_fingerprint(self, conn) -> tuple[int, int]:
        """``(rows, sum of hash(columns) mod 2**64)`` of the table now: one scan."""
        n, s = conn.execute(f"SELECT count(*), coalesce(sum(hash({self.hashed_list})::HUGEINT), 0) "
                            f"FROM {self.qtable}").fetchall()[0]
        return int(n), int(s) % _WRAP

    def reset(self, conn) -> None:
        """Take the table as it is now as what the session has seen (one scan)."""
        self._n, self._s = self.current_fingerprint(conn)
        self._known = True
        self._forget()

    @property
    def rows(self) -> int:
        """The table's row count as the session has seen it."""
        return self._n

    def mark(self) -> tuple:
        """A token :meth:`restore` takes back to (a transaction's start)."""
        return self._known, self._n, self._s, self._epoch, len(self._plus), len(self._minus)

    def restore(self, token: tuple) -> None:
        known, n, s, epoch, n_plus, n_minus = token
        if not known or epoch != self._epoch:   # hashes were summed since: no longer known
            self._known = False
            self._forget()
            return
        self._n, self._s = n, s
        del self._plus[n_plus:]
        del self._minus[n_minus:]

    def detached(self) -> TableCapture:
        """A copy for capturing the writes of another connection's transaction: the same
        statements and ``RETURNING`` lists, but no fingerprint accounting (rows captured in a
        transaction that may still roll back must not move the session's fingerprint; the
        caller accounts them with :meth:`note` once they are committed)."""
        twin = copy.copy(self)
        twin._known = False
        twin._plus, twin._minus = [], []
        return twin

    def _forget(self) -> None:
        self._plus, self._minus = [], []
        self._epoch += 1

    def bulk_rows(self, res, sign: int) -> list[tuple]:
        """The rows (each followed by its hash) of a statement that may return many, accounted
        in the fingerprint and returned without the hash. Read column by column where the
        types allow (the hash column is summed as a list, no row tuple is built twice), else
        row by row."""
        if not self.columnwise:
            return self.note(res.fetchall(), sign, True)
        arrays = list(res.fetchnumpy().values())
        rows = list(zip(*[a.tolist() for a in arrays[:-1]]))
        if self._known and rows:
            self._n += sign * len(rows)
            # numpy sums the UBIGINT hashes modulo 2**64, as the fingerprint wants
            self._s = (self._s + sign * int(arrays[-1].sum(dtype="uint64"))) % _WRAP
        return rows

    def note(self, rows: Sequence[tuple], sign: int, hashed: bool) -> list[tuple]:
        """Account captured rows in the expected fingerprint; returns them without the hash
        (``hashed``: each row ends with its hash)."""
        if self.temporal:
            rows = self.decode(rows)
        if not hashed:
            if self._known and rows:
                self._n += sign * len(rows)
                (self._plus if sign > 0 else self._minus).extend(rows)
            return list(rows)
        w = self.width
        if self._known and rows:
            self._n += sign * len(rows)
            self._s = (self._s + sign * sum(r[w] for r in rows)) % _WRAP
        return [r[:w] for r in rows]

    def decode(self, rows: Sequence[tuple]) -> list[tuple]:
        """Rows read through :attr:`select_list` with their temporal columns (read as text)
        turned into the engine's values (O(temporal cells))."""
        out = []
        parse = temporal.parse
        for r in rows:
            cells = list(r)
            for i, k in self.temporal:
                cells[i] = parse(k, cells[i])
            out.append(tuple(cells))
        return out

    def settle(self, conn, waiting: int = 0) -> None:
        """Sum the hashes of the rows held unhashed (when more than ``waiting`` are)."""
        if len(self._plus) + len(self._minus) <= waiting:
            return
        cols = ", ".join(f"unnest(${i + 1}::{t}[]) AS c{i}" for i, t in enumerate(self.types))
        sql = (f"SELECT coalesce(sum(hash({', '.join(f'c{i}' for i in range(self.width))})::HUGEINT), 0) "
               f"FROM (SELECT {cols})")
        for rows, sign in ((self._plus, 1), (self._minus, -1)):
            if rows:
                total = conn.execute(sql, [list(c) for c in zip(*rows)]).fetchall()[0][0]
                self._s = (self._s + sign * int(total)) % _WRAP
        self._forget()

    def changed(self, conn) -> bool:
        """Whether the table differs from what the session has seen (fingerprint check)."""
        if not self._known:
            return True
        self.settle(conn)
        return self.current_fingerprint(conn) != (self._n, self._s)

    # -- reading --------------------------------------------------------------------------
    def scan(self, conn, chunk: int = 65_536) -> Iterator[list[tuple]]:
        """The table's rows in chunks (for the initial load), without the hash."""
        res = conn.execute(f"SELECT {self.select_list} FROM {self.qtable}")
        while True:
            rows = res.fetchmany(chunk)
            if not rows:
                return
            yield self.decode(rows) if self.temporal else rows

    # -- statements -----------------------------------------------------------------------
    def run_returning(self, conn, text: str, params, user_returning: bool, sign: int,
                      hashed: bool = True, many: bool = False) -> tuple[Any, list, list[tuple]]:
        """Run an INSERT (``sign`` 1) or DELETE (-1) with our RETURNING list: ``(user
        description or None, user rows, captured rows)``; the rows are accounted in the
        fingerprint. ``hashed=False`` (a statement that usually changes few rows) leaves the
        hash out of the RETURNING list when the table's values can be hashed later; ``many``
        (``INSERT … SELECT``) reads the result column-wise (:meth:`bulk_rows`)."""
        hashed = hashed or not self.lazy
        ret = self.returning if hashed else self.select_list
        sql = f"{text}, {ret}" if user_returning else f"{text}\nRETURNING {ret}"
        res = _execute(conn, sql, params)
        if not user_returning and hashed and many:
            return None, [], self.bulk_rows(res, sign)
        rows = res.fetchall()
        if not user_returning:
            return None, [], self.note(rows, sign, hashed)
        m = len(res.description) - self.width - hashed
        return res.description[:m], [r[:m] for r in rows], self.note([r[m:] for r in rows], sign, hashed)

    def delete_all(self, conn) -> list[tuple]:
        """``TRUNCATE``: delete every row, returning them."""
        return self.bulk_rows(conn.execute(f"DELETE FROM {self.qtable}\nRETURNING {self.returning}"), -1)

    def copy_from(self, conn, text: str, span: tuple[int, int], columns: str | None) -> list[tuple]:
        """``COPY t [(cols)] FROM …`` through a stage table; returns the inserted rows."""
        conn.execute(f"CREATE OR REPLACE TEMP TABLE {STAGE} AS FROM {self.qtable} LIMIT 0")
        try:
            conn.execute(text[:span[0]] + f"temp.{STAGE}" + text[span[1]:])
            cols = columns or ""
            sel = columns[1:-1] if columns else "*"
            rows = self.bulk_rows(conn.execute(f"INSERT INTO {self.qtable} {cols} SELECT {sel} FROM "
                                               f"temp.{STAGE}\nRETURNING {self.returning}"), 1)
        except BaseException:
            # the COPY's own error is the one to report: in an aborted transaction the clean-up
            # fails too (the rollback drops the stage table), and must not mask it
            with contextlib.suppress(Exception):
                conn.execute(f"DROP TABLE IF EXISTS temp.{STAGE}")
            raise
        conn.execute(f"DROP TABLE IF EXISTS temp.{STAGE}")
        return rows

    def upsert(self, conn, text: str, params, user_returning: bool) \
            -> tuple[Any, list, list[tuple], list[tuple]] | None:
        """Run an upsert (``INSERT OR REPLACE``, ``ON CONFLICT … DO UPDATE``) on a table with
        one key: the rows it may replace are read first (:func:`upsert_preimage`), then it
        runs with our ``RETURNING`` list; the replaced rows are those whose key came back.
        Returns ``(user description or None, user rows, deleted rows, inserted rows)``, or
        ``None`` when the statement is not of that shape (nothing ran)."""
        if self.key is None or isinstance(params, Mapping) or self.volatile(conn, text):
            return None
        built = upsert_preimage(text, self.qtable, self.columns, self.types, self.key)
        if built is None:
            return None
        sql, marks = built
        if marks and (params is None or len(params) < marks):
            return None
        before = _execute(conn, sql, None if params is None else list(params)[:marks]).fetchall()
        desc, rows, inserted = self.run_returning(conn, text, params, user_returning, 1)
        at = [ascii_lower(c) for c in self.columns]
        at = [at.index(k) for k in self.key]
        came_back = {tuple(r[i] for i in at) for r in inserted}
        deleted = [r for r in before if tuple(r[i] for i in at) in came_back]
        return desc, rows, self.note(deleted, -1, True), inserted

    def update_rows(self, conn, text: str, params) -> tuple[list[tuple], list[tuple]] | None:
        """The rows a plain ``UPDATE t SET … [WHERE …]`` is about to change, before and after,
        read by one ``SELECT`` (nothing is written; see :func:`update_rows_select` for the
        statements this takes). Running the UPDATE itself then without ``RETURNING``
        (:meth:`run_update`) is cheaper than with it: DuckDB's ``UPDATE … RETURNING`` rewrites
        every column of the changed rows. ``None``: the statement is not of this shape."""
        if not self.in_place or "$" in text:
            return None
        built = update_rows_select(text, self.columns, self.types, self._stable_functions(conn))
        if built is None:
            return None
        sql, assigned = built
        rows = _execute(conn, sql, params).fetchall()
        a = len(assigned)
        old, new = [], []
        for r in rows:
            row = r[a:]
            old.append(row)
            cells = list(row)
            for j, i in enumerate(assigned):
                cells[i] = r[j]
            new.append(tuple(cells))
        return old, new

    def run_update(self, conn, text: str, params, old: list[tuple], new: list[tuple]) -> int:
        """Run the UPDATE whose rows :meth:`update_rows` read; returns the count DuckDB reports.
        The rows are accounted in the fingerprint only when the counts agree (the caller
        diffs the table otherwise: a write raced the statement)."""
        count = int(_execute(conn, text, params).fetchall()[0][0])
        if count == len(old):
            self.note(old, -1, False)
            self.note(new, 1, False)
        return count

    def volatile(self, conn, text: str) -> bool:
        """Whether ``text`` calls a function that may give another result each time it runs
        (``random()``, ``nextval()``, a user's macro or function): a pre-image read by a
        separate statement could then differ from what the statement changes."""
        unknown = call_names(text) - self._stable_functions(conn)
        if not unknown:
            return False
        # asked now, not cached: a macro may have been created since the stable set was read
        return conn.execute("SELECT count(*) FROM duckdb_functions() WHERE lower(function_name) IN "
                            "(SELECT unnest(?::VARCHAR[])) AND (stability = 'VOLATILE' OR NOT internal)",
                            [sorted(unknown)]).fetchall()[0][0] > 0

    def _stable_functions(self, conn) -> frozenset[str]:
        """Scalar functions whose result is fixed within a transaction (read once)."""
        if self._stable is None:
            # built-in scalar functions and macros, unless some overload is volatile or a
            # user's macro or function of the same name exists
            self._stable = frozenset(n.lower() for (n,) in conn.execute(
                "SELECT function_name FROM duckdb_functions() GROUP BY function_name "
                "HAVING bool_and(internal AND function_type IN ('scalar', 'macro') "
                "AND coalesce(stability, '') <> 'VOLATILE')").fetchall()) | SPECIAL_FORMS
        return self._stable

    def preimage(self, conn, text: str, params) -> list[tuple] | None:
        """The rows an UPDATE is about to change (with their hash), or None when the statement
        cannot be read (the caller then falls back to a diff)."""
        built = update_preimage_lexical(text, self.columns) or update_preimage(text, self.columns)
        if built is None:
            return None
        sql, wanted = built
        try:
            sub = param_subset(params, wanted)
        except (IndexError, KeyError, TypeError):
            return None
        if self.temporal:   # temporal columns read as text (see :attr:`temporal`), by position
            names = [f"c{i}" for i in range(self.width)]
            kinds = dict(self.temporal)
            sel = ", ".join(f"{n}::VARCHAR" if i in kinds else n for i, n in enumerate(names))
            sql = f"SELECT {sel}, h FROM ({sql}) AS _ivm_pre({', '.join(names)}, h)"
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
        self.reset(conn)
        return deleted, inserted


def _execute(conn, sql: str, params):
    return conn.execute(sql, params) if params is not None else conn.execute(sql)


