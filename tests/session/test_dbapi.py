"""PEP 249 conformance of ``ivm_layer`` and its sessions, on DuckDB and PostgreSQL alike:
module globals, the exception hierarchy (every exception and warning in ``ivm_layer.errors``,
each with a SQLSTATE), connection and cursor behaviours, closed cursors and sessions, the
placeholder styles, ``executemany``, and how driver errors are translated."""

from __future__ import annotations

import ast
import pathlib
import pickle
import warnings

import pytest

import ivm_layer
from ivm_layer import errors

PACKAGE = pathlib.Path(ivm_layer.__file__).parent
PEP249 = ["Warning", "Error", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
          "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError"]


# -- the module -----------------------------------------------------------------------------------
def test_module_globals():
    assert ivm_layer.apilevel == "2.0"
    assert ivm_layer.threadsafety == 1
    assert ivm_layer.paramstyle in ("qmark", "numeric", "named", "format", "pyformat")
    assert callable(ivm_layer.connect)


def test_exception_hierarchy_is_pep_249_with_ivmerror_under_error():
    E = errors
    for name in PEP249:
        assert getattr(ivm_layer, name) is getattr(E, name)
    assert issubclass(E.Warning, Exception) and issubclass(E.Error, Exception)
    assert not issubclass(E.Warning, E.Error)
    assert issubclass(E.IVMError, E.Error)
    for name in ("InterfaceError", "DatabaseError"):
        assert issubclass(getattr(E, name), E.Error) and issubclass(getattr(E, name), E.IVMError)
    for name in ("DataError", "OperationalError", "IntegrityError", "InternalError", "ProgrammingError",
                 "NotSupportedError"):
        assert issubclass(getattr(E, name), E.DatabaseError)
    assert issubclass(E.SQLError, E.ProgrammingError)
    assert issubclass(E.UnsupportedSQLError, E.SQLError) and issubclass(E.UnsupportedSQLError, E.NotSupportedError)
    assert issubclass(E.CyclicQueryError, E.NotSupportedError)
    assert issubclass(E.UpdateError, E.DataError)
    assert issubclass(E.ConnectionLost, E.ConnectionLostError) and issubclass(E.ConnectionLostError, E.OperationalError)
    assert issubclass(E.PrivilegeError, E.ProgrammingError)
    for w in (E.SubscriberWarning, E.CatalogWarning, E.ViewStoppedWarning, E.LagWarning):
        assert issubclass(w, E.Warning) and issubclass(w, UserWarning)
    with pytest.warns(E.LagWarning):
        warnings.warn(E.LagWarning("lag"), stacklevel=1)


def _exception_classes(module) -> list[type]:
    return [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, BaseException)
            and v.__module__ == module.__name__]


def test_every_error_has_a_sqlstate_and_survives_pickling():
    classes = _exception_classes(errors)
    assert len(classes) >= 38
    for cls in classes:
        if cls in (errors.Error, errors.IVMError, errors.DatabaseError, errors.PostgresError):
            continue                          # bare bases: the instance carries the code
        assert isinstance(cls.sqlstate, str) and len(cls.sqlstate) == 5, cls
    e = errors.SQLError("bad", sqlstate="42P01")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is errors.SQLError and back.sqlstate == "42P01" and str(back) == "bad"
    c = pickle.loads(pickle.dumps(errors.CyclicQueryError("cyclic", ("r", "s"))))
    assert c.atoms == ("r", "s") and c.sqlstate == "0A000"


def test_every_exception_class_of_the_package_is_defined_in_errors():
    """A scan of the source: no module but errors.py defines an exception or warning class,
    except the shell's and the replication reader's control-flow signals and the benchmark
    harness's internal ones (never raised to a user)."""
    allowed = {("shell/meta.py", "QuitShell"), ("io/postgres/feed.py", "_Release"),
               ("bench/naive.py", "NaiveTimeout"), ("bench/naive.py", "NaiveTooLarge"),
               ("bench/peers.py", "PeerUnsupported"), ("bench/naive_sql.py", "NaiveError"),
               # ivm serve's internal signals: each becomes an ErrorResponse or a closed connection
               ("serve/codec.py", "ProtocolViolation"), ("serve/protocol.py", "Disconnected"),
               ("serve/pgtypes.py", "ParamError"), ("serve/gate.py", "GateTimeout"),
               ("serve/outbox.py", "ClientGone"),
               # the update-code generator's "not this plan": the interpreter runs it (update_paths says so)
               ("engine/updgen.py", "NotCompiled")}
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith(("Error", "Exception", "Warning", "Lost")) for b in bases):
                    found.append((rel, node.name))
    assert sorted(set(found) - allowed) == []


