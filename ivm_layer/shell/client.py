"""The shell as a plain client of a server, the way psql is one: ``ivm shell --client URL``,
or chosen by itself when the server is ``ivm serve``.

When to use which (also in the README):

- **A session** (the default for ``postgresql://`` URLs of an ordinary PostgreSQL): the shell
  keeps incremental views itself, in its own process, fed by logical replication (it needs
  ``wal_level=logical`` and the REPLICATION privilege); they live as long as the shell.
- **A client** (``--client``, or any URL whose server reports the ``ivm_version`` setting,
  i.e. ``ivm serve``): statements go to the server unchanged over one connection and the
  server keeps the views (``CREATE INCREMENTAL VIEW`` is the server's to run), so other
  clients see them too and they outlive the shell. ``\\dv`` reads ``SHOW INCREMENTAL VIEWS``,
  ``\\explain v`` ``EXPLAIN INCREMENTAL VIEW v`` and ``\\watch v`` streams
  ``COPY (SUBSCRIBE v WITH (SNAPSHOT = false)) TO STDOUT``. Against a PostgreSQL that is not
  ``ivm serve`` the client is a psql-like shell without incremental views.

Detection costs nothing extra: the server sends ``ivm_version`` as a ParameterStatus
message while the connection starts (PostgreSQL sends ``server_version`` the same way); the
shell reads it with ``connection.info.parameter_status("ivm_version")``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import IVMError
from ..identifiers import resolve

#: the run-time setting ``ivm serve`` reports at connection start (ParameterStatus)
IVM_VERSION_SETTING = "ivm_version"


def open_connection(target: str):
    """A psycopg connection (autocommit, psql's simple query protocol) to ``target``."""
    import os

    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from ..io.postgres.conninfo import connection_error, normalize

    target = normalize(target)
    extra = {}
    if "connect_timeout" not in conninfo_to_dict(target) and "PGCONNECT_TIMEOUT" not in os.environ:
        extra["connect_timeout"] = 10   # an unreachable host fails in 10 s, not at the TCP timeout
    try:
        return psycopg.connect(make_conninfo(target, **extra), autocommit=True,
                               cursor_factory=psycopg.ClientCursor)
    except psycopg.Error as e:
        raise IVMError(connection_error(e, target)) from None


def server_ivm_version(conn) -> str | None:
    """The ``ivm serve`` version the server reported, or None for any other server."""
    return conn.info.parameter_status(IVM_VERSION_SETTING)


class ClientSession:
    """What the shell needs from a session, over a plain connection (see the module docstring)."""

    dialect = "postgres"

    def __init__(self, conn, url: str):
        from ..io.postgres.conninfo import redact

        self.connection = conn
        self.url = redact(url)
        self.ivm_version = server_ivm_version(conn)

    @property
    def mode(self) -> str:
        if self.ivm_version:
            return f"client of ivm serve {self.ivm_version}: the server keeps the incremental views"
        return "plain client: statements go to the server as they are; no incremental views"

    # -- statements -------------------------------------------------------------------------
    def execute(self, sql: str, params=None):
        cur = self.connection.cursor()
        cur.execute(sql, params)
        return cur

    def copy(self, statement: str):
        """``COPY … FROM STDIN`` / ``TO STDOUT``: psycopg's ``Copy`` as a context manager."""
        return self.connection.cursor().copy(statement)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()

    # -- incremental views, as the server lists them -----------------------------------------
    def _require_serve(self, what: str) -> None:
        if not self.ivm_version:
            version = self.connection.info.parameter_status("server_version") or "?"
            raise IVMError(f"{what} needs ivm serve; this server (PostgreSQL {version}) keeps no "
                           "incremental views (run `ivm shell` without --client to keep them in the shell)")

    @property
    def views(self) -> list[str]:
        if not self.ivm_version:
            return []
        return sorted(r[0] for r in self.execute("SHOW INCREMENTAL VIEWS").fetchall())

    def view_listing(self, name: str | None = None, quoted: bool = False) -> tuple[list[str], list[tuple]]:
        """``\\dv``: the server's ``SHOW INCREMENTAL VIEWS`` (optionally one view: a quoted name
        exactly, an unquoted one by its ASCII fold, as the server resolves names)."""
        self._require_serve("\\dv")
        cur = self.execute("SHOW INCREMENTAL VIEWS")
        columns = [d.name for d in cur.description]
        rows = cur.fetchall()
        if name is not None:
            key = name if quoted else resolve(name, {str(r[0]) for r in rows})
            rows = [r for r in rows if str(r[0]) == key]
            if not rows:
                raise IVMError(f"no incremental view named {name!r}")
        return columns, rows

    def view_kinds(self) -> dict[str, str]:
        """The server's incremental views and their kinds (``view``/``materialized``), for
        ``\\d``; none from a server that keeps none."""
        if not self.ivm_version:
            return {}
        return {str(r[0]): str(r[1]) for r in self.execute("SHOW INCREMENTAL VIEWS").fetchall()}

    def explain(self, name: str) -> str:
        self._require_serve("\\explain")
        rows = self.execute(f"EXPLAIN INCREMENTAL VIEW {_ident(name)}").fetchall()
        return "\n".join(str(r[0]) for r in rows)

    def tables(self) -> dict[str, list[str]]:
        """Tables and views with their columns (completion)."""
        out: dict[str, list[str]] = {}
        for t, c in self.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema', 'ivm') "
                "ORDER BY table_name, ordinal_position").fetchall():
            out.setdefault(t, []).append(c)
        return out

    def watch_view(self, runner, name: str) -> int:
        """``\\watch v``: print the view's changes as the server streams them, until Ctrl-C."""
        from .interrupt import call_interruptibly
        from .render import render_change

        self._require_serve("\\watch VIEW")
        columns = [d.name for d in self.execute(f"SELECT * FROM {_ident(name)} LIMIT 0").description]
        display = runner.display
        printed = 0

        def stream() -> None:
            nonlocal printed
            sql = f"COPY (SUBSCRIBE {_ident(name)} WITH (SNAPSHOT = false)) TO STDOUT"
            with self.copy(sql) as cp:
                # the server has answered the COPY, so the subscription is in place: every
                # commit from now on is printed (saying so earlier could miss a write)
                if display.format == "aligned" and not display.quiet:
                    runner.write(f"Watching {name} ({', '.join(columns)}): + inserted, - deleted; "
                                 "Ctrl-C to stop.\n")
                    runner.flush()
                for line in _lines(cp):
                    fields = [_unescape(f) for f in line.split("\t")]
                    k = int(fields[1])
                    runner.write(render_change(columns, tuple(fields[2:]), k, display))
                    runner.flush()
                    printed += 1

        try:
            call_interruptibly(stream, self.connection.cancel)
        except runner.db_errors as e:
            if not getattr(e, "ivm_interrupted", False):
                raise
        if display.format == "aligned" and not display.quiet:
            runner.write(f"Stopped watching {name} ({printed} change{'' if printed == 1 else 's'}).\n")
        return printed


def _ident(name: str) -> str:
    return name if name.isidentifier() and name == name.lower() else '"' + name.replace('"', '""') + '"'


def _lines(cp) -> Iterator[str]:
    rest = b""
    for chunk in cp:
        rest += bytes(chunk)
        *lines, rest = rest.split(b"\n")
        for line in lines:
            yield line.decode()


_ESC = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "\\": "\\"}


def _unescape(field: str) -> str | None:
    """A field of COPY's text format (``\\N`` is NULL)."""
    if field == "\\N":
        return None
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\" and i + 1 < len(field):
            out.append(_ESC.get(field[i + 1], field[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
