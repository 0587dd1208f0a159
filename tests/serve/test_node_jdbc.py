"""node-postgres (``npm install pg``) and the PostgreSQL JDBC driver (Debian's
libpostgresql-jdbc-java on OpenJDK 17) against ``ivm serve``: after random writes of 4 other
clients both read the served views equal to their SELECT, use named prepared statements,
roll back a block, get SQLSTATEs and the catalog. The test installs what it needs: pg into a
cache folder (``.pytest_cache``, not in git), the JDBC jar with apt-get when it is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import workload

CLIENTS = Path(__file__).parent / "clients"
JDBC_JAR = Path("/usr/share/java/postgresql.jar")


@pytest.fixture(scope="module")
def db(any_served):
    workload.setup(any_served.url(), parameterized=any_served.mode == "duckdb")
    return any_served


@pytest.fixture(scope="module")
def node_modules(pytestconfig) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    cache = getattr(pytestconfig, "cache", None)     # .pytest_cache (not in git), else the temp dir
    root = Path(cache.mkdir("ivm-serve-node")) if cache is not None else Path(tempfile.gettempdir()) / "ivm-serve-node"
    if not (root / "node_modules" / "pg").exists():
        res = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(root), "pg@8"],
                             capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            pytest.skip(f"npm install pg failed (registry unreachable?): {res.stderr[-500:]}")
    return root / "node_modules"


@pytest.fixture(scope="module")
def jdbc_jar() -> Path:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    if not JDBC_JAR.exists():
        res = subprocess.run(["apt-get", "install", "-y", "-q", "libpostgresql-jdbc-java"], capture_output=True,
                             text=True, timeout=600, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if res.returncode != 0:
            upd = subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, timeout=600)
            res = subprocess.run(["apt-get", "install", "-y", "-q", "libpostgresql-jdbc-java"], capture_output=True,
                                 text=True, timeout=600, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            if res.returncode != 0:
                pytest.skip(f"apt-get could not install libpostgresql-jdbc-java (apt unreachable?): "
                            f"{upd.stderr[-300:]} {res.stderr[-300:]}")
    return JDBC_JAR


@pytest.fixture(scope="module")
def jdbc_probe(jdbc_jar, tmp_path_factory) -> list[str]:
    """``java … Probe``: Probe.java compiled once (the source launcher compiles it on every run)."""
    classes = tmp_path_factory.mktemp("jdbc")
    res = subprocess.run(["javac", "-cp", str(jdbc_jar), "-d", str(classes), str(CLIENTS / "Probe.java")],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    return ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{jdbc_jar}{os.pathsep}{classes}", "Probe"]


def _check(got: dict, want: dict, mode: str) -> None:
    params = [f"by_acc/{a}" for a in (0, 7, 19, 21)] if mode == "duckdb" else []
    for name in list(workload.ORACLE) + params:
        assert workload.norm(got[name]) == want[name], name
    assert got["error"] == "42P01"


def _n(want: dict, acc: int) -> int:
    return int(float([r for r in want["acc_totals"] if r[0] == str(acc)][0][1]))


def test_node_postgres(db, node_modules):
    workload.run_writers(db.url(), clients=4, statements=20, seed=11)
    want = workload.expected(db.url())
    res = subprocess.run(["node", str(CLIENTS / "probe.js"), db.url()], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, NODE_PATH=str(node_modules),
                                               IVM_PARAM_VIEWS="1" if db.mode == "duckdb" else "0"))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    _check(got, want, db.mode)
    assert got["counts"] == [_n(want, a) for a in (0, 7, 19, 21)]
    assert got["inside"] == got["after_rollback"] + 1
    assert got["version"].startswith("PostgreSQL 15")


def test_jdbc(db, jdbc_probe):
    workload.run_writers(db.url(), clients=4, statements=20, seed=12)
    want = workload.expected(db.url())
    url = f"jdbc:postgresql://{db.host}:{db.port}/shop"
    res = subprocess.run([*jdbc_probe, url, "params" if db.mode == "duckdb" else "noparams"],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    _check(got, want, db.mode)
    assert got["inside"] == _n(want, 19) + 1
    assert {"accounts", "trans", "acc_totals", "big_trans"} <= set(got["tables"].split(","))
    assert got["columns"].split(",")[:2] == ["acc:int4", "n:int8"]
    assert got["product"].startswith("PostgreSQL 15")
