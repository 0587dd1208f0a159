"""Fault suite, names (issue 29 case 11): quoted upper-case, non-ASCII and mixed-case names of
tables, views and columns are kept as each backend keeps them (DuckDB: case-insensitive in ASCII
only; PostgreSQL: quoted names exact, unquoted ones folded), so a view reads back under the name
it was given. Each test writes through the session and checks the view against the backend's own
SELECT of its definition (the oracle)."""

from __future__ import annotations

import random
from collections import Counter

import psycopg
import pytest

import ivm_layer


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _bag(rows) -> Counter:
    return Counter(tuple(r) for r in rows)


def _writes(rng: random.Random, table: str, a: str, b: str, n: int = 12) -> list[str]:
    t, ca, cb = _q(table), _q(a), _q(b)
    out = []
    for _ in range(n):
        x, y = rng.randint(0, 4), rng.choice(["NULL", str(rng.randint(-3, 9))])
        out.append(rng.choice([
            f"INSERT INTO {t} VALUES ({x}, {y}), ({x}, {y})",
            f"INSERT INTO {t} ({cb}, {ca}) VALUES ({y}, {x})",
            f"UPDATE {t} SET {cb} = {cb} + 1 WHERE {ca} = {x}",
            f"DELETE FROM {t} WHERE {ca} = {x}",
        ]))
    return out


@pytest.mark.parametrize("table, view", [("Ünï", "TÀB"), ("TÀB", "MixÉd"), ("MixÉd", "Ünï")])
def test_case11_duckdb_quoted_non_ascii_names_read_back(table, view):
    """Quoted upper-case non-ASCII table, view and column names on DuckDB: tracked, maintained
    under insert/update/delete, and read back (quoted, as given) equal to DuckDB's SELECT."""
    rng = random.Random(11)
    s = ivm_layer.connect()
    a, b = "Ab", "cD"
    s.execute(f"CREATE TABLE {_q(table)} ({_q(a)} INT, {_q(b)} INT)")
    s.execute(f"INSERT INTO {_q(table)} VALUES (1, 2), (2, NULL)")
    defs = {
        view: f'SELECT {_q(a)}, {_q(b)} AS "Vâl" FROM {_q(table)} WHERE {_q(b)} IS NOT NULL',
        view + "Σ": f'SELECT {_q(a)}, count(*) AS "Nø", sum({_q(b)}) AS "Sûm" FROM {_q(table)} GROUP BY {_q(a)}',
        "MÄT": f"SELECT t1.{_q(a)}, t2.{_q(b)} FROM {_q(table)} t1 JOIN {_q(table)} t2 ON t1.{_q(a)} = t2.{_q(a)}",
    }
    for name, sql in defs.items():
        kind = "MATERIALIZED " if name == "MÄT" else ""
        s.execute(f"CREATE INCREMENTAL {kind}VIEW {_q(name)} AS {sql}")
    for stmt in _writes(rng, table, a, b):
        s.execute(stmt)
        for name, sql in defs.items():
            want = _bag(s.connection.execute(sql).fetchall())
            assert _bag(s.execute(f"SELECT * FROM {_q(name)}").fetchall()) == want, (name, stmt)
        got = Counter({r: k for r, k in s.view(view).rows()})
        assert got == _bag(s.connection.execute(defs[view]).fetchall())
    listed = {r[0] for r in s.connection.execute("SELECT view_name FROM duckdb_views() "
                                                 "UNION ALL SELECT table_name FROM duckdb_tables()").fetchall()}
    assert {n.lower() for n in defs} <= {n.lower() for n in listed}   # DuckDB finds each by its name
    assert {v.lower() for v in s.views} == {n.lower() for n in defs}
    s.execute(f"DROP VIEW {_q(view)}")
    assert view.lower() not in {v.lower() for v in s.views}
    s.close()