def test_old_import_paths_still_work():
    from ivm_layer.daemon.config import ConfigError
    from ivm_layer.daemon.sinks import SinkError
    from ivm_layer.io.postgres.conninfo import ConnectionTargetError, PostgresError
    from ivm_layer.maintain.checkpoint import CheckpointError
    from ivm_layer.session.core import SubscriberWarning
    from ivm_layer.session.duckdb.session import CatalogWarning, SourceGoneError  # re-exported there too
    from ivm_layer.session.postgres.session import (
        CatalogError,
        LagWarning,
        ReplicationError,
        ViewStoppedError,
        ViewStoppedWarning,
    )
    from ivm_layer.shell.meta import ShellError

    for cls in (ConfigError, SinkError, ConnectionTargetError, PostgresError, CheckpointError, SubscriberWarning,
                CatalogWarning, SourceGoneError, CatalogError, LagWarning, ReplicationError, ViewStoppedError,
                ViewStoppedWarning, ShellError):
        assert getattr(errors, cls.__name__) is cls


def test_duckdb_exceptions_map_to_pep_249_classes():
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER NOT NULL)")
    con.execute("INSERT INTO t VALUES (1, 1)")
    cases = {
        "INSERT INTO t VALUES (1, 2)": (errors.IntegrityError, "23505"),
        "INSERT INTO t VALUES (2, NULL)": (errors.IntegrityError, "23502"),
        "SELEC 1": (errors.SQLError, "42601"),
        "SELECT * FROM nope": (errors.SQLError, "42P01"),
        "SELECT nope FROM t": (errors.SQLError, "42703"),
        "CREATE TABLE t (a INTEGER)": (errors.SQLError, "42P07"),
        "SELECT 'x'::INTEGER": (errors.DataError, "22018"),
        "SELECT 2147483647::INTEGER + 1": (errors.DataError, "22003"),
    }
    for sql, (cls, state) in cases.items():
        with pytest.raises(duckdb.Error) as e:
            con.execute(sql)
        err = errors.from_driver(e.value)
        assert type(err) is cls and err.sqlstate == state and err.__cause__ is e.value, sql


# -- sessions, both backends ---------------------------------------------------------------------
def test_cursor_basics(any_session):
    s = any_session
    cur = s.cursor()
    assert cur.connection is s and cur.description is None and cur.rowcount == -1 and cur.arraysize == 1
    with pytest.raises(errors.ProgrammingError):
        cur.fetchone()                        # nothing executed yet
    assert cur.execute("CREATE TABLE t (a INTEGER, b TEXT)") is cur
    assert cur.fetchall() == [] and cur.fetchone() is None   # no rows, on both backends alike
    cur.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM t")
    assert cur.description is None and cur.fetchall() == [] and cur.fetchmany(2) == []
    cur.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(5)])
    assert cur.rowcount == 5
    cur.execute("SELECT a, b FROM t ORDER BY a")
    assert len(cur.description) == 2 and all(len(d) == 7 for d in cur.description)
    assert [d[0] for d in cur.description] == ["a", "b"]
    assert cur.fetchone() == (0, "0")
    assert cur.fetchmany() == [(1, "1")]
    cur.arraysize = 2
    assert cur.fetchmany() == [(2, "2"), (3, "3")]
    assert list(cur) == [(4, "4")]
    assert cur.fetchone() is None and cur.fetchall() == [] and cur.fetchmany(3) == []
    cur.setinputsizes([None])
    cur.setoutputsize(10)
    n = cur.execute("UPDATE t SET b = 'x' WHERE a < ?", [3]).rowcount
    assert n == 3
    assert s.execute("SELECT count(*) FROM t WHERE b = $1", ["x"]).fetchone() == (3,)
    assert s.execute("SELECT count(*) FROM t WHERE a >= $lo AND a < $hi", {"lo": 1, "hi": 4}).fetchone() == (3,)
    with pytest.raises(errors.ProgrammingError):
        s.execute("SELECT ? , ?", [1])        # too few parameters
    with cur:
        pass
    assert cur.closed


