"""IEDyn indexes over a node's GMR (paper 000 Def. 8): hash on shared variables, order inside."""

from __future__ import annotations

from typing import Any, Callable

from .groups import HashGroup, OrderedGroup


class Index:
    """Groups the tuples of ``ρ_n`` (or their projection ``content``) by a hash key.

    ``sort_pos`` (a position in the content tuple) makes each group an :class:`OrderedGroup`;
    ``content_filter`` drops content tuples that cannot satisfy the parent's filters.
    """

    __slots__ = ("groups", "key", "content", "content_filter", "sort_pos", "spec")

    def __init__(self, key: Callable[[tuple], Any], content: Callable[[tuple], tuple] | None,
                 content_filter: Callable[[tuple], bool] | None, sort_pos: int | None, spec: tuple):
        self.groups: dict[Any, HashGroup | OrderedGroup] = {}
        self.key = key
        self.content = content
        self.content_filter = content_filter
        self.sort_pos = sort_pos
        self.spec = spec

    def apply(self, delta: dict[tuple, int]) -> None:
        groups = self.groups
        key = self.key
        content = self.content
        cfilter = self.content_filter
        for t, d in delta.items():
            if not d:
                continue
            if content is not None:
                c = content(t)
                if cfilter is not None and not cfilter(c):
                    continue
            else:
                c = t
            k = key(t)
            g = groups.get(k)
            if g is None:
                g = groups[k] = HashGroup() if self.sort_pos is None else OrderedGroup(self.sort_pos)
            g.add(c, d)
            if not g.total and not len(g):  # (ring payloads: a total may be 0 with tuples left)
                del groups[k]

    def size(self) -> int:
        return sum(len(g) for g in self.groups.values())
