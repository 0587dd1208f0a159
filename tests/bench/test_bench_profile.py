"""`ivm bench --profile paper`: Q1-Q12 at the stream sizes of 000 Table 2, insert-only random and
temporal order, DuckDB recompute-per-100 and the naive IVM beside the engine; and the bench
package finds its SQL when installed (ivm_layer/sql_examples ships with it)."""

import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ivm_layer.bench import workloads as wl  # noqa: E402
from ivm_layer.bench.__main__ import PAPER_SYSTEMS, _plan, parse_args  # noqa: E402

TABLE2 = {"Q1": 12_000, "Q2": 12_000, "Q3": 2_700, "Q4": 2_700, "Q5": 21_000, "Q6": 21_000, "Q7": 2_700,
          "Q8": 21_000, "Q9": 21_000, "Q10": 2_700, "Q11": 21_000, "Q12": 21_000}


def test_paper_profile_has_table2_sizes_and_orders():
    plan = _plan(parse_args(["--profile", "paper"]))
    got = {w.name: sizes for w, sizes in plan}
    want = {}
    for q, n in TABLE2.items():
        want[q] = [n]
        want[f"{q}-temporal"] = [n]
    assert got == want
    assert all(w.order in ("random", "temporal") for w, _ in plan)
    assert set(PAPER_SYSTEMS) == {"ivm-pull", "ivm-push", "duckdb", "naive"}
    narrowed = _plan(parse_args(["--profile", "paper", "Q1*"]))
    assert [(w.name, s) for w, s in narrowed] == [("Q1", [12_000]), ("Q1-temporal", [12_000])]
    assert parse_args(["--profile", "paper"]).batch == 100


def test_bench_sql_ships_with_the_package():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        cfg = tomllib.load(f)["tool"]["setuptools"]
    assert cfg["packages"]["find"]["include"] == ["ivm_layer*"]
    assert "*.sql" in cfg["package-data"]["ivm_layer.sql_examples"]
    shipped = os.path.join(ROOT, "ivm_layer", "sql_examples")
    assert os.path.isfile(os.path.join(shipped, "q01.sql")) and os.path.isfile(os.path.join(shipped, "fraud.sql"))
    assert wl.get("Q1").sql == "SELECT * FROM R, S WHERE R.a < S.d"
