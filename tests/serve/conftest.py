"""Fixtures for ``ivm serve`` tests: ``served`` (module scope) serves a fresh DuckDB file;
``any_served`` does that and then runs the same tests in proxy mode in front of the test
PostgreSQL. Tests that need their own server (kill -9, auth, TLS) build a
:class:`serve_process.ServeProcess` themselves. Clients are the real ones: psql, pgbench,
psycopg, asyncpg, node-postgres, the JDBC driver, SQLAlchemy."""

from __future__ import annotations

import pytest
from serve_process import ServeProcess


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A running ``ivm serve`` over a fresh DuckDB file (one per test module)."""
    d = tmp_path_factory.mktemp("serve")
    with ServeProcess(str(d / "shop.duckdb"), log=d / "serve.log") as s:
        s.mode = "duckdb"
        yield s


@pytest.fixture(scope="module", params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_served(request, tmp_path_factory):
    """``ivm serve`` on a DuckDB file, then in proxy mode in front of a fresh database of the
    test PostgreSQL (tables made with ``REPLICA IDENTITY FULL`` by ``--set-replica-identity``)."""
    d = tmp_path_factory.mktemp("serve")
    if request.param == "duckdb":
        target, args = str(d / "shop.duckdb"), []
    else:
        cluster = request.getfixturevalue("pg_cluster")
        target = cluster.create_database("serve")
        args = ["--set-replica-identity", "--state-dir", str(d / "state")]
    with ServeProcess(target, *args, log=d / "serve.log") as s:
        s.mode = request.param
        s.upstream = target if request.param == "postgres" else None
        yield s
