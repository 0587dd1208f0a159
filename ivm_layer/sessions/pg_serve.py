"""Rows of a PostgreSQL session's views into PostgreSQL: COPY of ``(row, k)`` pairs, the
change of a materialized view's table, and the TEMP table that serves a SELECT."""

from __future__ import annotations

from connectors import postgres as pgc

from .pg_state import PgView


def copy_in(conn, target: str, pairs, types: list[str]) -> None:
    """COPY ``(row, k)`` pairs (k copies each) into ``target``; array values, tuples in
    the engine, go back as lists."""
    arrays = [i for i, t in enumerate(types) if t.endswith("]")]
    with conn.cursor().copy(f"COPY {target} FROM STDIN") as cp:
        for row, k in pairs:
            if arrays:
                row = list(row)
                for i in arrays:
                    if row[i] is not None:
                        row[i] = thaw(row[i])
            for _ in range(k):
                cp.write_row(row)


def column_defs(vs: PgView) -> str:
    return ", ".join(f"{pgc.quote_ident(c)} {t}" for c, t in zip(vs.columns, vs.types))


def load_temp(conn, vs: PgView) -> None:
    """(Re)create ``pg_temp.<view>`` holding the engine's current rows (on the user's connection)."""
    q = pgc.quote_ident(vs.name)
    conn.execute(f"DROP TABLE IF EXISTS pg_temp.{q}")
    conn.execute(f"CREATE TEMP TABLE {q} ({column_defs(vs)})")
    copy_in(conn, f"pg_temp.{q}", vs.view.rows(), vs.types)


def write_change(ctl, vs: PgView, change: list[tuple[tuple, int]]) -> None:
    """Apply a view change to its table (inside the caller's transaction on ``ctl``)."""
    if not change:
        return
    table = f"public.{pgc.quote_ident(vs.name)}"
    dels = [(r, -k) for r, k in change if k < 0]
    ins = [(r, k) for r, k in change if k > 0]
    if dels:
        # rows to delete (with how many copies) go to a per-view temp table, then one DELETE
        # picks that many physical rows per value; rows match on their text form
        # (IS NOT DISTINCT FROM semantics, and a hash join)
        tmp = "pg_temp." + pgc.quote_ident(f"_ivm_del_{vs.name}")
        ctl.execute(f"CREATE TEMP TABLE IF NOT EXISTS {tmp} ({column_defs(vs)}, _ivm_id bigint, _ivm_k bigint) "
                    "ON COMMIT DELETE ROWS")
        copy_in(ctl, tmp, [(r + (i, k), 1) for i, (r, k) in enumerate(dels)], vs.types + ["bigint", "bigint"])
        rec_m = "ROW(" + ", ".join(f"m.{pgc.quote_ident(c)}" for c in vs.columns) + ")::text"
        rec_d = "ROW(" + ", ".join(f"d.{pgc.quote_ident(c)}" for c in vs.columns) + ")::text"
        ctl.execute(
            f"DELETE FROM {table} WHERE ctid IN (SELECT rid FROM ("
            f"SELECT m.ctid AS rid, d._ivm_k AS k, "
            f"row_number() OVER (PARTITION BY d._ivm_id ORDER BY m.ctid) AS rn "
            f"FROM {table} m JOIN {tmp} d ON {rec_m} = {rec_d}) x WHERE rn <= k)")
    if ins:
        copy_in(ctl, table, ins, vs.types)


def thaw(v):
    """An array value as the engine holds it (nested tuples) → lists for psycopg."""
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    return v
