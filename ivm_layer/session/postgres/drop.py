"""``DROP`` statements in a PostgreSQL session: ``DROP VIEW`` of incremental views goes through
the view catalog (slot, publication, checkpoint and definition removed); ``DROP TABLE`` of a
table an incremental view reads, or of a materialized view's table, is refused before
PostgreSQL sees it; anything else runs unchanged.
"""

from __future__ import annotations

from ...errors import IVMError
from ...io.postgres import replication as pgc
from ...sql.statements import DropView
from ..core import Cursor
from .state import PgView
from .user import UserConnection
from .views import ViewCatalog


def drop_statement(st, text: str, params, views: dict[str, PgView], catalog: ViewCatalog,
                   user: UserConnection) -> Cursor:
    """Run the DROP statement ``text`` (classified as ``st``) for the session whose views,
    catalog and user connection are given."""
    if isinstance(st, DropView):
        ours = [n for n in st.names if n in views or n in catalog.skipped]
        if not ours:
            return user.run(text, params)
        if user.in_txn():
            raise IVMError("DROP VIEW of an incremental view inside an explicit transaction is not supported")
        for n in st.names:
            if n in views:
                catalog.drop(n, user)
            elif n in catalog.skipped:
                catalog.drop_skipped(n)
            else:
                user.run(f"DROP VIEW {'IF EXISTS ' if st.if_exists else ''}{pgc.quote_ident(n)}", None)
        return Cursor()
    if getattr(st, "drop_kind", None) == "TABLE":
        for t in st.targets or []:
            readers = sorted(v.name for v in views.values() if t in v.tables)
            if readers:
                raise IVMError(f"table {t!r} is read by incremental view(s) {', '.join(readers)}: "
                               "drop them before dropping it")
            if t in views and views[t].materialized:
                raise IVMError(f"{t!r} is the table of incremental materialized view {t!r}: use DROP VIEW {t}")
    cur = user.run(text, params)
    user.wrote()
    return cur
