"""SQL front-end: SQL text to generalized conjunctive queries (GCQs) with sqlglot.

``translate_select`` (and sqlglot with it) is loaded on first use, so the helpers that need
no parse (:mod:`.sqltext`, used by the session router on every statement) cost no sqlglot
import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .translate import translate_select

__all__ = ["translate_select"]


def __getattr__(name: str) -> Any:
    if name == "translate_select":
        from .translate import translate_select

        globals()[name] = translate_select
        return translate_select
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
