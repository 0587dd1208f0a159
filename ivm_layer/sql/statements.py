"""Classify SQL statements for a session: incremental view DDL, SELECTs, everything else.

sqlglot does not know ``CREATE INCREMENTAL [MATERIALIZED] VIEW`` (it would fall back to an
opaque command), so a token pre-pass recognizes the statement head, strips the two
keywords and parses the rest as an ordinary ``CREATE VIEW``: the result carries a parsed
:class:`sqlglot.exp.Create` whose body is the view's ``SELECT``.

:func:`split_statements` cuts a multi-statement string at top-level semicolons with the
dialect's tokenizer and keeps each statement's original text (what is passed to the
database is exactly what the user wrote).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import SQLError, UnsupportedSQLError
from ..identifiers import ascii_lower, fold, normalize_tree

if TYPE_CHECKING:  # pragma: no cover - sqlglot loads when a statement is first classified
    from sqlglot import exp


@dataclass
class CreateIncrementalView:
    """``CREATE [OR REPLACE] INCREMENTAL [MATERIALIZED] VIEW [IF NOT EXISTS] name [(cols)] AS body``."""
    text: str
    name: str
    select_sql: str
    materialized: bool = False
    or_replace: bool = False
    if_not_exists: bool = False
    columns: list[str] | None = None
    tables: list[str] = field(default_factory=list)
    create: exp.Create | None = field(default=None, repr=False, compare=False)
    #: ``WITH (static = 'nation, region')``: tables the view treats as static (paper 003)
    static: list[str] = field(default_factory=list)
    #: ``WITH (epsilon = 0.5)``: paper 004's heavy/light trade-off for a CQAP1 parameterized view
    epsilon: float | None = None

    def definition(self, dialect: str = "duckdb") -> str:
        """A normalized statement text that :func:`classify` parses back to this statement."""
        cols = f" ({', '.join(_quote(c) for c in self.columns)})" if self.columns else ""
        mat = "MATERIALIZED " if self.materialized else ""
        items = ([f"static = '{', '.join(self.static)}'"] if self.static else []) + (
            [f"epsilon = {self.epsilon!r}"] if self.epsilon is not None else [])
        opts = f" WITH ({', '.join(items)})" if items else ""
        return f"CREATE INCREMENTAL {mat}VIEW {_quote(self.name)}{cols}{opts} AS {self.select_sql}"


@dataclass
class DropView:
    """``DROP VIEW [IF EXISTS] name`` (one or more names)."""
    text: str
    names: list[str]
    if_exists: bool = False


@dataclass
class SelectStatement:
    """A query (``SELECT``, set operations, ``WITH … SELECT``) and the table names it references."""
    text: str
    tables: list[str]


@dataclass
class TransactionControl:
    """``BEGIN`` / ``START TRANSACTION``, ``COMMIT`` / ``END``, ``ROLLBACK`` / ``ABORT``."""
    text: str
    action: str  # "begin" | "commit" | "rollback"


@dataclass
class Passthrough:
    """Anything else, passed to the database unchanged.

    ``kind`` is the sqlglot expression class name in upper case (``INSERT``, ``UPDATE``,
    ``DELETE``, ``DROP``, ``COPY``, …) or ``UNKNOWN`` when sqlglot cannot parse it;
    ``tables`` the table names it references (empty when unknown); ``targets`` the tables it
    writes or drops, when known (None = unknown, assume it may write anything);
    ``drop_kind``/``alter`` describe DDL on tables."""
    text: str
    kind: str
    tables: list[str] = field(default_factory=list)
    targets: list[str] | None = None
    drop_kind: str | None = None


Statement = CreateIncrementalView | DropView | SelectStatement | TransactionControl | Passthrough


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tokenize(sql: str, dialect: str):
    from sqlglot.dialects.dialect import Dialect

    return Dialect.get_or_raise(dialect).tokenize(sql)


def split_statements(sql: str, dialect: str = "duckdb") -> list[str]:
    """Split a string into statement texts at top-level semicolons (empty statements dropped)."""
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import TokenType

    try:
        tokens = _tokenize(sql, dialect)
    except SqlglotError:
        return [sql.strip()] if sql.strip() else []
    out: list[str] = []
    start = None
    end = None
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if start is not None:
                out.append(sql[start:end + 1])
            start = end = None
            continue
        if start is None:
            start = tok.start
        end = tok.end
    if start is not None:
        out.append(sql[start:end + 1])
    return out


def _table_names(node: exp.Expression) -> list[str]:
    from sqlglot import exp

    names: list[str] = []
    ctes = {c.alias_or_name for c in node.find_all(exp.CTE)}
    for t in node.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier):
            continue
        if t.args.get("db") or t.args.get("catalog"):
            db = t.args.get("db")
            if db is None or db.name not in ("main", "temp") or t.args.get("catalog"):
                continue  # another schema: never a session view or a tracked table
        name = t.name
        if name in ctes and not t.args.get("db"):
            continue
        if name not in names:
            names.append(name)
    return names


_INCREMENTAL = re.compile(r"\s*CREATE\s+(OR\s+REPLACE\s+)?INCREMENTAL\b", re.I)


def _head(sql: str, dialect: str):
    from sqlglot.errors import SqlglotError

    try:
        return _tokenize(sql, dialect)
    except SqlglotError as e:
        if _INCREMENTAL.match(sql):  # the layer's own statement: say why it cannot be read
            why = ("a quoted name or string is not closed" if "Error tokenizing" in str(e)
                   else str(e).splitlines()[0][:200])
            raise SQLError(f"cannot parse CREATE INCREMENTAL VIEW: {why}") from None
        return []


def classify(sql: str, dialect: str = "duckdb") -> Statement:
    """Classify one statement (see the dataclasses above)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    text = sql.strip().rstrip(";").strip()
    tokens = _head(text, dialect)
    words = [t.text.upper() for t in tokens[:6]]
    if words[:1] in (["BEGIN"], ["START"]) and (words[0] == "BEGIN" or words[1:2] == ["TRANSACTION"]):
        return TransactionControl(text, "begin")
    if words[:1] in (["COMMIT"], ["END"]):
        return TransactionControl(text, "commit")
    if words[:1] in (["ROLLBACK"], ["ABORT"]):
        return TransactionControl(text, "rollback")
    create = _incremental_head(text, tokens)
    if create is not None:
        return _parse_incremental(text, tokens, create, dialect)
    try:
        node = sqlglot.parse_one(text, read=dialect)
    except (SqlglotError, RecursionError):  # not ours to judge: the database answers it
        return Passthrough(text, "UNKNOWN")
    if node is None:
        return Passthrough(text, "UNKNOWN")
    normalize_tree(node, dialect)
    if isinstance(node, exp.Query):
        return SelectStatement(text, _table_names(node))
    if isinstance(node, exp.Drop):
        kind = str(node.args.get("kind") or "").upper()
        targets = [t.name for t in node.find_all(exp.Table)]
        if kind == "VIEW":
            return DropView(text, targets, bool(node.args.get("exists")))
        return Passthrough(text, "DROP", targets, targets, drop_kind=kind)
    kind = type(node).__name__.upper()
    tables = _table_names(node)
    targets: list[str] | None = None
    if isinstance(node, (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.TruncateTable)):
        tgt = node.this
        if isinstance(node, exp.TruncateTable):
            targets = [t.name for t in node.expressions if isinstance(t, exp.Table)]
        else:
            if isinstance(tgt, exp.Schema):
                tgt = tgt.this
            targets = [tgt.name] if isinstance(tgt, exp.Table) else None
    elif isinstance(node, exp.Alter):
        tgt = node.this
        targets = [tgt.name] if isinstance(tgt, exp.Table) else None
    elif isinstance(node, exp.Command):
        kind = "UNKNOWN"
    return Passthrough(text, kind, tables, targets)


