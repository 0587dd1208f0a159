"""Computed columns and residual filters on top of a view (:class:`ProjectView`).

The inner :class:`~ivm_layer.engine.view.View` outputs the join variables the expressions
read; every change row of it is filtered by the residual conditions (conditions between
tables that are not ``column ± constant``, so no index can use them) and mapped through the
output expressions, compiled once to closures. Rows that become equal merge their
multiplicities (bag semantics), so the projected bag is kept as counts.

Cost: per update, O(1) closure calls per changed inner row, on top of the inner view's
delta enumeration; memory: one count per distinct output row. A residual filter is applied
after the join, so the inner view maintains join results the filter then drops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import ConcurrentModificationError, UpdateError
from ..query import ProjectionSpec
from .composite import CompositeView
from .scalar import compile_condition, compile_scalar
from .view import Change, Prepared, View, combined_stats, tell


class ProjectView(CompositeView):
    """A view whose rows are computed from an inner view's rows (same API as :class:`View`)."""

    made_of = "computed columns or residual filters"

    def __init__(self, inner: View, spec: ProjectionSpec, sql: str = ""):
        self.sql = sql
        self.inner = inner
        self.spec = spec
        self.columns: list[str] = list(spec.columns)
        # a composite inner view (a join tree, a window) names its row positions itself
        pos = getattr(inner, "positions", None) or {v: i for i, v in enumerate(inner.plan.gcq.output)}
        self._fns = [compile_scalar(e, pos, spec.dialect) for e in spec.exprs]
        self._keep = [compile_condition(e, pos, spec.dialect) for e in spec.residual]
        self._counts: dict[tuple, int] = {}
        self._total = 0
        self._version = 0
        self._subscribers: list[Callable[[Change], Any]] = []

    # -- introspection ------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        return self.inner.tables

    @property
    def query_class(self) -> str:
        return self.inner.query_class


    def explain(self) -> str:
        spec = self.spec
        lines = [f"view columns: {', '.join(self.columns)}"]
        computed = [f"{c} = {_show(e)}" for c, e in zip(spec.columns, spec.exprs) if e[0] != "var"]
        if computed:
            lines.append("computed columns (evaluated on each changed join row: O(1) per row): "
                         + "; ".join(computed))
        if spec.residual:
            lines.append("residual filter (conditions between tables no index can use, applied to each "
                         "changed join row after the join; the join below keeps the rows it drops): "
                         + " AND ".join(spec.texts))
        lines.append(f"materialized: the count of each {'distinct ' if spec.distinct else ''}output row "
                     f"({len(self._counts)} rows); memory grows with the output")
        lines.append("join below (its output = the variables the expressions read):")
        lines.extend("    " + line for line in self.inner.explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        return combined_stats([self.inner], len(self._counts))

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """The rows of input table ``table`` as the view holds them (see :meth:`View.base_rows`)."""
        return self.inner.base_rows(table)

    def __repr__(self) -> str:
        return f"<ivm_layer.ProjectView {self.query_class} columns={self.columns} rows={len(self)}>"

    # -- reading ------------------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        v0 = self._version
        distinct = self.spec.distinct
        for row, k in self._counts.items():
            yield (row, 1) if distinct else (row, k)
            if self._version != v0:
                raise ConcurrentModificationError(
                    "the view was updated while this enumeration was open; take list(view.rows()) first")

    def __len__(self) -> int:
        return len(self._counts) if self.spec.distinct else self._total

    # -- writing ------------------------------------------------------------------------
    def prepare(self, batch: Mapping) -> Prepared:
        """Phase one (see :meth:`View.prepare`): validate; raises, changes nothing. Cost: the inner
        view's ``prepare``."""
        return Prepared(self, self._version, self.inner.prepare(batch))

    def commit(self, prepared: Prepared, want_change: bool = False, notify: bool = True) -> Change | None:
        """Phase two: apply a prepared batch (cannot fail). Cost: the inner view's commit plus
        O(1) per changed inner row (the computed columns and filters evaluated once)."""
        if prepared.view is not self or prepared.version != self._version:
            raise UpdateError("this prepared batch is stale: the view changed since prepare(); prepare it again")
        self._version += 1
        inner_change = self.inner.commit(prepared.steps, want_change=True) or ()
        mapped: dict[tuple, int] = {}
        fns, keep = self._fns, self._keep
        for row, k in inner_change:
            if keep and not all(f(row) for f in keep):
                continue
            out = tuple(f(row) for f in fns)
            mapped[out] = mapped.get(out, 0) + k
        result = self._merge(mapped)
        if notify and result and self._subscribers:
            tell(self._subscribers, result)
        return result if want_change else None

    def _merge(self, mapped: dict[tuple, int]) -> Change:
        counts = self._counts
        distinct = self.spec.distinct
        out: Change = []
        for row, k in mapped.items():
            if not k:
                continue
            before = counts.get(row, 0)
            after = before + k
            if after:
                counts[row] = after
            else:
                del counts[row]
            self._total += k
            if not distinct:
                out.append((row, k))
            elif before == 0 and after > 0:
                out.append((row, 1))
            elif before > 0 and after == 0:
                out.append((row, -1))
        return out


def _show(e: tuple) -> str:
    """A short readable form of an expression tree (EXPLAIN)."""
    tag = e[0]
    if tag == "var":
        return e[1]
    if tag == "const":
        return repr(e[1])
    if tag == "fn":
        return f"{e[1]}({', '.join(_show(a) for a in e[2])})"
    if tag in ("cast", "extract", "trunc"):
        return f"{tag}({', '.join(_show(a) if isinstance(a, tuple) else str(a) for a in e[1:])})"
    if tag == "case":
        return "CASE " + " ".join(f"WHEN {_show(c)} THEN {_show(v)}" for c, v in e[1]) + f" ELSE {_show(e[2])} END"
    if len(e) == 3 and isinstance(e[1], tuple) and isinstance(e[2], tuple) and e[2] and isinstance(e[2][0], str):
        return f"({_show(e[1])} {tag} {_show(e[2])})"
    return f"{tag}({', '.join(_show(a) if isinstance(a, tuple) and a and isinstance(a[0], str) else repr(a) for a in e[1:])})"
