"""What start-up loads: ``import ivm_layer`` and ``ivm shell -c "SELECT 1"`` on DuckDB load no
PostgreSQL driver, no numpy/pandas/pyarrow, no Spark and no SQL parser (their cost is measured
in bench/, not here: tests never assert on wall time). Plus the shell's fast statement splitter
against sqlglot's tokenizer, which it stands in for on plain text."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from ivm_layer.shell import script
from ivm_layer.sql.statements import split_statements

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


# -- the fast splitter ---------------------------------------------------------------------------
_PIECES = st.lists(st.sampled_from(["SELECT", " ", "1", ";", "'a;b'", "'it''s'", '"x;y"', "\n", "t",
                                    "'", '"', "(", ")", ",", "é", "''"]), max_size=14)


@settings(max_examples=1000, deadline=None)
@given(_PIECES)
def test_plain_text_splits_as_sqlglot_does(pieces):
    text = "".join(pieces)
    plain = script._plain_cut(text)
    if plain is None:          # an unterminated quote: sqlglot's path (nothing to compare)
        return
    assert script._split(text, "duckdb") == split_statements(text, "duckdb")
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import TokenType

    try:
        tokens = Dialect.get_or_raise("duckdb").tokenize(text)
        complete = bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON
    except SqlglotError:
        complete = False
    assert script._sql_complete(text, "duckdb") == complete


def test_text_that_is_not_plain_goes_to_sqlglot():
    for text in ("SELECT 1 -- c;", "SELECT $$a;b$$", "/* ; */ SELECT 1", "SELECT E'a\\'b'", "''a;b'''"):
        assert script._plain_cut(text) is None
        assert script._split(text, "duckdb") == split_statements(text, "duckdb")
