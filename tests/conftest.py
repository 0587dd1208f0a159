import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

def pytest_terminal_summary(terminalreporter):
    mod = sys.modules.get("test_differential")
    stats = getattr(mod, "STATS", None)
    if not stats or not stats.get("attempted"):
        return
    tr = terminalreporter
    tr.section("differential IVM stats")
    tr.write_line(
        f"impl={stats['impl']} queries attempted={stats['attempted']} "
        f"accepted={stats['accepted']} rejected={stats['rejected']} "
        f"steps checked={stats['steps']} diff calls checked={stats['diffs']}"
    )
    for reason, n in sorted(stats["reasons"].items(), key=lambda kv: -kv[1])[:8]:
        tr.write_line(f"  rejected x{n}: {reason}")


# -- PostgreSQL ---------------------------------------------------------------------------------
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL cluster (wal_level=logical, 127.0.0.1, free port) per test run."""
    from ivm_layer.bench.pg_cluster import Cluster

    with Cluster() as cluster:
        cluster.wait_ready()
        yield cluster


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """The URL of a fresh, empty database in the test cluster."""
    return pg_cluster.create_database()


# -- markers --------------------------------------------------------------------------------------
def pytest_collection_modifyitems(config, items):
    """Every test that uses the PostgreSQL cluster is marked ``postgres``, so
    ``pytest -m "not postgres and not spark"`` runs the rest without a server. ``spark`` and
    ``slow`` are set by the tests themselves."""
    for item in items:
        if "pg_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
