"""``any_session``: the same test against a DuckDB session and a PostgreSQL session (a fresh
database of the test cluster, marked ``postgres``), so application code is checked to run
unchanged on both backends."""

from __future__ import annotations

import pytest

import ivm_layer


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_session(request, tmp_path):
    """A fresh, empty session on each backend; closed (PostgreSQL: views dropped) afterwards."""
    if request.param == "duckdb":
        s = ivm_layer.connect()
        yield s
        s.close()
        return
    url = request.getfixturevalue("pg_url")
    s = ivm_layer.connect(url, state_dir=str(tmp_path / "state"), set_replica_identity=True)
    yield s
    if not s.closed:
        s.close(drop=True)
