"""IEDyn indexes over a node's GMR (paper 000 Def. 8): hash on shared variables, order inside."""

from __future__ import annotations

from typing import Any, Callable

from .boxgroup import BoxGroup
from .groups import HashGroup, OrderedGroup


def group_of(sort_pos: Any, t: tuple, d: Any) -> Any:
    """A new group of an index with ``sort_pos`` (None: hash only, an int: ordered on one
    position, a tuple: a multi-level box index) holding ``t`` with multiplicity ``d``."""
    if sort_pos is None:
        return HashGroup.of(t, d)
    if type(sort_pos) is tuple:
        return BoxGroup.of(sort_pos, t, d)
    return OrderedGroup.of(sort_pos, t, d)


def group_from_items(sort_pos: Any, items: dict) -> Any:
    """A new group of an index with ``sort_pos`` (see :func:`group_of`) holding ``items``."""
    if sort_pos is None:
        return HashGroup.from_items(items)
    if type(sort_pos) is tuple:
        return BoxGroup.from_items(sort_pos, items)
    return OrderedGroup.from_items(sort_pos, items)


class Index:
    """Groups the tuples of ``ρ_n`` (or their projection ``content``) by a hash key.

    ``sort_pos`` (a position in the content tuple) makes each group an :class:`OrderedGroup`,
    a tuple of positions (an edge with inequalities on several variables) a :class:`BoxGroup`;
    ``content_filter`` drops content tuples that cannot satisfy the parent's filters.
    """

    __slots__ = ("groups", "key", "content", "content_filter", "sort_pos", "spec")

    def __init__(self, key: Callable[[tuple], Any], content: Callable[[tuple], tuple] | None,
                 content_filter: Callable[[tuple], bool] | None, sort_pos: int | None, spec: tuple):
        self.groups: dict[Any, HashGroup | OrderedGroup | BoxGroup] = {}
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
                groups[k] = group_of(self.sort_pos, c, d)
                continue
            g.add(c, d)
            if not g.total and not len(g):  # (ring payloads: a total may be 0 with tuples left)
                del groups[k]

    def size(self) -> int:
        return sum(len(g) for g in self.groups.values())
