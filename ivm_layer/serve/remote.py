"""A client of ``ivm serve`` with the session's surface, for ``ivm shell postgresql://…``.

``ivm shell`` embeds a session when it is given a DuckDB file or a plain PostgreSQL; given the
address of an ``ivm serve`` it must be just another client (the server owns the sessions and
their replication slots). :func:`connect_remote` tells the two apart by the ``ivm_serve``
ParameterStatus the server sends at connect time, and returns a :class:`RemoteSession`:
``execute`` runs statements on one psycopg connection, ``info``/``explain`` read ``SHOW
INCREMENTAL VIEWS``/``EXPLAIN INCREMENTAL VIEW``, and ``subscribe`` + ``poll`` (the shell's
``\\watch v``) follow ``SUBSCRIBE v`` on a second connection.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable

from ..session.core import Cursor, ViewInfo


def connect_remote(url: str):
    """A :class:`RemoteSession` when ``url`` is an ``ivm serve``, else ``None``."""
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True)
    except psycopg.Error:
        return None
    if conn.info.parameter_status("ivm_serve") is None:
        conn.close()
        return None
    return RemoteSession(conn, url)


class RemoteSession:
    dialect = "postgres"

    def __init__(self, conn, url: str):
        from ..io.postgres import conninfo as pgconn

        self._conn = conn
        self._target = url
        self.url = pgconn.redact(url) if "://" in url else url
        self._subs: list = []
        self._closed = False

    @property
    def connection(self):
        return self._conn

    def execute(self, sql: str, params=None) -> Cursor:
        cur = self._conn.execute(sql, params)
        while cur.nextset():
            pass
        desc = cur.description
        rows = cur.fetchall() if desc is not None else []
        return Cursor([tuple(d) for d in desc] if desc is not None else None, rows, cur.rowcount)

    @property
    def views(self) -> list[str]:
        return sorted(r[0] for r in self._conn.execute("SHOW INCREMENTAL VIEWS").fetchall())

    def info(self, name: str | None = None) -> list[ViewInfo]:
        rows = self._conn.execute("SHOW INCREMENTAL VIEWS").fetchall()
        if name is not None:
            rows = [r for r in rows if r[0] == name.lower() or r[0] == name]
            if not rows:
                from ..errors import IVMError

                raise IVMError(f"no incremental view named {name!r}")
        out = []
        for vname, kind, nrows, qclass, lag_s, lag_b, _backlog in rows:
            cols = self._conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
                "ORDER BY ordinal_position", [vname]).fetchall()
            defn = self._conn.execute("SELECT view_definition FROM information_schema.views WHERE table_name = %s",
                                      [vname]).fetchone()
            out.append(ViewInfo(vname, kind, nrows, qclass, (), tuple(c for c, _ in cols),
                                tuple(t for _, t in cols), defn[0] if defn else "", lag_b, lag_s))
        return out

    def explain(self, name: str) -> str:
        from .commands import ident

        quoted = '"' + ident(name).replace('"', '""') + '"'
        return "\n".join(r[0] for r in self._conn.execute(f"EXPLAIN INCREMENTAL VIEW {quoted}").fetchall()) + "\n"

    def tables(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for t, c in self._conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema NOT IN "
                "('pg_catalog', 'information_schema') ORDER BY table_name, ordinal_position").fetchall():
            out.setdefault(t, []).append(c)
        return out

    def subscribe(self, name: str, callback: Callable) -> Callable[[], None]:
        """Follow ``SUBSCRIBE name`` on a second connection; ``poll`` hands the changes to
        ``callback`` (one call per commit)."""
        import psycopg

        from .commands import ident

        conn = psycopg.connect(self._target, autocommit=True)
        batches: queue.Queue = queue.Queue()
        quoted = '"' + ident(name).replace('"', '""') + '"'

        def follow() -> None:
            pending: list = []
            with contextlib.suppress(psycopg.Error):
                for row in conn.cursor().stream(f"SUBSCRIBE {quoted} WITH (SNAPSHOT = false, PROGRESS)"):
                    if row[1] is None:
                        if pending:
                            batches.put(pending)
                            pending = []
                        continue
                    pending.append((tuple(row[2:]), row[1]))
        t = threading.Thread(target=follow, name=f"ivm-shell-subscribe-{name}", daemon=True)
        t.start()
        sub = (callback, batches, conn, t)
        self._subs.append(sub)

        def unsubscribe() -> None:
            if sub in self._subs:
                self._subs.remove(sub)
            with contextlib.suppress(Exception):
                conn.cancel_safe()
            t.join(5)
            with contextlib.suppress(Exception):
                conn.close()
        return unsubscribe

    def poll(self, timeout: float = 0.0) -> int:
        n = 0
        for callback, batches, _, _ in list(self._subs):
            try:
                change = batches.get(timeout=timeout) if timeout and not n else batches.get_nowait()
            except queue.Empty:
                continue
            while True:
                callback(change)
                n += len(change)
                try:
                    change = batches.get_nowait()
                except queue.Empty:
                    break
        return n

    def sync(self) -> None:
        """The server applies every commit before it answers; nothing to wait for."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _, _, conn, _ in list(self._subs):
            with contextlib.suppress(Exception):
                conn.cancel_safe()
                conn.close()
        self._conn.close()
