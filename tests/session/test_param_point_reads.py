"""Parameterized views read through SQL in DuckDB and PostgreSQL sessions (issue 28 item 6).

Randomized differential tests: after every write of an insert/update/delete stream (NULLs,
duplicates), each view is read with random inputs (absent keys, NULL, a string for an integer
input) through the engine's point reads (``SELECT … FROM v WHERE a = ?``, literals, a column
list, ``count(*)``, ``LIMIT``) and through the general path (extra predicates, ORDER BY,
aggregates over the view), and compared with the backend's own SELECT of the definition with the
inputs substituted. The point reads must give exactly what the general path gives (rows,
description, rowcount) and must not run the general path after a shape's first read."""

from __future__ import annotations

import random
from collections import Counter

import pytest

import ivm_layer
from ivm_layer.errors import DataError, ProgrammingError, SQLError
from ivm_layer.session.postgres import lookups as pg_lookups
from ivm_layer.session.postgres import session as pg_session_module

VIEWS = {
    "j": ("SELECT r.b, r.c, s.d FROM r JOIN s ON r.b = s.b WHERE r.a = $a", ("a",)),
    "g": ("SELECT r.b, count(*) AS n, sum(r.c) AS total FROM r WHERE r.a = $a GROUP BY r.b", ("a",)),
    "h": ("SELECT 1 AS hit FROM r JOIN s ON r.b = s.b WHERE r.a = $a AND s.d = $d", ("a", "d")),
    "p": ("SELECT r.c, r.b FROM r WHERE r.a = $1 AND r.b = $2", ("p1", "p2")),
    "rg": ("SELECT r.b, r.c FROM r WHERE r.a = $a AND r.c > $since", ("a", "since")),
}


def oracle_sql(name: str) -> str:
    """The definition with its inputs as positional parameters, in input order."""
    sql, inputs = VIEWS[name]
    for i, p in enumerate(inputs):
        if not p.startswith("p"):
            sql = sql.replace(f"${p}", f"${i + 1}")
    return sql


def bag(rows) -> Counter:
    return Counter(tuple(r) for r in rows)


class GeneralPath:
    """Counts the reads that went through the general path (a delegating wrapper)."""

    def __init__(self, monkeypatch, session):
        self.calls = 0
        if isinstance(session, pg_session_module.PostgresSession):
            real = pg_lookups.lookup_read

            def counted(*a, **k):
                self.calls += 1
                return real(*a, **k)

            monkeypatch.setattr(pg_lookups, "lookup_read", counted)
        else:
            served = session._served
            real = served.lookup_read

            def counted(*a, **k):
                self.calls += 1
                return real(*a, **k)

            monkeypatch.setattr(served, "lookup_read", counted)


def _session(backend: str, request, tmp_path):
    if backend == "duckdb":
        return ivm_layer.connect()
    url = request.getfixturevalue("pg_url")
    return ivm_layer.connect(url, state_dir=tmp_path / "state", set_replica_identity=True)


