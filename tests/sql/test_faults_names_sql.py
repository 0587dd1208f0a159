"""Fault suite, SQL front-end and engine (issue 29 case 11): a view compiled over tables whose
names differ only beyond ASCII case (DuckDB) or only in case when quoted (PostgreSQL) keeps them
apart, and the engine takes changes under the names the backend's catalog spells."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest

import ivm_layer
from ivm_layer.errors import SQLError


def test_case11_compiled_views_keep_names_apart_duckdb():
    """``"TÀB"`` and ``"tàb"`` are two DuckDB tables: a join of both, fed row changes under the
    catalog's spellings, equals DuckDB's own SELECT after every change."""
    con = duckdb.connect()
    con.execute('CREATE TABLE "TÀB" ("Ab" INT, "cD" INT); CREATE TABLE "tàb" ("Ab" INT, "Ëx" INT)')
    sql = 'SELECT u."Ab", u."cD", l."Ëx" FROM "TÀB" u JOIN "tàb" l ON u."Ab" = l.ab'
    schema = {t: [c for (c,) in con.execute(f"SELECT column_name FROM information_schema.columns "
                                            f"WHERE table_name = '{t}' ORDER BY ordinal_position").fetchall()]
              for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert set(schema) == {"TÀB", "tàb"}
    view = ivm_layer.compile_view(sql, schema)
    rng = random.Random(7)
    rows = {"TÀB": Counter(), "tàb": Counter()}
    for _ in range(60):
        t = rng.choice(sorted(rows))
        row = (rng.randint(0, 3), rng.randint(0, 3))
        if rows[t][row] and rng.random() < 0.4:
            view.delete(t, row)
            rows[t][row] -= 1
            second = schema[t][1]
            con.execute(f'DELETE FROM "{t}" WHERE rowid = (SELECT min(rowid) FROM "{t}" '
                        f'WHERE "Ab" = ? AND "{second}" = ?)', list(row))
        else:
            view.insert(t, row)
            rows[t][row] += 1
            con.execute(f'INSERT INTO "{t}" VALUES (?, ?)', list(row))
        assert Counter({r: k for r, k in view.rows()}) == Counter(con.execute(sql).fetchall())


def test_case11_compiled_views_keep_quoted_names_exact_postgres():
    """PostgreSQL: ``"MixedCase"`` and unquoted ``MixedCase`` (that is, ``mixedcase``) are two
    tables; a quoted name that does not exist exactly is an unknown table, not another's."""
    schema = {"MixedCase": ["Id"], "mixedcase": ["id"]}
    v = ivm_layer.compile_view('SELECT m."Id", x.id FROM "MixedCase" m JOIN MixedCase x ON m."Id" = x.id',
                               schema, "postgres")
    assert sorted(v.tables) == ["MixedCase", "mixedcase"]
    assert v.diff({"MixedCase": [((1,), 1)], "mixedcase": [((1,), 1), ((2,), 1)]}) == [((1, 1), 1)]
    with pytest.raises(SQLError, match="unknown table"):
        ivm_layer.compile_view('SELECT "Id" FROM "MIXEDCASE"', schema, "postgres")
    with pytest.raises(SQLError, match="unknown column 'id'"):
        ivm_layer.compile_view('SELECT "id" FROM "MixedCase"', schema, "postgres")