def _incremental_head(text: str, tokens) -> tuple[int, bool, bool] | None:
    """``(index of the VIEW token, or_replace, materialized)`` for an incremental view head."""
    words = [t.text.upper() for t in tokens[:6]]
    if not words or words[0] != "CREATE":
        return None
    i = 1
    or_replace = False
    if words[i:i + 2] == ["OR", "REPLACE"]:
        or_replace = True
        i += 2
    if words[i:i + 1] != ["INCREMENTAL"]:
        return None
    i += 1
    materialized = False
    if words[i:i + 1] == ["MATERIALIZED"]:
        materialized = True
        i += 1
    if words[i:i + 1] != ["VIEW"]:
        raise SQLError(f"expected VIEW after CREATE {'OR REPLACE ' if or_replace else ''}INCREMENTAL"
                       f"{' MATERIALIZED' if materialized else ''} at line {tokens[min(i, len(tokens) - 1)].line}"
                       if len(tokens) > i else "incomplete CREATE INCREMENTAL VIEW statement")
    return i, or_replace, materialized


def _parse_incremental(text: str, tokens, head: tuple[int, bool, bool], dialect: str) -> CreateIncrementalView:
    from sqlglot import exp
    from sqlglot.errors import ErrorLevel, UnsupportedError

    from .parse import parse_statements

    view_idx, or_replace, materialized = head
    rest = ("CREATE OR REPLACE VIEW" if or_replace else "CREATE VIEW") + text[tokens[view_idx].end + 1:]
    nodes = parse_statements(rest, dialect, "CREATE INCREMENTAL VIEW")
    node = nodes[0] if len(nodes) == 1 else None
    if not isinstance(node, exp.Create) or str(node.args.get("kind") or "").upper() != "VIEW":
        raise SQLError("cannot parse CREATE INCREMENTAL VIEW: expected CREATE … VIEW name AS SELECT …")
    target = node.this
    columns = None
    if isinstance(target, exp.Schema):
        columns = [c.name for c in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table) or target.args.get("catalog") or (
            target.args.get("db") and target.args["db"].name != "main"):
        raise SQLError("an incremental view name must be a plain name (no schema)")
    body = node.expression
    if not isinstance(body, exp.Expression):
        raise SQLError("CREATE INCREMENTAL VIEW needs AS SELECT …")
    for t in body.find_all(exp.Table):
        if t.args.get("sample"):
            raise UnsupportedSQLError("unsupported in incremental views: TABLESAMPLE (a sample of "
                                      "the table cannot be maintained incrementally)")
    if any(s.args.get("locks") for s in body.find_all(exp.Select)):
        raise UnsupportedSQLError("unsupported in incremental views: FOR UPDATE / FOR SHARE "
                                  "(a view does not lock rows)")
    try:  # any other clause the dialect cannot say again is refused, never dropped
        select_sql = body.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as e:
        raise UnsupportedSQLError(f"unsupported in incremental views: {str(e).splitlines()[0]}") from None
    return CreateIncrementalView(
        text=text,
        name=target.name,
        select_sql=select_sql,
        materialized=materialized,
        or_replace=or_replace,
        if_not_exists=bool(node.args.get("exists")),
        columns=columns,
        tables=_table_names(body),
        create=node,
        static=_static_option(node, dialect),
        epsilon=_epsilon_option(node),
    )


