"""Seeded random view definitions using the constructs of issue 15 (computed columns,
expression filters, OR/NOT, residual cross-table conditions, DISTINCT, WITH and FROM
subqueries, NATURAL JOIN / USING, set operations, GROUP BY with computed arguments,
[NOT] EXISTS / [NOT] IN subqueries, LEFT/RIGHT/FULL outer joins, self-joins and inequality
joins), with update streams.

The oracle is DuckDB running the very same SELECT text (``gen_view(seed)`` returns SQL
DuckDB and the engine both read); everything is deterministic given the seed.
"""

from __future__ import annotations

import decimal
import random

SCHEMA = {"r": {"a": "INTEGER", "b": "INTEGER", "c": "VARCHAR"},
          "s": {"a": "INTEGER", "d": "INTEGER", "e": "DECIMAL(6,2)"},
          "t": {"d": "INTEGER", "f": "VARCHAR"}}
STRINGS = ["ab", "Abc", "", "b_", "xy", "a%"]

# FROM shapes: (sql, {alias: table})
FROMS = [
    ("r", {"r": "r"}),
    ("r JOIN s ON r.a = s.a", {"r": "r", "s": "s"}),
    ("r JOIN s USING (a)", {"r": "r", "s": "s"}),
    ("r NATURAL JOIN s", {"r": "r", "s": "s"}),
    ("r, s WHERE_JOIN r.b < s.d + 1", {"r": "r", "s": "s"}),
    ("r JOIN s ON r.a = s.a JOIN t ON s.d = t.d", {"r": "r", "s": "s", "t": "t"}),
    ("r x JOIN r y ON x.a = y.b", {"x": "r", "y": "r"}),
    ("s JOIN t USING (d)", {"s": "s", "t": "t"}),
]


def _cols(aliases, kind):
    out = []
    for al, tb in aliases.items():
        for c, ty in SCHEMA[tb].items():
            if kind == "num" and ty != "VARCHAR" or kind == "text" and ty == "VARCHAR" or kind == "any":
                out.append(f"{al}.{c}")
    return out


def _num(rng, aliases, depth=0):
    cols = _cols(aliases, "num")
    r = rng.random()
    if depth > 1 or r < 0.35:
        return rng.choice(cols)
    if r < 0.45:
        return str(rng.randint(-2, 3))
    a, b = _num(rng, aliases, depth + 1), _num(rng, aliases, depth + 1)
    return rng.choice([f"({a} + {b})", f"({a} - {b})", f"({a} * {b})", f"coalesce({a}, {b})",
                       f"nullif({a}, {b})", f"abs({a})", f"CASE WHEN {a} > {b} THEN {a} ELSE {b} END",
                       f"({a} % 3)", f"round({a} * 1.5, 1)", f"floor({a} / 2)", f"ceil({a} * 0.5)",
                       f"CAST({a} AS INTEGER)", f"CAST({a} AS DECIMAL(8,1))"])


def _text(rng, aliases):
    cols = _cols(aliases, "text")
    if not cols:
        return "'k'"
    c = rng.choice(cols)
    return rng.choice([c, f"upper({c})", f"lower({c})", f"{c} || 'z'", f"substr({c}, 2, 2)", f"trim({c})",
                       f"coalesce({c}, '?')", f"CAST(length({c}) AS VARCHAR)",
                       f"CASE WHEN {c} LIKE 'a%' THEN 'A' WHEN {c} IS NULL THEN 'N' ELSE 'O' END"])


