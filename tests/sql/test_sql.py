"""The SQL subset accepted by compile_view, and its errors."""

import pytest

import ivm_layer
from ivm_layer.errors import CyclicQueryError, SQLError, UnsupportedSQLError
from ivm_layer.sql import translate_select

SCHEMA = {"r": ["a", "b"], "s": ["b", "c"], "trans": {"id": "INT", "acc": "INT", "ts": "INT", "amnt": "INT"}}


def test_equalities_become_shared_variables_and_offsets_normalize():
    q = translate_select("SELECT r.a, s.c FROM r JOIN s ON r.b = s.b WHERE 3 < r.a + 1 AND s.c <= r.a - 2", SCHEMA)
    r_atom, s_atom = q.atoms
    assert r_atom.vars[1] == s_atom.vars[0]  # r.b = s.b share one variable
    texts = {str(p) for p in q.predicates}
    assert "r.a > 2" in texts and "s.c <= r.a - 2" in texts


def test_star_and_table_star_and_aliases():
    q = translate_select("SELECT x.*, y.c AS cc FROM r x, s y WHERE x.b = y.b", SCHEMA)
    assert q.columns == ["a", "b", "cc"]
    q = translate_select("SELECT * FROM r, s", SCHEMA)
    assert q.columns == ["a", "b", "b", "c"]


@pytest.mark.parametrize("sql, fragment", [
    ("SELECT r.a FROM r LEFT JOIN s ON r.a < s.c LEFT JOIN s s2 ON r.b = s2.b",
     "LEFT JOIN condition between the two sides that is not an equality"),
    ("SELECT r.a FROM r LEFT JOIN (SELECT b, c FROM s UNION SELECT b, c FROM s) x ON r.b = x.b", "set operation in FROM"),
    ("SELECT r.a FROM r WHERE r.a IN (SELECT b FROM s WHERE s.c = r.b)", "correlated IN"),
    ("SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.c < r.b)", "inside EXISTS other than"),
    ("SELECT r.a FROM r WHERE r.a = 1 OR EXISTS (SELECT 1 FROM s)", "subquery inside OR"),
    ("SELECT r.a FROM r WHERE r.a < now()", "non-deterministic function now()"),
    ("SELECT r.a FROM r WHERE r.a < random()", "non-deterministic function"),
    ("SELECT r.a FROM r, s WHERE r.a < s.c + INTERVAL '1 month'", "interval unit 'month'"),
    ("SELECT ntile(2) OVER (ORDER BY r.a) FROM r", "window function NTILE"),
    ("SELECT stddev(r.a) FROM r", "aggregate function stddev"),
    # named as the user may have spelled it, not as sqlglot rewrites it (group_concat/LISTAGG)
    ("SELECT r.a, string_agg(r.b, ',') FROM r GROUP BY r.a", "aggregate function string_agg() (also spelled group_concat"),
    ("SELECT r.a FROM r, s WHERE r.b = s.b AND r.a > (SELECT max(c) FROM s)", "subquery inside OR/NOT/an expression"),
    ("SELECT r.a, count(*) FROM r GROUP BY ROLLUP (r.a)", "rollup"),
    ("SELECT DISTINCT ON (r.a) r.a FROM r", "DISTINCT ON"),
    ("SELECT r.a FROM r WHERE md5(r.a) = 'x'", "function md5()"),
    ("SELECT r.a FROM r LIMIT 3", "LIMIT / OFFSET without ORDER BY"),
    ("SELECT r.a FROM r ORDER BY r.a", "ORDER BY inside an incremental view"),
    ("WITH RECURSIVE x AS (SELECT a FROM r) SELECT a FROM x", "WITH RECURSIVE"),
    ("SELECT r.a, s.c FROM r JOIN s ON r.b = s.b WHERE r.a + s.c > 2 GROUP BY r.a, s.c", "GROUP BY view"),
])
def test_unsupported_constructs_name_the_construct_and_position(sql, fragment):
    with pytest.raises(UnsupportedSQLError) as e:
        ivm_layer.compile_view(sql, SCHEMA)
    assert fragment in str(e.value)


@pytest.mark.parametrize("sql, fragment", [
    ("SELECT r.z FROM r", "no column 'z'"),
    ("SELECT q.a FROM r", "unknown table or alias 'q'"),
    ("SELECT a FROM nope", "unknown table 'nope'"),
    ("SELECT b FROM r, s", "ambiguous"),
    ("SELECT r.a FROM r, r", "duplicate table alias"),
    ("SELEC r.a FROM r", "cannot parse"),
    ("SELECT r.a FROM r JOIN s USING (z)", "must exist on both sides"),
    ("SELECT r.a FROM r GROUP BY r.a + 1", "column 'r.a' must appear in GROUP BY"),
])
def test_sql_errors(sql, fragment):
    with pytest.raises(SQLError) as e:
        ivm_layer.compile_view(sql, SCHEMA)
    assert fragment in str(e.value)


def test_postgres_flavoured_body():
    sql = "SELECT r.a, s.c FROM r JOIN s ON r.b = s.b WHERE s.c < r.a + 2 AND r.a IS NOT NULL AND s.c <> 3"
    view = ivm_layer.compile_view(sql, SCHEMA, dialect="postgres")
    view.apply({"r": [((1, 1), 1), ((5, 2), 1), ((6, 2), 1)], "s": [((1, 2), 1), ((1, 6), 1), ((2, 3), 1), ((2, 4), 1)]})
    assert dict(view.rows()) == {(1, 2): 1, (5, 4): 1, (6, 4): 1}  # s.c = 3 fails <> 3; 6 fails < r.a + 2
    view = ivm_layer.compile_view("SELECT r.a FROM r WHERE r.b::int > 3", SCHEMA, dialect="postgres")
    view.apply({"r": [((1, 4), 1), ((2, 3), 1)]})
    assert dict(view.rows()) == {(1,): 1}


def test_position_is_reported():
    with pytest.raises(UnsupportedSQLError) as e:
        ivm_layer.compile_view("SELECT r.a\nFROM r\nWHERE r.a = 1 OR r.b < now()", SCHEMA)
    assert "line 3" in str(e.value)


def test_triangle_sql_is_rejected_naming_atoms():
    schema = {"r": ["x", "y"], "s": ["y", "z"], "t": ["z", "x"]}
    with pytest.raises(CyclicQueryError) as e:
        ivm_layer.compile_view("SELECT * FROM r, s, t WHERE r.y = s.y AND s.z = t.z AND t.x = r.x", schema)
    assert set(e.value.atoms) == {"r", "s", "t"}
