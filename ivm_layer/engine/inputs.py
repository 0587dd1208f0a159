"""The arguments of a parameterized view's ``lookup()`` bound to its inputs: positional, then by
name (a name resolves as the view's own names do), each input exactly once. O(inputs).

>>> bind_inputs(("acc", "since"), (7,), {"since": 3})
(7, 3)
>>> bind_inputs(("acc",), (), {})
Traceback (most recent call last):
...
ivm_layer.errors.ProgrammingError: lookup needs acc (parameters: acc)
"""

from __future__ import annotations

from typing import Any

from ..errors import ProgrammingError
from ..identifiers import resolve


def bind_inputs(params: tuple[str, ...] | list[str], args: tuple, kwargs: dict[str, Any]) -> tuple:
    """The input values in the order of ``params``; a :class:`ProgrammingError` (42P02) for
    too many, unknown, repeated or missing inputs."""
    if len(args) > len(params):
        raise ProgrammingError(f"lookup takes {len(params)} input(s) ({', '.join(params)}), got {len(args)}",
                               sqlstate="42P02")
    values: dict[str, Any] = dict(zip(params, args))
    for k, v in kwargs.items():
        name = resolve(k, params)
        if name not in params:
            raise ProgrammingError(f"unknown parameter {k!r}; this view's parameters are {', '.join(params)}",
                                   sqlstate="42P02")
        if name in values:
            raise ProgrammingError(f"parameter {k!r} given twice", sqlstate="42P02")
        values[name] = v
    missing = [p for p in params if p not in values]
    if missing:
        raise ProgrammingError(f"lookup needs {', '.join(missing)} (parameters: {', '.join(params)})",
                               sqlstate="42P02")
    return tuple(values[p] for p in params)
