"""Views with static tables (paper 003): load-once tables and pre-joined static parts.

:class:`StaticView` is a :class:`View` over the planner's rewritten query (see
``planner/static.py``): dynamic atoms, single static atoms, and one derived relation per
pre-joined static part. Rows of a pre-joined part's tables go to that part's own view; its
change feeds the derived relation, exactly like a materialized cyclic core. Static tables may
be loaded (in any batches) until the first update of a dynamic table; afterwards a change to
one raises :class:`UpdateError` before anything changes.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..identifiers import resolve
from ..errors import UpdateError
from ..planner import Plan
from .view import View

_PART = "\0part"


class StaticPart:
    """A pre-joined static part: its derived relation in the main view and the view computing it."""

    def __init__(self, relation: str, view: View, label: str):
        self.relation = relation
        self.view = view
        self.label = label


class StaticView(View):
    """A view some of whose tables are static (see the module docstring)."""

    def __init__(self, plan: Plan, sql: str, static_tables: Iterable[str], parts: list[StaticPart]):
        super().__init__(plan, sql)
        self.static_tables = frozenset(static_tables)
        self.parts = list(parts)
        self._part_of = {t: p for p in self.parts for t in p.view.tables}
        self._derived = {p.relation for p in self.parts}
        self.dynamic_started = False  # True once a dynamic table changed: static tables are frozen

    # -- introspection ------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        names = [t for t in super().tables if t not in self._derived]
        for p in self.parts:
            names += [t for t in p.view.tables if t not in names]
        return names

    def base_rows(self, table: str) -> Mapping[tuple, int]:
        """The rows of input table ``table`` (a table of a pre-joined static part: as that
        part's view holds them); see :meth:`View.base_rows`."""
        part = self._part_of.get(resolve(table, self._part_of))
        return part.view.base_rows(table) if part is not None else super().base_rows(table)

    def explain(self) -> str:
        lines = [super().explain()]
        for p in self.parts:
            lines.append(f"static pre-join {p.relation} = {p.label}:")
            lines.extend("    " + line for line in p.view.plan.explain().splitlines())
        return "\n".join(lines)

    def stats(self) -> dict[str, int]:
        out = super().stats()
        out["static_prejoin_entries"] = sum(p.view.stats()["stored"] for p in self.parts)
        out["stored"] += out["static_prejoin_entries"]
        return out

    # -- writing ------------------------------------------------------------------------
    def _key(self, table: Any) -> str:
        """The key ``table`` names here (see :func:`ivm_layer.identifiers.resolve`)."""
        known = set(self.static_tables) | set(self._part_of) | self._derived | set(super().tables)
        return resolve(table, known)

    def _single(self, table: str, row: Any, k: int) -> bool:
        name = self._key(table)
        if name in self.static_tables or name in self._part_of or name in self._derived:
            return False  # the general path checks the freeze and routes pre-joined parts
        done = super()._single(table, row, k)
        if done:
            self.dynamic_started = True
        return done

    def _validate(self, batch: Mapping) -> list:
        if not isinstance(batch, Mapping):
            return super()._validate(batch)
        main: dict = {}
        per_part: dict[StaticPart, dict] = {}
        for table, changes in batch.items():
            name = self._key(table)
            if name in self._derived:
                raise UpdateError(f"unknown table {table!r}; no change was applied")
            part = self._part_of.get(name)
            if part is not None:
                changes = list(changes) if changes is not None else changes
                if self.dynamic_started and changes:
                    raise _frozen(name)
                per_part.setdefault(part, {})[table] = changes
            else:
                main[table] = changes
        out = super()._validate(main)
        if self.dynamic_started:
            for name, changes in out:
                if changes and name in self.static_tables:
                    raise _frozen(name)
        for part, sub in per_part.items():  # phase one of the part's own two-phase update
            out.append((_PART, part, part.view.prepare(sub)))
        return out

    def _prepare_validated(self, validated: list, pending: dict[str, str] | None = None) -> list:
        if pending is None:
            pending = {}
        steps = super()._prepare_validated([v for v in validated if v[0] != _PART], pending)
        steps.extend(v for v in validated if v[0] == _PART)
        return steps

    def _commit(self, steps: list, want_change: bool):
        normal = [s for s in steps if s[0] != _PART]
        for s in steps:
            if s[0] != _PART:
                continue
            part = s[1]
            change = part.view.commit(s[2], want_change=True)
            if change:
                normal += super()._prepare_validated([(part.relation, dict(change))])
        if any(s[1] and s[0] not in self.static_tables and s[0] not in self._derived for s in normal):
            self.dynamic_started = True
        return super()._commit(normal, want_change)


def _frozen(name: str) -> UpdateError:
    return UpdateError(
        f"table {name!r} is static for this view and dynamic tables were already updated: a static "
        "table can only be loaded before the first update of a dynamic table (recompile the view to "
        "change it); no change was applied")
