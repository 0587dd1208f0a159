"""Reading what callers hand a view: a batch ``{table: [(row, k), …]}`` checked for shape,
consolidated (one entry per row, spellings of a table name merged) and validated against the
stored rows; a row given to ``contains()``. Nothing here changes a view: every error is an
:class:`~ivm_layer.errors.IVMError` raised before anything is applied.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from ..identifiers import resolve
from ..errors import IVMError, UpdateError
from .bulk import COLUMNS_MIN, read_rows
from .bulk import leaf_delta as bulk_leaf_delta
from .leaves import bad_row
from .values import canonical_row


def read_batch(batch: Mapping, arity_of: Mapping[str, int],
               store_of: Callable[[str], dict[tuple, int] | None]) -> list[tuple[str, dict[tuple, int]]]:
    """``[(table, {row: k})]`` of ``batch``: tables by lower-case name (``arity_of``: their
    arities), rows as canonical tuples (NaNs become the engine's one SQL NaN), zero sums
    dropped; a delete of more copies than ``store_of(table)`` holds is refused. O(batch)."""
    if not isinstance(batch, Mapping):
        raise UpdateError("a batch is a mapping {table: [(row, k), …]}; no change was applied")
    merged: dict[str, dict[tuple, int]] = {}
    spelled: dict[str, Any] = {}
    inserts_only: set[str] = set()  # read by the bulk reader: positive multiplicities only
    for table, changes in batch.items():
        name = resolve(table, arity_of)
        arity = arity_of.get(name)
        if arity is None:
            raise UpdateError(f"unknown table {table!r}; the schema has {', '.join(arity_of)}; "
                              "no change was applied")
        if changes is None or isinstance(changes, (str, bytes, Mapping)) or not isinstance(changes, Iterable):
            raise UpdateError(f"the changes of table {table!r} must be a list of (row, k) pairs, "
                              f"got {changes!r}; no change was applied")
        spelled.setdefault(name, table)
        try:
            items = changes if type(changes) is list else list(changes)
        except Exception as e:  # noqa: BLE001 - any failure of a caller's iterable
            raise UpdateError(f"reading the changes of table {table!r} failed ({type(e).__name__}: {e}); "
                              "no change was applied") from None
        if len(items) >= COLUMNS_MIN and name not in merged:
            bulk = read_rows(items, arity)  # a large insert batch: checked column by column
            if bulk is not None:
                merged[name] = bulk
                inserts_only.add(name)
                continue
        inserts_only.discard(name)
        consolidated = merged.setdefault(name, {})
        for item in items:
            try:
                row, k = item
            except (TypeError, ValueError):
                raise UpdateError(f"batch entries are (row, k) pairs, got {item!r}; no change was applied") from None
            if not isinstance(row, tuple):
                if isinstance(row, (str, bytes, Mapping)) or not isinstance(row, Iterable):
                    raise bad_row(name, row, arity)
                row = tuple(row)
            if len(row) != arity:
                raise bad_row(name, row, arity)
            if not isinstance(k, int) or isinstance(k, bool):
                raise UpdateError(f"multiplicity {k!r} must be an int; no change was applied")
            try:
                row = canonical_row(row)
                consolidated[row] = consolidated.get(row, 0) + k
            except TypeError:
                raise UpdateError(f"row {row!r} has an unhashable value; no change was applied") from None
    out: list[tuple[str, dict[tuple, int]]] = []
    for name, consolidated in merged.items():
        if name in inserts_only:
            out.append((name, consolidated))
            continue
        store = store_of(name)
        if store is not None:
            for row, k in consolidated.items():
                if k < 0 and store.get(row, 0) + k < 0:
                    have = store.get(row, 0)
                    raise UpdateError(
                        f"cannot delete {-k} cop{'y' if k == -1 else 'ies'} of {row!r} from {spelled[name]!r}: "
                        f"{'it is not present' if not have else f'only {have} present'}; no change was applied")
        out.append((name, {r: k for r, k in consolidated.items() if k}))
    return out


def probe_row(row: Any, columns: list[str]) -> tuple:
    """``row`` as the canonical, hashable tuple ``contains()`` looks up, or an IVMError."""
    if not isinstance(row, tuple):
        if isinstance(row, (str, bytes)) or not isinstance(row, Iterable):
            raise IVMError(f"contains() takes a row tuple of {len(columns)} values, got {row!r}")
        row = tuple(row)
    if len(row) != len(columns):
        raise IVMError(f"contains() takes a row of {len(columns)} values "
                       f"({', '.join(columns)}), got {len(row)}")
    row = canonical_row(row)
    try:
        hash(row)
    except TypeError:
        raise IVMError(f"row {row!r} has an unhashable value") from None
    return row


def leaf_deltas(extractors: Iterable, weights: Mapping[int, Callable[[tuple], Any]] | None, name: str,
                changes: dict[tuple, int], pending: dict[str, str]) -> list[tuple[int, dict[tuple, int]]]:
    """Per atom of table ``name`` (its leaf extractors): the delta of its leaf, ``{leaf
    tuple: k}`` (k times the row's ring payload where ``weights`` has one), zeros dropped.
    Value kinds first seen go to ``pending``. Raises UpdateError; changes nothing."""
    per_atom = []
    for ex in extractors:
        weight = weights.get(ex.atom) if weights else None
        if weight is None and len(changes) >= COLUMNS_MIN and min(changes.values()) > 0:
            delta = bulk_leaf_delta(ex, changes, pending)  # a large insert batch, column by column
            if delta is not None:
                if delta:
                    per_atom.append((ex.atom, delta))
                continue
        delta: dict[tuple, int] = {}
        for row, k in changes.items():
            t = ex.leaf_tuple(row, pending)
            if t is None:
                continue
            if weight is not None:
                try:
                    w = weight(row)
                except (TypeError, ArithmeticError) as e:
                    raise UpdateError(f"row {row!r} of {name!r}: an aggregate cannot compute its value "
                                      f"({e}); no change was applied") from None
                if not w:
                    continue
                k = k * w
            delta[t] = delta.get(t, 0) + k
        delta = {t: k for t, k in delta.items() if k}
        if delta:
            per_atom.append((ex.atom, delta))
    return per_atom
