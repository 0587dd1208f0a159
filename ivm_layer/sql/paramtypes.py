"""The SQL types of a parameterized view's inputs, as the database types them.

:func:`describable` is the view's query with its placeholders taken out
(:func:`~ivm_layer.sql.params.extract_params`): each input's first column is a hidden output
``__param_<name>`` (a range input's column ``__range_<k>``), so the database's own description
of that query (DuckDB's ``DESCRIBE``, PostgreSQL's ``LIMIT 0`` result) types the inputs as the
columns they are compared with: :func:`input_types`. The sessions keep them to convert a
read's values (:mod:`ivm_layer.session.inputvalues`). O(query size), once per view.
"""

from __future__ import annotations

from .params import HIDDEN, RANGE, extract_params


def describable(select_sql: str, dialect: str) -> tuple[str, list[tuple[str, str, str]]]:
    """``(query without placeholders, range parameters (name, op, hidden column))``."""
    sql, _, ranges = extract_params(select_sql, dialect)
    return sql, ranges


def input_types(columns: list[tuple[str, str]], ranges: list[tuple[str, str, str]]) -> dict[str, str]:
    """``{input: type}`` from the ``(column, type)`` description of :func:`describable`'s query.

    >>> input_types([("id", "INTEGER"), ("__param_acc", "BIGINT"), ("__range_0", "DATE")],
    ...             [("since", ">", "__range_0")])
    {'acc': 'BIGINT', 'since': 'DATE'}
    """
    by_column = dict(columns)
    out = {c[len(HIDDEN):]: t for c, t in by_column.items() if c.startswith(HIDDEN)}
    for name, _, hidden in ranges:
        if hidden in by_column:
            out.setdefault(name, by_column[hidden])
    return out


def is_hidden(column: str) -> bool:
    """Whether ``column`` is one of :func:`describable`'s hidden input columns."""
    return column.startswith((HIDDEN, RANGE))
