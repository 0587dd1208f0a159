"""The one road, checked on the source: no driver updates views itself (the ViewSet does), only
the replication feed decodes a replication stream, one CheckpointStore, one NaN."""

from __future__ import annotations

import re
from pathlib import Path

import ivm_layer

PACKAGE = Path(ivm_layer.__file__).parent
DRIVERS = ["session", "daemon", "shell", "serve", "demo.py"]

#: a view object's update operations called directly (``vs.view.prepare(…)``, ``view.commit(…)``,
#: ``self.views[name].apply(…)`` …)
DIRECT = re.compile(r"(\.view|\bview|\bviews\[[^\]]*\])\.(prepare|prepare_validated|commit|apply|diff|insert|delete)\(")


def _driver_files() -> list[Path]:
    out: list[Path] = []
    for d in DRIVERS:
        p = PACKAGE / d
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.exists() else []
    return out


def test_no_driver_prepares_or_commits_views_itself():
    files = _driver_files()
    assert any(f.parts[-3:-1] == ("session", "duckdb") for f in files)   # the scan sees the drivers
    hits = [f"{f.relative_to(PACKAGE)}:{i}: {line.strip()}" for f in files
            for i, line in enumerate(f.read_text().splitlines(), 1) if DIRECT.search(line)]
    assert hits == []


def test_one_replication_reader_one_checkpoint_store():
    decoders = [f.relative_to(PACKAGE).as_posix() for f in PACKAGE.rglob("*.py")
                if "PgOutputDecoder(" in f.read_text() and f.name != "pgoutput.py"]
    assert decoders == ["io/postgres/feed.py"]
    stores = [f.relative_to(PACKAGE).as_posix() for f in PACKAGE.rglob("*.py")
              if re.search(r"^class CheckpointStore\b", f.read_text(), re.M)]
    assert stores == ["maintain/checkpoint.py"]
    from ivm_layer.io.postgres.feed import ChangeFeed
    from ivm_layer.session.postgres.state import PgView

    assert "ChangeFeed" in str(PgView.__annotations__["reader"])
    assert "daemon_feed" in (PACKAGE / "daemon" / "source.py").read_text()
    assert ChangeFeed.fault_tolerance.value == "exactly_once"


def test_one_nan():
    from ivm_layer.engine import values
    from ivm_layer.io.postgres import pgoutput

    assert not hasattr(values, "FLOAT_NAN")
    assert pgoutput.NAN is values.NAN
    assert values.canonical_float(float("nan")) is values.NAN
