"""Errors on the wire: every exception becomes ``(SQLSTATE, message, detail, hint, position)``.

:class:`ServeError` is what ``ivm serve`` raises itself (with its SQLSTATE). DuckDB's
exceptions are mapped by class and message to the code PostgreSQL uses for the same mistake
(``42P01`` unknown table, ``42703`` unknown column, ``23505`` duplicate key, ``40001``
write conflict, ``57014`` cancelled …), and the position DuckDB draws under ``LINE n:`` is
turned back into PostgreSQL's 1-based character offset into the statement. PostgreSQL's own
errors (proxy mode) keep their code and fields. Nothing here puts a parameter value or a
password into a message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import (
    ConcurrentModificationError,
    CyclicQueryError,
    IVMError,
    ServeError,
    SQLError,
    UnsupportedSQLError,
    UpdateError,
)


@dataclass(frozen=True)
class WireError:
    sqlstate: str
    message: str
    detail: str | None = None
    hint: str | None = None
    position: int | None = None
    severity: str = "ERROR"


def in_failed_block() -> ServeError:
    return ServeError("25P02", "current transaction is aborted, commands ignored until end of transaction block")


def cancelled(reason: str = "user request") -> ServeError:
    return ServeError("57014", f"canceling statement due to {reason}")


_LINE = re.compile(r"\n*LINE (\d+): (.*)\n( *)(\^+)\s*$", re.DOTALL)
_PREFIX = re.compile(r"^[A-Z][A-Za-z ]* Error: ")


def _position(message: str, statement: str | None) -> tuple[str, int | None]:
    """DuckDB's message without its ``LINE n:`` drawing, and the 1-based offset it points at."""
    m = _LINE.search(message)
    if not m:
        return message, None
    text = message[:m.start()]
    if statement is None:
        return text, None
    line_no = int(m.group(1))
    snippet = m.group(2)
    col = len(m.group(3)) - len(f"LINE {line_no}: ")
    lines = statement.split("\n")
    if line_no > len(lines):
        return text, None
    start = sum(len(x) + 1 for x in lines[:line_no - 1])
    line = lines[line_no - 1]
    shown = snippet.removeprefix("...")
    if snippet.startswith("...") and shown:
        at = line.find(shown.removesuffix("...")[:40])
        col = col - 3 + max(at, 0)
    return text, start + max(col, 0) + 1


def _duck_code(e: Exception, msg: str) -> str:
    name = type(e).__name__
    low = msg.lower()
    if name in ("ParserException", "SyntaxException"):
        return "42601"
    if name == "CatalogException":
        if "already exists" in low:
            return "42P07"
        if "function" in low or "macro" in low:
            return "42883"
        if "schema" in low and "does not exist" in low:
            return "3F000"
        if "does not exist" in low:
            return "42P01"
        return "42704"
    if name == "BinderException":
        if "column" in low and ("not found" in low or "does not exist" in low):
            return "42703"
        if "function" in low or "candidate" in low:
            return "42883"
        if "cannot compare" in low or "cast" in low or "type" in low:
            return "42804"
        return "42P18" if "parameter" in low else "42000"
    if name == "ConversionException":
        return "22003" if "out of range" in low else "22P02"
    if name == "ConstraintException":
        if "not null" in low:
            return "23502"
        if "check" in low:
            return "23514"
        if "foreign key" in low:
            return "23503"
        return "23505" if ("unique" in low or "primary key" in low or "duplicate" in low) else "23000"
    if name in ("TransactionException", "SerializationException"):
        if "conflict" in low or name == "SerializationException":
            return "40001"
        if "aborted" in low:
            return "25P02"
        return "25000"
    return {"InterruptException": "57014", "OutOfRangeException": "22003",
            "InvalidInputException": "22023", "NotImplementedException": "0A000",
            "PermissionException": "42501", "IOException": "58030", "HTTPException": "58030",
            "DependencyException": "2BP01", "SequenceException": "2200H",
            "TypeMismatchException": "42804", "OutOfMemoryException": "53200",
            "FatalException": "XX000", "InternalException": "XX000"}.get(name, "XX000")


def _ivm_code(e: IVMError) -> str:
    explicit = e.__dict__.get("sqlstate")   # given where the error was raised (42P02, 22P02, …)
    if explicit:
        return explicit
    msg = str(e).lower()
    if isinstance(e, (UnsupportedSQLError, CyclicQueryError)):
        return "0A000"
    if isinstance(e, ConcurrentModificationError):
        return "40001"
    if isinstance(e, UpdateError):
        return "22000"
    if "no incremental view named" in msg or "unknown table" in msg:
        return "42P01"
    if "already exists" in msg:
        return "42P07"
    if isinstance(e, SQLError):
        return "42601" if "parse" in msg or "syntax" in msg else "42000"
    if "timed out" in msg:
        return "57014"
    return "55000"


_WORDING = [
    (re.compile(r"^Table with name (.+?) does not exist!"), r'relation "\1" does not exist'),
    (re.compile(r"^Table with name (.+?) already exists!"), r'relation "\1" already exists'),
    (re.compile(r'^Referenced column "(.+?)" not found in FROM clause!'), r'column "\1" does not exist'),
    (re.compile(r"^Scalar Function with name (.+?) does not exist!"), r"function \1 does not exist"),
    (re.compile(r"^Schema with name (.+?) does not exist!"), r'schema "\1" does not exist'),
]


def _pg_wording(msg: str) -> str:
    """DuckDB's wording of the most common mistakes → PostgreSQL's (clients match on them)."""
    for pat, rep in _WORDING:
        if pat.match(msg):
            return pat.sub(rep, msg, count=1)
    return msg


def wire_error(e: BaseException, statement: str | None = None) -> WireError:
    """The ErrorResponse fields for exception ``e`` raised by ``statement``."""
    if isinstance(e, ServeError):
        return WireError(e.sqlstate, str(e), e.detail, e.hint, e.position)
    sqlstate = getattr(e, "sqlstate", None)
    diag = getattr(e, "diag", None)
    if sqlstate and diag is not None:       # psycopg: PostgreSQL's own error (proxy mode)
        pos = diag.statement_position
        return WireError(sqlstate, diag.message_primary or str(e), diag.message_detail,
                         diag.message_hint, int(pos) if pos else None, diag.severity_nonlocalized or "ERROR")
    if isinstance(e, IVMError):
        cause = e.__cause__
        if cause is not None and type(cause).__module__.startswith("duckdb"):
            inner = wire_error(cause, statement)
            return WireError(inner.sqlstate, str(e), inner.detail, inner.hint, inner.position)
        return WireError(_ivm_code(e), str(e))
    if type(e).__module__.startswith("duckdb") or type(e).__module__ == "_duckdb":
        msg, pos = _position(str(e), statement)
        code = _duck_code(e, msg)
        msg = _PREFIX.sub("", msg.strip(), count=1)
        hint = None
        if "\nDid you mean" in msg:
            msg, hint = msg.split("\nDid you mean", 1)
            hint = "Did you mean " + hint.strip().split("\n")[0]
            if re.search(r'"(?:pg_|duckdb_|sqlite_|information_schema|_ivm)', hint):
                hint = None        # DuckDB suggesting its own catalog views: no help to a client
        msg = _pg_wording(msg.strip())
        first, _, rest = msg.partition("\n")
        return WireError(code, first, rest.strip() or None, hint, pos)
    if isinstance(e, MemoryError):
        return WireError("53200", "out of memory")
    return WireError("XX000", f"internal error: {type(e).__name__}: {e}")
