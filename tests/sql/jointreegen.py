"""Seeded random join trees with outer joins (issue 30): chains and mixes of LEFT / RIGHT / FULL and
inner joins over 3–4 tables, parenthesized joins, USING, self-joins, one-side ON conditions and
WHERE filters — SQL text that DuckDB, PostgreSQL and the engine all read — plus row streams
(small domains: NULL keys, duplicates, deletes that flip rows between matched and unmatched)."""

from __future__ import annotations

import random

SCHEMA = {"a": {"k": "INTEGER", "v": "INTEGER"},
          "b": {"k": "INTEGER", "j": "INTEGER", "v": "INTEGER"},
          "c": {"j": "INTEGER", "v": "INTEGER"},
          "d": {"k": "INTEGER", "j": "INTEGER"}}
KINDS = ["LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "JOIN"]


def _cols(alias_tables: dict[str, str]) -> list[str]:
    return [f"{a}.{c}" for a, t in alias_tables.items() for c in SCHEMA[t]]


def gen_tree(seed: int) -> str:
    """A SELECT over a random join tree of 3 or 4 table occurrences."""
    rng = random.Random(seed)
    n = rng.choice([3, 3, 4])
    tables = [rng.choice(list(SCHEMA)) for _ in range(n)]
    aliases = [f"t{i}" for i in range(n)]
    at = dict(zip(aliases, tables))
    outer_seen = False

    def on(left: list[str], right: list[str]) -> str:
        lcols = [c for c in _cols({a: at[a] for a in left})]
        rcols = [c for c in _cols({a: at[a] for a in right})]
        # prefer equal column names (keys in a shared domain)
        pairs = [(x, y) for x in lcols for y in rcols if x.split(".")[1] == y.split(".")[1]] or \
            [(x, y) for x in lcols for y in rcols]
        x, y = rng.choice(pairs)
        conds = [f"{x} = {y}"]
        r = rng.random()
        if r < 0.2:
            conds.append(f"{rng.choice(rcols)} > 1")
        elif r < 0.3:
            conds.append(f"{rng.choice(lcols)} <> 2")
        elif r < 0.38:
            x2, y2 = rng.choice(pairs)
            conds.append(f"{x2} = {y2}")
        return " AND ".join(conds)

    def item(i: int) -> str:
        return f"{tables[i]} {aliases[i]}"

    # a left-deep chain, optionally with the right side of one join parenthesized
    sql = item(0)
    left = [aliases[0]]
    i = 1
    while i < n:
        kind = rng.choice(KINDS)
        outer_seen = outer_seen or kind != "JOIN"
        if i + 1 < n and rng.random() < 0.3:  # (ti JOIN/LEFT JOIN ti+1 ON …)
            inner_kind = rng.choice(["JOIN", "LEFT JOIN", "JOIN"])
            right = [aliases[i], aliases[i + 1]]
            inner = f"({item(i)} {inner_kind} {item(i + 1)} ON {on([aliases[i]], [aliases[i + 1]])})"
            sql += f" {kind} {inner} ON {on(left, right)}"
            left += right
            i += 2
            continue
        right = [aliases[i]]
        shared = [c for c in SCHEMA[tables[i]] if any(c in SCHEMA[at[a]] for a in left)
                  and sum(c in SCHEMA[at[a]] for a in left) == 1]
        if shared and rng.random() < 0.15 and not any(c in SCHEMA[tables[i]] and c != shared[0]
                                                          for a in left for c in SCHEMA[at[a]]):
            sql += f" {kind} {item(i)} USING ({shared[0]})"
        else:
            sql += f" {kind} {item(i)} ON {on(left, right)}"
        left += right
        i += 1
    if not outer_seen:
        sql = sql.replace(" JOIN ", " LEFT JOIN ", 1)
    cols = _cols(at)
    r = rng.random()
    if r < 0.25 and "USING" not in sql:
        select = "*"
    else:
        picked = rng.sample(cols, rng.randint(2, min(5, len(cols))))
        if rng.random() < 0.3:
            x, y = rng.sample(cols, 2)
            picked.append(f"coalesce({x}, {y}, -1) AS co")
        select = ", ".join(picked)
    where = ""
    r = rng.random()
    if r < 0.2:
        where = f" WHERE {rng.choice(cols)} IS NULL"
    elif r < 0.35:
        where = f" WHERE {rng.choice(cols)} > 0"
    elif r < 0.45:
        x, y = rng.sample(cols, 2)
        where = f" WHERE coalesce({x}, -1) = coalesce({y}, -1) OR {x} < 2"
    distinct = "DISTINCT " if rng.random() < 0.1 else ""
    return f"SELECT {distinct}{select} FROM {sql}{where}"


def gen_row(rng: random.Random, table: str) -> tuple:
    return tuple(None if rng.random() < 0.15 else rng.randint(0, 3) for _ in SCHEMA[table])
