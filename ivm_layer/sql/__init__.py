"""SQL front-end: SQL text to generalized conjunctive queries (GCQs) with sqlglot.

``translate_select`` (and sqlglot with it) loads on first use, so the light modules of this
package (``sqltext``: where literals and comments end) cost nothing to import."""

__all__ = ["translate_select"]


def __getattr__(name: str):
    if name == "translate_select":
        from .translate import translate_select

        return translate_select
    raise AttributeError(f"module 'ivm_layer.sql' has no attribute {name!r}")
