"""What start-up loads: ``import ivm_layer`` and ``ivm shell -c "SELECT 1"`` on DuckDB load no
PostgreSQL driver, no numpy/pandas/pyarrow, no Spark and no SQL parser (their cost is measured
in bench/, not here: tests never assert on wall time)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = {"psycopg", "psycopg_binary", "numpy", "pandas", "pyarrow", "pyspark", "sqlglot", "polars"}


def _loaded(code: str) -> set[str]:
    """Top-level packages loaded by running ``code`` in a fresh interpreter."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_ivm_layer_loads_no_driver_and_no_engine():
    loaded = _loaded("import ivm_layer")
    assert not loaded & (HEAVY | {"duckdb"}), loaded & (HEAVY | {"duckdb"})
    detail = subprocess.run([sys.executable, "-c", "import ivm_layer, sys; print(sorted(m for m in sys.modules "
                             "if m.startswith('ivm_layer')))"], capture_output=True, text=True, check=True)
    assert detail.stdout.strip() == "['ivm_layer', 'ivm_layer.errors']"


def test_public_names_load_on_first_use():
    loaded = _loaded("import ivm_layer\nv = ivm_layer.compile_view('SELECT a FROM r', {'r': ['a']})\n"
                     "assert isinstance(ivm_layer.View, type)")
    assert "sqlglot" in loaded and "psycopg" not in loaded


def test_shell_select_1_on_duckdb_loads_no_driver_parser_or_dataframe_library():
    code = ("import sys\nfrom ivm_layer.cli import main\nsys.argv = ['ivm', 'shell', '-c', 'SELECT 1']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n")
    loaded = _loaded(code)
    assert "duckdb" in loaded
    assert not loaded & HEAVY, loaded & HEAVY


def test_shell_script_on_a_postgresql_session_loads_no_duckdb_and_no_parser(pg_url, tmp_path):
    """Issue 27: ``ivm shell URL -f FILE`` on PostgreSQL with no incremental view pays for psycopg
    only: no DuckDB driver, no DuckDB session code, no SQL parser (DROP and CREATE TABLE go to
    PostgreSQL unparsed when no view can be affected), no dataframe library."""
    script = tmp_path / "s.sql"
    script.write_text("DROP TABLE IF EXISTS st_t;\nCREATE TABLE st_t (id int, note text);\n"
                      "INSERT INTO st_t VALUES (1, 'a');\nSELECT count(*) FROM st_t;\n")
    code = ("import sys\nfrom ivm_layer.cli import main\n"
            f"sys.argv = ['ivm', 'shell', {pg_url!r}, '-f', {str(script)!r}, '--state-dir', {str(tmp_path)!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "assert not any(m.startswith('ivm_layer.session.duckdb.session') for m in sys.modules)\n")
    loaded = _loaded(code)
    assert "psycopg" in loaded
    assert not loaded & ((HEAVY - {"psycopg", "psycopg_binary"}) | {"duckdb"}), loaded
