"""The answer map of a parameterized view: input values → {output row: multiplicity}, kept up to
date from the view's change in O(rows of the change) (a key whose rows all go is removed).

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