def _check_reads(s, rng: random.Random, general: GeneralPath, step: int) -> int:
    checked = 0
    for name, (_, inputs) in VIEWS.items():
        values = []
        for p in inputs:
            x = rng.choice([0, 1, 2, 3, 3, -1, None]) if p != "since" else rng.choice([0, 5, 10, 12, None])
            values.append(x)
        want = bag(s.execute(oracle_sql(name), values).fetchall())
        where = " AND ".join(f"{p} = ?" for p in inputs)
        shuffled = list(zip(inputs, values))
        rng.shuffle(shuffled)                 # the inputs in any order
        where_any = " AND ".join(f"{p} = ?" for p, _ in shuffled)
        cols = s.execute(f"SELECT * FROM {name} WHERE {where}", values).description
        first = cols[0][0]

        before = general.calls
        fast = s.execute(f"SELECT * FROM {name} WHERE {where_any}", [v for _, v in shuffled])
        assert bag(fast.fetchall()) == want, (name, values, step)
        as_text = [str(v) if isinstance(v, int) and v >= 0 and rng.random() < 0.3 else v for v in values]
        assert bag(s.execute(f"SELECT * FROM {name} WHERE {where}", as_text).fetchall()) == want
        lits = " AND ".join(f"{p} = {'NULL' if v is None else v}" for p, v in zip(inputs, values))
        assert bag(s.execute(f"SELECT * FROM {name} WHERE {lits}").fetchall()) == want
        got = s.execute(f"SELECT {first} FROM {name} WHERE {where}", values).fetchall()
        assert bag(got) == Counter({(r[0],): 0 for r in want}) + Counter((r[0],) for r in
                                                                         _expand(want)), (name, values)
        got = s.execute(f"SELECT count(*) FROM {name} WHERE {where}", values).fetchall()
        assert got == [(sum(want.values()),)]
        got = s.execute(f"SELECT * FROM {name} WHERE {where} LIMIT 1", values).fetchall()
        assert len(got) == min(1, sum(want.values())) and all(want[tuple(r)] for r in got)
        if step:              # every shape above ran before: the engine answered them all
            assert general.calls == before + (1 if None in values else 0), (name, values)

        # the general path: extra predicates, ORDER BY, aggregates over the view
        got = s.execute(f"SELECT * FROM {name} WHERE {where} AND {first} IS NOT NULL ORDER BY 1", values)
        rows = got.fetchall()
        assert bag(rows) == Counter({r: k for r, k in want.items() if r[0] is not None})
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        got = s.execute(f"SELECT count(*) FROM {name} v WHERE {' AND '.join(f'v.{p} = ?' for p in inputs)} "
                        f"AND v.{first} > 0", values).fetchall()
        assert got == [(sum(k for r, k in want.items() if r[0] is not None and r[0] > 0),)]

        # identity: a point read and the same statement through the general path
        text = f"SELECT * FROM {name} WHERE {where}"
        a = s.execute(text, values)
        b = s.execute(text + " /* general path */", values)
        assert [tuple(d)[:2] for d in a.description] == [tuple(d)[:2] for d in b.description]
        assert a.rowcount == b.rowcount
        assert bag(a.fetchall()) == bag(b.fetchall())
        checked += 1
    return checked


def _expand(want: Counter):
    for r, k in want.items():
        for _ in range(k):
            yield r


@pytest.mark.parametrize("backend", ["duckdb", "postgres"])
def test_point_reads_of_parameterized_views_match_the_backend(backend, request, tmp_path, monkeypatch):
    s = _session(backend, request, tmp_path)
    s.execute("CREATE TABLE r (a INTEGER, b INTEGER, c INTEGER)")
    s.execute("CREATE TABLE s (b INTEGER, d INTEGER)")
    s.execute("INSERT INTO r VALUES (1, 1, 10), (1, 1, 10), (2, NULL, 5), (3, 2, NULL)")
    s.execute("INSERT INTO s VALUES (1, 1), (2, 1), (2, 3), (NULL, 1)")
    for name, (sql, _) in VIEWS.items():
        s.execute(f"CREATE INCREMENTAL VIEW {name} AS {sql}")
    general = GeneralPath(monkeypatch, s)
    rng = random.Random(6)

    def val():
        return "NULL" if rng.random() < 0.15 else str(rng.randint(0, 3))

    checked = 0
    for step in range(10):
        if step:
            kind = step % 4
            if kind == 0:
                row = f"({val()}, {val()}, {val()})"
                s.execute(f"INSERT INTO r VALUES {row}, {row}")          # duplicates
            elif kind == 1:
                s.execute(f"INSERT INTO s VALUES ({val()}, {val()}), ({val()}, {val()})")
            elif kind == 2:
                s.execute(f"UPDATE r SET c = c + 1, a = {val()} WHERE b = {rng.randint(0, 3)}")
            else:
                s.execute(f"DELETE FROM r WHERE a = {rng.randint(0, 3)} AND c > {rng.randint(0, 10)}")
        checked += _check_reads(s, rng, general, step)
    assert checked == 10 * len(VIEWS)
    # inside a transaction block the reads see the block's own writes, and not after ROLLBACK
    reads = (("j", [3]), ("h", [3, 7]), ("g", [3]), ("rg", [3, 50]))
    before = {name: bag(s.execute(oracle_sql(name), inputs).fetchall()) for name, inputs in reads}
    s.execute("BEGIN")
    s.execute("INSERT INTO r VALUES (3, 1, 99), (3, 1, 99)")
    s.execute("INSERT INTO s VALUES (1, 7)")
    for name, inputs in reads:
        want = bag(s.execute(oracle_sql(name), inputs).fetchall())
        assert want != before[name], name          # the block's writes change every answer
        where = " AND ".join(f"{p} = ?" for p in VIEWS[name][1])
        assert bag(s.execute(f"SELECT * FROM {name} WHERE {where}", inputs).fetchall()) == want, name
        assert bag(s.execute(f"SELECT * FROM {name} WHERE {where} ORDER BY 1", inputs).fetchall()) == want
    assert s.execute("SELECT * FROM h WHERE a = 3 AND d = 7").fetchall() == [(1,), (1,)]
    s.execute("ROLLBACK")
    assert s.execute("SELECT * FROM h WHERE a = 3 AND d = 7").fetchall() == []
    assert 99 not in [r[1] for r in s.execute("SELECT * FROM j WHERE a = ?", [3]).fetchall()]
    assert bag(s.execute("SELECT * FROM g WHERE a = ?", [3]).fetchall()) == before["g"]
    if backend == "postgres":
        assert "CQAP0" in s.explain("j")
        s.close()
        s = _session(backend, request, tmp_path)           # resumed from its checkpoint
        want = bag(s.execute(oracle_sql("j"), [1]).fetchall())
        assert bag(s.execute("SELECT * FROM j WHERE a = ?", [1]).fetchall()) == want
    s.execute("DROP VIEW j")
    with pytest.raises(ProgrammingError):
        s.execute("SELECT * FROM j WHERE a = 1")
    s.close()


