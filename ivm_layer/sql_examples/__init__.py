"""The example views as SQL files, shipped as package data of ``ivm_layer``: paper 000's Q1–Q12 (``q01.sql`` …),
the fraud view of its §1 (``fraud.sql``), TPC-H-shaped and event views. The demo, ``ivm bench``
and the tests read them from here, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path

DIR = Path(__file__).resolve().parent


def read(name: str) -> str:
    """The text of ``<name>.sql``."""
    return (DIR / f"{name}.sql").read_text()


def names() -> list[str]:
    """Every example's name, sorted."""
    return sorted(p.stem for p in DIR.glob("*.sql"))