def test_case11_duckdb_a_quoted_name_differs_only_beyond_ascii():
    """``"TÀB"`` and ``"tàb"`` are two tables to DuckDB (its case-insensitivity is ASCII only):
    views over each stay apart."""
    s = ivm_layer.connect()
    s.execute('CREATE TABLE "TÀB" (x INT)')
    s.execute('CREATE TABLE "tàb" (x INT)')
    s.execute('CREATE INCREMENTAL VIEW "VÀ" AS SELECT x FROM "TÀB"')
    s.execute('CREATE INCREMENTAL VIEW "và" AS SELECT x FROM "tàb"')
    s.execute('INSERT INTO "TÀB" VALUES (1)')
    s.execute('INSERT INTO "tàb" VALUES (2), (3)')
    s.execute('DELETE FROM tÀb WHERE x = 1')
    s.execute('INSERT INTO "TÀb" VALUES (4)')      # "TÀb" is "TÀB" to DuckDB (ASCII b/B)
    assert s.execute('SELECT * FROM "VÀ"').fetchall() == [(4,)]
    assert sorted(s.execute('SELECT * FROM "và"').fetchall()) == [(2,), (3,)]
    assert sorted(r for r, _ in s.view("và").rows()) == [(2,), (3,)]
    s.close()


def test_case11_unquoted_names_stay_case_insensitive():
    """Regression: unquoted names in any case name the same table, view and columns."""
    s = ivm_layer.connect()
    s.execute("CREATE TABLE R (A INT, b INT)")
    s.execute("CREATE INCREMENTAL VIEW V AS SELECT a, SUM(B) AS S FROM r GROUP BY A")
    s.execute("INSERT INTO r VALUES (1, 2), (1, 3)")
    s.execute("UPDATE R SET B = 10 WHERE a = 1 AND b = 2")
    s.execute('INSERT INTO "R" VALUES (2, 5)')
    want = _bag(s.connection.execute("SELECT a, SUM(b) FROM r GROUP BY a").fetchall())
    for read in ("SELECT * FROM v", "SELECT * FROM V", 'SELECT * FROM "V"', "SELECT a, s FROM v"):
        assert _bag(s.execute(read).fetchall()) == want, read
    assert Counter(dict(s.view("v").rows())) == want == Counter(dict(s.view("V").rows()))
    s.close()


def test_case11_postgres_quoted_mixed_case_names(pg_url, tmp_path):
    """PostgreSQL keeps quoted names exactly: ``"MixedCase"`` and ``mixedcase`` are two tables,
    ``"MixedView"`` and ``mixedview`` two views; each is maintained from its own table under
    writes through the session and reads back (quoted) equal to PostgreSQL's SELECT."""
    rng = random.Random(29)
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute('CREATE TABLE "MixedCase" ("Id" int, "Val" int)')
        c.execute("CREATE TABLE mixedcase (id int, val int)")
        c.execute('INSERT INTO "MixedCase" VALUES (1, 10), (2, 20)')
        c.execute("INSERT INTO mixedcase VALUES (7, 70)")
    defs = {
        "MixedView": 'SELECT "Id", "Val" AS "Vâl" FROM "MixedCase"',
        "mixedview": "SELECT id, val FROM MixedCase",
        "Ünï": 'SELECT "Id", count(*) AS "N", sum("Val") AS "Sum" FROM "MixedCase" GROUP BY "Id"',
        "MatView": 'SELECT m."Id", x.val FROM "MixedCase" m JOIN mixedcase x ON m."Id" = x.id',
    }
    s = ivm_layer.connect(pg_url, state_dir=str(tmp_path / "state"), set_replica_identity=True)
    try:
        for name, sql in defs.items():
            kind = "MATERIALIZED " if name == "MatView" else ""
            s.execute(f"CREATE INCREMENTAL {kind}VIEW {_q(name)} AS {sql}")
        with psycopg.connect(pg_url, autocommit=True) as oracle:
            writes = _writes(rng, "MixedCase", "Id", "Val", 8) + _writes(rng, "mixedcase", "id", "val", 6)
            for stmt in writes:
                s.execute(stmt)
                s.sync()
                for name, sql in defs.items():
                    want = _bag(oracle.execute(sql).fetchall())
                    assert _bag(s.execute(f"SELECT * FROM {_q(name)}").fetchall()) == want, (name, stmt)
                assert Counter(dict(s.view("MixedView").rows())) == _bag(oracle.execute(defs["MixedView"]).fetchall())
            names = {r[0] for r in oracle.execute("SELECT relname FROM pg_class WHERE relkind IN ('v', 'r', 'm')")}
            assert "MatView" in names and "matview" not in names    # the materialized view's table
            cols = [d[0] for d in s.execute('SELECT * FROM "MixedView" LIMIT 0').description]
            assert cols == ["Id", "Vâl"]
            assert [d[0] for d in s.execute('SELECT * FROM "MatView" LIMIT 0').description] == ["Id", "val"]
        assert {"MixedView", "mixedview", "Ünï", "MatView"} <= set(s.views)
        s.close()            # the catalog rows keep the exact names: the views come back under them
        s = ivm_layer.connect(pg_url, state_dir=str(tmp_path / "state"), set_replica_identity=True)
        s.execute('INSERT INTO "MixedCase" VALUES (3, 30)')
        s.execute("DELETE FROM mixedcase WHERE id = 7")
        s.sync()
        assert {"MixedView", "mixedview", "Ünï", "MatView"} <= set(s.views)
        with psycopg.connect(pg_url, autocommit=True) as oracle:
            for name, sql in defs.items():
                assert _bag(s.execute(f"SELECT * FROM {_q(name)}").fetchall()) == _bag(oracle.execute(sql).fetchall())
    finally:
        s.close(drop=True)