@pytest.mark.parametrize("backend", ["duckdb", "postgres"])
def test_parameter_errors_in_the_users_terms(backend, request, tmp_path):
    s = _session(backend, request, tmp_path)
    s.execute("CREATE TABLE t (acc INTEGER, name VARCHAR, day DATE, amount INTEGER)")
    s.execute("INSERT INTO t VALUES (1, 'x', DATE '2024-01-02', 5), (1, 'y', DATE '2024-01-03', 6)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT t.amount FROM t WHERE t.acc = $acc AND t.name = $who")
    s.execute("CREATE INCREMENTAL VIEW d AS SELECT t.amount FROM t WHERE t.day = $day")
    for _ in range(2):                          # the first run (general path) and the point read
        with pytest.raises(SQLError, match="who") as e:
            s.execute("SELECT * FROM v WHERE acc = ?", [1])
        assert e.value.sqlstate == "42P02"
        with pytest.raises(ProgrammingError, match="takes 2 parameter") as e:
            s.execute("SELECT * FROM v WHERE acc = ? AND who = ?", [1, "x", 3])
        assert e.value.sqlstate == "42P02"
        with pytest.raises(ProgrammingError, match="takes 2 parameter"):
            s.execute("SELECT * FROM v WHERE acc = ? AND who = ?", [1])
        with pytest.raises(DataError, match="input acc of incremental view 'v'") as e:
            s.execute("SELECT * FROM v WHERE acc = ? AND who = ?", ["one", "x"])
        assert e.value.sqlstate.startswith("22")
        with pytest.raises(ProgrammingError, match="input who of incremental view 'v'") as e:
            s.execute("SELECT * FROM v WHERE acc = ? AND who = ?", [1, 7])
        assert e.value.sqlstate == "42883"
        assert s.execute("SELECT * FROM v WHERE acc = ? AND who = ?", ["1", "x"]).fetchall() == [(5,)]
        # a date input given as text, a date, or a timestamp at midnight
        import datetime as dt

        for day in ("2024-01-03", dt.date(2024, 1, 3), dt.datetime(2024, 1, 3)):
            assert s.execute("SELECT * FROM d WHERE day = ?", [day]).fetchall() == [(6,)]
        assert s.execute("SELECT * FROM d WHERE day = ?", [dt.datetime(2024, 1, 3, 1)]).fetchall() == []
    with pytest.raises(ProgrammingError, match="SELECT"):
        s.execute("INSERT INTO t SELECT * FROM v WHERE acc = 1 AND who = 'x'")
    with pytest.raises(SQLError, match="MATERIALIZED"):
        s.execute("CREATE INCREMENTAL MATERIALIZED VIEW m AS SELECT t.amount FROM t WHERE t.acc = $acc")
    s.close()
