"""DDL in a DuckDB session that touches incremental views or the tables they read.

``DROP VIEW`` of an incremental view goes through the catalog (its ``TEMP VIEW`` or table and
its catalog row removed, in one transaction); ``DROP``/``ALTER``/``CREATE OR REPLACE`` of a
table a view reads, of a materialized view's table, or of the ``ivm`` schema is refused with
the views to drop first, before DuckDB sees it; anything else runs unchanged. Cost: one parse
of the (short) ``DROP`` statement; O(views) checks.
"""

from __future__ import annotations

from ...errors import NotSupportedError, ProgrammingError
from ...io.duckdb import capture as duck
from ...sql.statements import classify
from ..core import unalterable
from ..results import Result, RowsResult
from ..router import Route
from .serving import ServedViews
from .tables import run
from .views import DuckViews, quote


def guard_ddl(r: Route, catalog: DuckViews) -> None:
    """Refuse ``ALTER TABLE``/``CREATE OR REPLACE TABLE`` of a view or of a table a view reads."""
    t = r.target
    if t is None or not (r.kind == "alter" or "or_replace" in r.flags):
        return
    if t in catalog.views:
        raise ProgrammingError(unalterable(t), sqlstate="42809")
    if t in catalog.captures:
        verb = "altering" if r.kind == "alter" else "replacing"
        raise ProgrammingError(f"table {t!r} is read by incremental view(s) {', '.join(catalog.readers(t))}: "
                               f"drop them before {verb} it", sqlstate="2BP01")


def drop_statement(conn, r: Route, params, catalog: DuckViews, served: ServedViews, in_txn: bool) -> Result:
    """Run the ``DROP`` statement ``r`` of a session (see the module docstring)."""
    views = catalog.views
    if "schema" in r.flags:
        if r.target == duck.SCHEMA and views:
            raise ProgrammingError(f"schema {duck.SCHEMA!r} holds the catalog of incremental views "
                                   f"{', '.join(sorted(views))}: drop those views first", sqlstate="2BP01")
        return run(conn, r.text, params)
    if not views and not catalog.captures:   # nothing of the layer's to protect: no parse
        return run(conn, r.text, params)
    st = classify(r.text, "duckdb")
    if hasattr(st, "names"):  # DROP VIEW
        if not [n for n in st.names if n in views]:
            return run(conn, r.text, params)
        if in_txn:
            raise NotSupportedError("DROP VIEW of an incremental view inside an explicit transaction "
                                    "is not supported: COMMIT or ROLLBACK first", sqlstate="25001")
        try:
            for n in st.names:
                if n in views:
                    catalog.drop(n)
                else:
                    run(conn, f"DROP VIEW {'IF EXISTS ' if st.if_exists else ''}{quote(n)}", None)
        finally:
            served.sync()
        return RowsResult()
    if getattr(st, "drop_kind", None) == "TABLE":
        for t in st.targets or []:
            if t in views and views[t].materialized:
                raise ProgrammingError(f"{t!r} is the table of incremental materialized view {t!r}: "
                                       f"use DROP VIEW {t}", sqlstate="42809")
            if t in catalog.captures:
                raise ProgrammingError(f"table {t!r} is read by incremental view(s) "
                                       f"{', '.join(catalog.readers(t))}: drop them before dropping it",
                                       sqlstate="2BP01")
    return run(conn, r.text, params)