def test_case11_duckdb_static_tables_and_parameters_under_quoted_names():
    """A static table, a parameterized view and its input named with quoted non-ASCII /
    mixed-case names: the static option, the lookup and the engine's table keys find them."""
    s = ivm_layer.connect()
    s.execute('CREATE TABLE "DÏM" ("Nk" INT, "Nämé" VARCHAR)')
    s.execute('CREATE TABLE "FÄKT" ("Id" INT, "Nk" INT, "Acc" INT)')
    s.execute("""INSERT INTO "DÏM" VALUES (1, 'FR'), (2, 'DE')""")
    s.execute('INSERT INTO "FÄKT" SELECT i, i % 3, i % 4 FROM range(30) t(i)')
    static_sql = 'SELECT f."Id", d."Nämé" FROM "FÄKT" f JOIN "DÏM" d ON f."Nk" = d."Nk"'
    s.execute(f"""CREATE INCREMENTAL VIEW "StÄt" WITH (static = '"DÏM"') AS {static_sql}""")
    s.execute('CREATE INCREMENTAL VIEW "PärV" AS SELECT f."Id", f."Nk" FROM "FÄKT" f WHERE f."Acc" = $Acc')
    rng = random.Random(5)
    for step in range(10):
        if step % 4 == 3:
            s.execute(f"""INSERT INTO "DÏM" VALUES ({rng.randint(0, 3)}, 'X{step}')""")
        elif step % 2:
            s.execute(f'INSERT INTO "FÄKT" VALUES ({100 + step}, {rng.randint(0, 3)}, {rng.randint(0, 4)})')
        else:
            s.execute(f'DELETE FROM "FÄKT" WHERE "Id" % 5 = {rng.randint(0, 4)}')
        assert _bag(s.execute('SELECT * FROM "StÄt"').fetchall()) == _bag(s.connection.execute(static_sql).fetchall())
        acc = rng.randint(0, 4)
        want = _bag(s.connection.execute('SELECT "Id", "Nk" FROM "FÄKT" WHERE "Acc" = ?', [acc]).fetchall())
        assert _bag(s.execute(f'SELECT "Id", "Nk" FROM "PärV" WHERE "Acc" = {acc}').fetchall()) == want
        assert Counter(dict(s.view("PärV").lookup(Acc=acc))) == want
    assert s.info("StÄt")[0].rebuilds >= 1      # writes to the static table rebuilt the view
    s.close()