def test_closed_cursor_and_closed_session_raise(any_session):
    s = any_session
    s.execute("CREATE TABLE t (a INTEGER)")
    s.execute("INSERT INTO t VALUES (1), (2)")
    cur = s.execute("SELECT a FROM t")
    cur.close()
    for call in (cur.fetchone, cur.fetchall, lambda: cur.fetchmany(1), lambda: cur.execute("SELECT 1"),
                 lambda: cur.executemany("SELECT ?", [[1]]), cur.df, cur.arrow, lambda: next(iter(cur))):
        with pytest.raises(errors.InterfaceError):
            call()
    cur.close()                               # closing twice is allowed
    open_cur = s.execute("SELECT a FROM t")
    s.close()
    assert s.closed
    for call in (lambda: s.execute("SELECT 1"), s.cursor, s.commit, s.rollback, open_cur.fetchall,
                 lambda: open_cur.execute("SELECT 1"), lambda: s.executemany("SELECT ?", [[1]])):
        with pytest.raises(errors.InterfaceError) as e:
            call()
        assert e.value.sqlstate in ("08003", "24000")
    s.close()                                 # closing twice is allowed


def test_session_is_a_context_manager_and_commit_rollback_follow_begin(any_session, tmp_path):
    s = any_session
    s.execute("CREATE TABLE t (a INTEGER)")
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (1)")
    s.rollback()
    assert s.execute("SELECT count(*) FROM t").fetchone() == (0,)
    s.execute("BEGIN")
    s.execute("INSERT INTO t VALUES (1)")
    s.commit()
    assert s.execute("SELECT count(*) FROM t").fetchone() == (1,)
    with s as same:
        assert same is s
    assert s.closed


def test_executemany_is_one_transaction_and_feeds_the_views(any_session):
    s = any_session
    s.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER)")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM t WHERE b > 0")
    rows = [(i, i % 3) for i in range(2000)]
    cur = s.executemany("INSERT INTO t VALUES (?, ?)", rows)
    assert cur.rowcount == 2000
    assert sorted(s.execute("SELECT * FROM v").fetchall()) == sorted(r for r in rows if r[1] > 0)
    with pytest.raises(errors.IntegrityError):   # one duplicate key: none of the rows
        s.executemany("INSERT INTO t VALUES ($1, $2)", [(5000, 1), (5001, 1), (0, 1)])
    assert s.execute("SELECT count(*) FROM t").fetchone() == (2000,)
    assert s.execute("SELECT count(*) FROM v").fetchone() == (sum(1 for r in rows if r[1] > 0),)
    s.executemany("UPDATE t SET b = ? WHERE a = ?", [(7, 1), (7, 2)])
    s.executemany("DELETE FROM t WHERE a = $a", [{"a": 3}, {"a": 4}])
    assert s.execute("SELECT b FROM v WHERE a IN (1, 2) ORDER BY a").fetchall() == [(7,), (7,)]
    assert s.execute("SELECT count(*) FROM v WHERE a IN (3, 4)").fetchone() == (0,)
    assert s.executemany("INSERT INTO t VALUES (?, ?)", []).rowcount == 0


def test_postgres_executemany_is_one_insert_statement(pg_url, tmp_path):
    """10k rows through executemany reach PostgreSQL as one INSERT (a statement-level trigger
    counts them), not 10k."""
    s = ivm_layer.connect(pg_url, state_dir=str(tmp_path), set_replica_identity=True)
    s.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    s.execute("CREATE TABLE statements (n INTEGER)")
    s.execute("CREATE FUNCTION count_statement() RETURNS trigger LANGUAGE plpgsql AS "
              "$$ BEGIN INSERT INTO statements VALUES (1); RETURN NULL; END $$")
    s.execute("CREATE TRIGGER t_count AFTER INSERT ON t FOR EACH STATEMENT EXECUTE FUNCTION count_statement()")
    s.execute("CREATE INCREMENTAL VIEW v AS SELECT a, b FROM t")
    s.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"{i}%") for i in range(10_000)])
    assert s.execute("SELECT count(*) FROM statements").fetchone() == (1,)
    assert s.execute("SELECT count(*), count(DISTINCT b) FROM v WHERE b LIKE '%\\%' ESCAPE '\\'").fetchone() \
        == (10_000, 10_000)
    s.close(drop=True)


