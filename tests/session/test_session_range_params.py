"""Range parameters through a DuckDB session (issue 28 item 5): views with ``ts > $since``,
``BETWEEN $lo AND $hi`` and a range on a second column, read with ``SELECT … FROM v WHERE
since = …`` after each write of a random INSERT / UPDATE / DELETE stream (NULLs, duplicates,
integer and fractional values in a DOUBLE column), each read checked against DuckDB running
the view's SQL over the base tables with the values substituted."""

import random
from collections import Counter

from ivm_layer.session import connect

VIEWS = {
    "recent": ("SELECT t.id, t.amount FROM trans t WHERE t.acc = $acc AND t.ts > $since",
               "SELECT t.id, t.amount FROM trans t WHERE t.acc = ? AND t.ts > ?", ("acc", "since")),
    "span": ("SELECT t.id, t.ts FROM trans t WHERE t.ts BETWEEN $lo AND $hi",
             "SELECT t.id, t.ts FROM trans t WHERE t.ts BETWEEN ? AND ?", ("lo", "hi")),
    "capped": ("SELECT t.acc FROM trans t WHERE t.ts >= $lo AND t.amount < $cap",
               "SELECT t.acc FROM trans t WHERE t.ts >= ? AND t.amount < ?", ("lo", "cap")),
}


def test_range_views_read_through_sql_match_duckdb():
    s = connect()
    s.execute("CREATE TABLE trans (id INTEGER, acc INTEGER, ts DOUBLE, amount INTEGER)")
    s.execute("INSERT INTO trans SELECT i, i % 3, CASE WHEN i % 9 = 8 THEN NULL ELSE i % 11 END, i % 5 "
              "FROM range(40) t(i)")
    for name, (sql, _, _) in VIEWS.items():
        s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
        assert "ordered index on t.ts" in s.explain(name)
    rng = random.Random(285)

    def val(hi: int = 10):
        if rng.random() < 0.1:
            return "NULL"
        x = rng.randint(0, hi)
        return f"{x}.5" if rng.random() < 0.2 else str(x)

    checked = nonempty = 0
    for step in range(30):
        kind = step % 5
        if kind in (0, 1):
            row = f"({100 + step}, {rng.randint(0, 3)}, {val()}, {rng.randint(0, 5)})"
            s.execute(f"INSERT INTO trans VALUES {row}, {row}" if kind else f"INSERT INTO trans VALUES {row}")
        elif kind == 2:
            s.execute(f"UPDATE trans SET ts = {val()} WHERE id % 13 = {rng.randint(0, 12)}")
        elif kind == 3:
            s.execute(f"DELETE FROM trans WHERE id % 17 = {rng.randint(0, 16)}")
        else:
            s.execute(f"UPDATE trans SET acc = {rng.randint(0, 3)}, amount = {val(5)} WHERE ts = {rng.randint(0, 10)}")
        for name, (_, plain, params) in VIEWS.items():
            values = [rng.randint(0, 3) if p == "acc" else rng.choice((rng.randint(-1, 11), rng.randint(0, 9) + 0.5))
                      for p in params]
            where = " AND ".join(f"{p} = ?" for p in params)
            got = Counter(s.execute(f"SELECT * FROM {name} WHERE {where}", values).fetchall())
            want = Counter(s.execute(plain, values).fetchall())
            assert got == want, (name, step, values)
            checked += 1
            nonempty += bool(got)
    assert checked == 90 and nonempty > 30
    # the rest of a reading query is DuckDB's, and an empty interval is empty
    assert s.execute("SELECT count(*) FROM span WHERE lo = 5 AND hi = 4").fetchall() == [(0,)]
    got = s.execute("SELECT sum(r.ts) FROM span r WHERE r.lo = 2 AND r.hi = 6 AND r.id > 10").fetchall()
    assert got == s.execute("SELECT sum(ts) FROM trans WHERE ts BETWEEN 2 AND 6 AND id > 10").fetchall()
