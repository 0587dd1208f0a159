"""Statements an embedded server's client answers itself (a mixin of
:class:`~.duckclient.DuckClient`): ``SET``/``SHOW``/``RESET`` and the other commands of
:mod:`.commands`, ``SHOW INCREMENTAL VIEWS``, ``EXPLAIN INCREMENTAL VIEW``, ``SUBSCRIBE``, and
``COPY … FROM STDIN`` (the rows a client sent, loaded through an Arrow table: into a tracked
table through the session or the block's capture, else on the client's connection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..session.router import route
from . import commands as cmd
from . import results
from .copyio import copy_in_rows
from .results import Column, Result
from .sqlstate import ServeError
from .viewcmds import explain_view, show_views, subscription

if TYPE_CHECKING:
    from .prepared import Prepared

class Commands:
    """Needs ``backend``, ``conn``, ``settings``, ``status``, ``txn`` and the client's
    ``_hold_slot``."""

    def _command(self, p: Prepared, params) -> Result:
        c = p.command
        s = self.settings
        if isinstance(c, cmd.SetCmd):
            if s.knows(c.name) or c.name.lower() in ("timezone", "client_encoding", "datestyle"):
                if c.value is None:
                    s.reset(c.name)
                else:
                    s.set(c.name, c.value)
                return Result("SET", count_in_tag=False)
            self.conn.execute(p.text)
            return Result("SET", count_in_tag=False)
        if isinstance(c, cmd.ShowCmd):
            if c.name == "all":
                return Result("SHOW", self._command_columns(p), iter(s.all()))
            if c.name == "ivm_progress":
                return Result("SHOW", [Column.of("ivm_progress", "BIGINT")], iter([(self.backend.progress(),)]))
            if s.knows(c.name):
                return Result("SHOW", [Column.of(c.name, "VARCHAR")], iter([(s.get(c.name),)]))
            try:
                value = self.conn.execute("SELECT current_setting(?)::VARCHAR", [c.name]).fetchone()[0]
            except Exception:  # noqa: BLE001
                raise ServeError("42704", f'unrecognized configuration parameter "{c.name}"') from None
            return Result("SHOW", [Column.of(c.name, "VARCHAR")], iter([(value,)]))
        if isinstance(c, cmd.ResetCmd):
            s.reset(c.name)
            return Result("RESET", count_in_tag=False)
        if isinstance(c, cmd.ShowViews):
            return show_views(self.backend.session, self.backend.hub.subscriber_backlog())
        if isinstance(c, cmd.ExplainView):
            return explain_view(self.backend.session, c.name)
        if isinstance(c, cmd.Subscribe):
            return subscription(self, c, params)
        if isinstance(c, cmd.Noop):
            return Result(c.tag, count_in_tag=False)
        if isinstance(c, cmd.Deallocate):
            return Result("DEALLOCATE" + (" ALL" if c.name is None else ""), count_in_tag=False)
        if isinstance(c, cmd.Savepoint):
            if self.status == "I":
                raise ServeError("25P01", f"{c.verb} can only be used in transaction blocks")
            if c.verb == "ROLLBACK TO":
                raise ServeError("0A000", "ROLLBACK TO SAVEPOINT is not supported by ivm serve (DuckDB has no "
                                          "savepoints): ROLLBACK the whole transaction")
            return Result(c.verb, count_in_tag=False)
        raise ServeError("0A000", f"unsupported command {type(c).__name__}")

    def _command_columns(self, p: Prepared) -> list[Column] | None:
        c = p.command
        if isinstance(c, cmd.ShowCmd):
            return [Column.of(c.name, "VARCHAR")] if c.name != "all" else \
                [Column.of("name", "VARCHAR"), Column.of("setting", "VARCHAR"), Column.of("description", "VARCHAR")]
        if isinstance(c, cmd.ShowViews):
            return show_views(self.backend.session, []).columns
        if isinstance(c, cmd.ExplainView):
            return [Column.of("QUERY PLAN", "VARCHAR")]
        if isinstance(c, cmd.Subscribe):
            vs = self.backend.views.get(c.view)
            if vs is None or vs.error is not None:
                return None
            return [Column.of("ivm_progress", "BIGINT"), Column.of("ivm_diff", "BIGINT")] + \
                [Column.of(n, t) for n, t in zip(vs.columns, vs.types)]
        return None

    def _copy_in(self, p: Prepared) -> Result:
        b = self.backend
        r = p.route
        target = r.target
        columns = p.copy.columns
        if columns is None:
            meta = b.columns_of(target) if target else None
            if meta is None:
                raise ServeError("42P01", f'relation "{target}" does not exist')
            columns = list(meta)

        def finish(data) -> Result:
            rows = copy_in_rows(data, p.copy, len(columns))
            return self._load_rows(p, target, columns, rows)
        return Result("COPY", copy_in=results.CopyIn(len(columns), finish, p.copy.fmt))

    def _load_rows(self, p: Prepared, target: str, columns: list[str], rows: list) -> Result:
        import pyarrow as pa

        table = pa.table({f"c{i}": pa.array([r[i] for r in rows], type=pa.string())
                          for i in range(len(columns))})
        cols = ", ".join(f'"{c}"' for c in columns)
        sel = ", ".join(f"c{i}" for i in range(len(columns)))
        schema = "" if "." in (p.route.text[p.route.target_span[0]:p.route.target_span[1]]
                               if p.route.target_span else "") else "main."
        name = p.route.text[p.route.target_span[0]:p.route.target_span[1]] if p.route.target_span else target
        sql = f"INSERT INTO {schema}{name} ({cols}) SELECT {sel} FROM _ivm_copy_in"
        b = self.backend
        tracked = target in b.session.catalog.captures
        ins = route(sql)
        if tracked and self.txn is None:
            b.take_write_slot()
            try:
                with b.commit_section():
                    b.write_commits += 1
                    conn = b.session.connection
                    conn.register("_ivm_copy_in", table)
                    try:
                        cur = b.session.execute(sql)
                    finally:
                        conn.unregister("_ivm_copy_in")
            finally:
                b.write_slot.release()
        else:
            self.conn.register("_ivm_copy_in", table)
            try:
                if tracked:
                    self._hold_slot()
                    self.wrote_in_block = True
                    cur = self.txn.write(ins, None)
                else:
                    self.conn.execute(sql)
                    cur = None
            finally:
                self.conn.unregister("_ivm_copy_in")
        return Result("COPY", None, None, rowcount=len(rows) if cur is None else max(cur.rowcount, len(rows)))