def _cond(rng, aliases, one_table: str | None = None):
    al = {one_table: aliases[one_table]} if one_table else aliases
    r = rng.random()
    if r < 0.3:
        return f"{_num(rng, al)} {rng.choice(['<', '<=', '=', '<>', '>'])} {_num(rng, al)}"
    if r < 0.45:
        return f"({_cond(rng, aliases, one_table)} OR {_cond(rng, aliases, one_table)})"
    if r < 0.55:
        return f"NOT ({_cond(rng, aliases, one_table)})"
    if r < 0.65:
        return f"{_num(rng, al)} IN (1, 2, {rng.choice(['3', 'NULL'])})"
    if r < 0.75:
        t = _cols(al, "text")
        return f"{rng.choice(t)} LIKE '{rng.choice(['a%', '%b%', '_b'])}'" if t else "TRUE"
    if r < 0.85:
        return f"{_num(rng, al)} IS {rng.choice(['', 'NOT '])}NULL"
    return f"({_num(rng, al)}) % 2 = {rng.randint(0, 1)}"


def gen_view(seed: int) -> str:
    rng = random.Random(seed)
    if rng.random() < 0.2:  # a set operation of two branches with the same number of columns
        n = rng.randint(1, 2)
        op = rng.choice(["UNION ALL", "UNION", "EXCEPT", "INTERSECT", "EXCEPT ALL", "INTERSECT ALL"])
        numeric = rng.random() < 0.6  # else text and numbers meet (DuckDB: VARCHAR)
        return f"{_select(rng, n, wrap=False, numeric=numeric)} {op} {_select(rng, n, wrap=False, numeric=numeric)}"
    r = rng.random()
    if r < 0.12:  # subquery conditions: [NOT] EXISTS, [NOT] IN (NULLs in both sides)
        inner = rng.choice(["s", "t"])
        col = "d" if inner == "t" else rng.choice(["a", "d"])
        outer = rng.choice(["r.a", "r.b"])
        cond = rng.choice([
            f"EXISTS (SELECT 1 FROM {inner} WHERE {inner}.{col} = {outer})",
            f"NOT EXISTS (SELECT 1 FROM {inner} x WHERE x.{col} = {outer}"
            + (f" AND x.d > {rng.randint(0, 3)})" if inner == "s" else ")"),
            f"{outer} IN (SELECT {inner}.{col} FROM {inner})",
            f"{outer} NOT IN (SELECT {inner}.{col} FROM {inner}"
            + (f" WHERE {inner}.e > {rng.randint(-1, 2)})" if inner == "s" else ")"),
        ])
        extra = f" AND {_cond(rng, {'r': 'r'})}" if rng.random() < 0.4 else ""
        return f"SELECT {rng.choice(['DISTINCT ', ''])}r.a, {_text(rng, {'r': 'r'})} AS c1 FROM r WHERE {cond}{extra}"
    if r < 0.24:  # outer joins: LEFT (preserved side may be a join), RIGHT, FULL
        kind = rng.choice(["LEFT", "LEFT", "RIGHT", "FULL"])
        if kind == "LEFT" and rng.random() < 0.4:
            frm = "r JOIN s ON r.a = s.a LEFT JOIN t ON t.d = s.d" + (" AND t.f LIKE 'a%'" if rng.random() < 0.5 else "")
            aliases = {"r": "r", "s": "s", "t": "t"}
        else:
            extra = {"LEFT": f" AND s.d > {rng.randint(0, 3)}", "RIGHT": f" AND r.b > {rng.randint(0, 3)}",
                     "FULL": ""}[kind]  # a condition on the side that gets NULLs
            frm = f"r {kind} JOIN s ON r.a = s.a" + (extra if rng.random() < 0.4 else "")
            aliases = {"r": "r", "s": "s"}
        items = [f"{_num(rng, aliases)} AS c0", f"{rng.choice(_cols(aliases, 'any'))} AS c1"]
        sql = f"SELECT {rng.choice(['DISTINCT ', ''])}{', '.join(items)} FROM {frm}"
        if rng.random() < 0.4:
            sql += f" WHERE {_cond(rng, aliases, rng.choice(list(aliases)))}"
        return sql
    if r < 0.30:  # nested views: GROUP BY over outer joins / subquery conditions, aggregated FROM subqueries
        return rng.choice([
            "SELECT r.a, count(s.d) AS n, sum(s.e) AS t FROM r LEFT JOIN s ON r.a = s.a GROUP BY r.a",
            ("SELECT q.n, count(*) AS k FROM (SELECT r.a, count(s.d) AS n FROM r LEFT JOIN s ON r.a = s.a "
             "GROUP BY r.a) q GROUP BY q.n"),
            "SELECT r.b, count(*) AS n FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.a = r.a) GROUP BY r.b",
            ("SELECT r.c, g.total FROM r JOIN (SELECT s.a, sum(s.e) AS total FROM s GROUP BY s.a) g ON r.a = g.a "
             f"WHERE g.total > {rng.randint(-1, 2)}"),
            "SELECT d.b, t.f FROM (SELECT DISTINCT r.b FROM r) d JOIN t ON d.b = t.d",
            "WITH c AS (SELECT s.d, count(*) AS n FROM s GROUP BY s.d) SELECT x.n, y.n FROM c x JOIN c y ON x.d = y.n",
        ])
    if r < 0.40:  # GROUP BY with computed aggregate arguments
        frm, aliases = rng.choice(FROMS[:4] + FROMS[5:])
        frm = frm.replace(" WHERE_JOIN ", " WHERE ")
        key = rng.choice([c for c in _cols(aliases, "any") if "NATURAL" not in frm and "USING" not in frm
                          or not c.endswith((".a", ".d"))])
        aggs = [f"{rng.choice(['sum', 'min', 'max', 'count'])}({_num(rng, aliases)}) AS g{i}"
                for i in range(rng.randint(1, 2))]
        sql = f"SELECT {key} AS k, count(*) AS n, {', '.join(aggs)} FROM {frm}"
        if rng.random() < 0.5:
            sql += (" AND " if " WHERE " in sql else " WHERE ") + _cond(rng, aliases, rng.choice(list(aliases)))
        return sql + f" GROUP BY {key}"
    return _select(rng, rng.randint(1, 3), wrap=True)


