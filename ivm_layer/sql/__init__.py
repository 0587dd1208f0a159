"""SQL front-end: SQL text to generalized conjunctive queries (GCQs) with sqlglot."""

from .translate import translate_select

__all__ = ["translate_select"]