def _epsilon_option(node: exp.Create) -> float | None:
    """The number of a ``WITH (epsilon = 0.5)`` view option (paper 004's trade-off), or None."""
    from sqlglot import exp

    props = node.args.get("properties")
    found = None
    for p in props.expressions if props is not None else ():
        if not (isinstance(p, exp.Property) and isinstance(p.this, exp.Expression) and p.this.name.lower() == "epsilon"):
            continue
        value = p.args.get("value")
        text = value.this if isinstance(value, exp.Literal) else None
        try:
            e = float(text)
        except (TypeError, ValueError):
            raise SQLError(f"WITH (epsilon = …) takes a number between 0 and 1, got {value.sql() if value else ''!r}") from None
        if not 0.0 <= e <= 1.0:
            raise SQLError(f"WITH (epsilon = …) takes a number between 0 and 1, got {text}")
        found = e
    return found


def _static_option(node: exp.Create, dialect: str = "duckdb") -> list[str]:
    """The table names of a ``WITH (static = 'a, b')`` view option; other options are refused."""
    from sqlglot import exp

    props = node.args.get("properties")
    out: list[str] = []
    for p in props.expressions if props is not None else ():
        key = p.this.name.lower() if isinstance(p, exp.Property) and isinstance(p.this, exp.Expression) else ""
        if key == "epsilon":
            continue
        if key != "static":
            raise SQLError(f"unknown incremental view option {p.sql()!r}: the options are "
                           "WITH (static = 'table, …') and WITH (epsilon = 0.5)")
        value = p.args.get("value")
        if not isinstance(value, exp.Literal) or not value.is_string:
            raise SQLError("WITH (static = …) takes a quoted, comma-separated list of table names")
        for name in value.this.split(","):
            name = name.strip()
            quoted = len(name) > 1 and name[0] == name[-1] == '"'
            name = fold(name[1:-1].replace('""', '"') if quoted else name, quoted, dialect)
            if not name:
                continue
            if name not in out:
                out.append(name)
    return out


def named_columns(name: str, listed: list[str] | None, described: list[str]) -> list[str]:
    """The columns of ``CREATE … VIEW name (listed…) AS query``: as in PostgreSQL, the list names
    the first columns and the query's own names (``described``) keep the rest; a longer list
    is an error, and so is a name given twice."""
    if not listed:
        return list(described)
    name = repr(name) if name else "(unnamed)"
    if len(listed) > len(described):
        raise SQLError(f"view {name} names {len(listed)} columns but its query has only "
                       f"{len(described)}: CREATE VIEW specifies more column names than columns")
    out = list(listed) + list(described[len(listed):])
    seen: set[str] = set()
    for c in out:
        if ascii_lower(c) in seen:
            raise SQLError(f"view {name}: column {c!r} is named more than once (name it in the column list)")
        seen.add(ascii_lower(c))
    return out