def _select(rng, n_items: int, wrap: bool, numeric: bool = False) -> str:
    frm, aliases = rng.choice(FROMS)
    conds = []
    if " WHERE_JOIN " in frm:
        frm, j = frm.split(" WHERE_JOIN ")
        conds.append(j)
    for _ in range(rng.randint(0, 2)):
        conds.append(_cond(rng, aliases, rng.choice([None, *aliases])))
    items = []
    for i in range(n_items):
        r = rng.random()
        if numeric:
            items.append(f"{_num(rng, aliases)} AS c{i}")
        elif r < 0.4:
            col = rng.choice(_cols(aliases, "any"))
            if "NATURAL" in frm or "USING" in frm:
                col = col if not col.endswith((".a", ".d")) else f"{col} + 0"
            items.append(f"{col} AS c{i}")
        elif r < 0.75:
            items.append(f"{_num(rng, aliases)} AS c{i}")
        else:
            items.append(f"{_text(rng, aliases)} AS c{i}")
    distinct = "DISTINCT " if rng.random() < 0.2 else ""
    sql = f"SELECT {distinct}{', '.join(items)} FROM {frm}"
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    wrap = rng.random() if wrap else 1.0
    if wrap < 0.15 and not distinct:
        sql = f"WITH q AS ({sql}) SELECT * FROM q"
    elif wrap < 0.3 and not distinct:
        sql = f"SELECT sub.c0 FROM ({sql}) sub WHERE sub.c0 IS NOT NULL"
    elif wrap < 0.35:
        sql = f"SELECT * FROM ({sql}) sub"
    return sql


def gen_row(rng, table):
    out = []
    for ty in SCHEMA[table].values():
        if rng.random() < 0.12:
            out.append(None)
        elif ty == "INTEGER":
            out.append(rng.randint(0, 4))
        elif ty == "VARCHAR":
            out.append(rng.choice(STRINGS))
        else:
            out.append(decimal.Decimal(rng.randint(-300, 500)) / 100)
    return tuple(out)
