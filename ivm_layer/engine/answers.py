"""The answer map of a parameterized view: input values → {output row: multiplicity}, kept up to
date from the view's change in O(rows of the change) (a key whose rows all go is removed); with
range parameters, each input value's rows are ordered on the compared column instead
(:func:`fold_ordered`, O(log n) per changed row).

>>> answers = {}
>>> fold_change(answers, [((1, "a"), 2), ((1, "b"), 1)], 1)
>>> fold_change(answers, [((1, "a"), -2)], 1)
>>> answers
{(1,): {('b',): 1}}
>>> fold_change(answers, [(("b", 1), -1)], 1, inputs_last=True)
>>> answers
{}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .groups import OrderedGroup


def fold_change(answers: dict[tuple, dict[tuple, int]], change: Iterable[tuple[tuple, int]], n: int,
                inputs_last: bool = False) -> None:
    """Add ``change`` (``(row, k)`` pairs) to ``answers``; the ``n`` input values lead each row
    (``inputs_last``: they end it)."""
    keys, outs = (slice(-n, None), slice(None, -n)) if inputs_last else (slice(None, n), slice(n, None))
    for row, k in change:
        key, out = row[keys], row[outs]
        d = answers.get(key)
        if d is None:
            d = answers[key] = {}
        m = d.get(out, 0) + k
        if m:
            d[out] = m
        else:
            del d[out]
            if not d:
                del answers[key]


def fold_ordered(answers: dict[tuple, Any], change: Iterable[tuple[tuple, int]], n: int, sort_pos: int) -> None:
    """:func:`fold_change` for a view with range parameters: each input value's rows (the
    outputs and the compared columns) are an :class:`~ivm_layer.engine.groups.OrderedGroup`
    on the indexed compared column at ``sort_pos`` of the output part, so a lookup bisects
    to its range; O(log n) per changed row.

    >>> answers = {}
    >>> fold_ordered(answers, [((1, "a", 5), 1), ((1, "b", 3), 2)], 1, 1)
    >>> [t for b in answers[(1,)].buckets_in(4, True, None, False) for t in b]
    [('a', 5)]
    >>> fold_ordered(answers, [((1, "a", 5), -1), ((1, "b", 3), -2)], 1, 1)
    >>> answers
    {}
    """
    for row, k in change:
        key, out = row[:n], row[n:]
        g = answers.get(key)
        if g is None:
            answers[key] = OrderedGroup.of(sort_pos, out, k)
            continue
        g.add(out, k)
        if not len(g):
            del answers[key]