def test_driver_errors_carry_sqlstate_and_cause(any_session):
    s = any_session
    s.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER NOT NULL)")
    s.execute("INSERT INTO t VALUES (1, 1)")
    cases = [("INSERT INTO t VALUES (1, 2)", errors.IntegrityError, "23505"),
             ("INSERT INTO t VALUES (2, NULL)", errors.IntegrityError, "23502"),
             ("SELEC 1", errors.SQLError, "42601"),
             ("SELECT * FROM nope", errors.SQLError, "42P01"),
             ("SELECT nope FROM t", errors.SQLError, "42703"),
             ("SELECT CAST('x' AS INTEGER)", errors.DataError, None)]
    for sql, cls, state in cases:
        with pytest.raises(cls) as e:
            s.execute(sql)
        assert e.value.__cause__ is not None and type(e.value.__cause__).__module__.split(".")[0] in (
            "duckdb", "_duckdb", "psycopg"), sql
        if state is not None:
            assert e.value.sqlstate == state, (sql, e.value.sqlstate)
        assert isinstance(e.value, errors.IVMError)
    assert s.execute("SELECT count(*) FROM t").fetchone() == (1,)



def test_layer_errors_are_pep_249_classes_with_sqlstate(any_session):
    """The layer's own refusals are specific PEP 249 classes with a SQLSTATE, not bare IVMErrors."""
    s = any_session
    s.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    with pytest.raises(errors.CatalogError, match="no incremental view named 'nope'") as e:
        s.view("nope")
    assert isinstance(e.value, errors.ProgrammingError) and e.value.sqlstate == "42P01"
    for sql, state in [("CREATE INCREMENTAL VIEW w AS SELECT a, nope FROM t", "42703"),
                       ("CREATE INCREMENTAL VIEW w AS SELECT a FROM nope", "42P01"),
                       ("CREATE INCREMENTAL VIEW w AS SELECT x.a FROM t", "42P01")]:
        with pytest.raises(errors.SQLError) as e:      # PostgreSQL's codes for the same mistakes
            s.execute(sql)
        assert e.value.sqlstate == state, (sql, e.value.sqlstate, str(e.value))
    s.execute("CREATE INCREMENTAL VIEW w AS SELECT a FROM t")
    with pytest.raises(errors.SQLError) as e:
        s.execute("CREATE INCREMENTAL VIEW w AS SELECT a FROM t")
    assert e.value.sqlstate == "42P07"
    assert list(s.views) == ["w"]


def test_placeholders_for_psycopg():
    from ivm_layer.session.placeholders import find, to_psycopg

    sql = "SELECT ?, '?', \"$1\", $$ ? $$, ? -- ?\n /* $x */ FROM t WHERE a LIKE '%x' AND j ?| b"
    assert [p.key for p in find(sql)] == [0, 1]
    text, params = to_psycopg(sql, (1, 2))
    assert text == ("SELECT %s, '?', \"$1\", $$ ? $$, %s -- ?\n /* $x */ FROM t WHERE a LIKE '%%x' AND j ?| b")
    assert params == [1, 2]
    assert to_psycopg("SELECT $2, $1, $2", ["a", "b"]) == ("SELECT %s, %s, %s", ["b", "a", "b"])
    assert to_psycopg("SELECT $name, $name", {"name": 3}) == ("SELECT %(name)s, %(name)s", {"name": 3})
    assert to_psycopg("SELECT %s", (1,)) == ("SELECT %s", (1,))          # psycopg's own style: as it is
    assert to_psycopg("SELECT '%'", None) == ("SELECT '%'", None)
    with pytest.raises(errors.ProgrammingError):
        to_psycopg("SELECT $a, ?", {"a": 1})
    with pytest.raises(errors.ProgrammingError):
        to_psycopg("SELECT $a", [1])
    with pytest.raises(errors.ProgrammingError):
        to_psycopg("SELECT ?, ?", [1, 2, 3])
