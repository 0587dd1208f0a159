"""128-bit digests of view rows, computed a column at a time: the key of a sink table's row.

A row's digest must be the same whenever and however it is computed (a row written in one
batch is found by its digest in a later one, after restarts), so it is defined value by value
and only then vectorized:

- each value has a pair of 64-bit words: ``None`` a fixed pair; a Python ``int`` in the
  int64 range ``(mix(v ^ A), mix(v ^ B))`` (``mix`` is SplitMix64's finalizer, a bijection);
  any other value the two halves of ``blake2b(repr(v), digest_size=16)``;
- a row folds its values' pairs in column order: ``h = mix(h * P + word + column)`` on each
  half, from fixed seeds; the key is ``h1 ‖ h2``, big-endian (a ``uuid`` in PostgreSQL).

``digests`` computes the pairs of a whole column at once: integer columns in numpy, string
and boolean columns once per distinct value (Arrow's dictionary encoding), anything
else value by value. ``row_digest`` is the same definition for one row, the reference the
tests hold ``digests`` to. Two different rows share a digest with odds of about 2⁻¹²⁸ for
ordinary data (the digest is not built to resist rows crafted to collide).

Cost (1M five-column rows of ints and a short string): ≈ 0.4 s, against 1.1 s for
``blake2b(repr(row))`` row by row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

_U = np.uint64
_M1, _M2 = _U(0xBF58476D1CE4E5B9), _U(0x94D049BB133111EB)
_S30, _S27, _S31 = _U(30), _U(27), _U(31)
_A, _B = 0x9E3779B97F4A7C15, 0xD1B54A32D192ED03
_P = 0x100000001B3
_SEED1, _SEED2 = 0x243F6A8885A308D3, 0x13198A2E03707344
_MASK = (1 << 64) - 1
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


def _mix1(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _words(text: str) -> tuple[int, int]:
    """The two halves of ``blake2b(text)``: the words of a value whose ``repr`` is ``text``."""
    d = hashlib.blake2b(text.encode(), digest_size=16).digest()
    return int.from_bytes(d[:8], "big"), int.from_bytes(d[8:], "big")


def _blake(v) -> tuple[int, int]:
    return _words(repr(v))


_NULL = _blake(None)


def value_words(v) -> tuple[int, int]:
    """The pair of 64-bit words of one value (the definition the column paths follow)."""
    if v is None:
        return _NULL
    if type(v) is int and _INT_MIN <= v <= _INT_MAX:
        u = v & _MASK
        return _mix1(u ^ _A), _mix1(u ^ _B)
    return _blake(v)


def row_digest(row: Sequence) -> bytes:
    """The 16-byte digest of one row."""
    h1, h2 = _SEED1, _SEED2
    for j, v in enumerate(row):
        w1, w2 = value_words(v)
        h1 = _mix1((h1 * _P + w1 + j) & _MASK)
        h2 = _mix1((h2 * _P + w2 + j) & _MASK)
    return h1.to_bytes(8, "big") + h2.to_bytes(8, "big")


def infer(col: Sequence):
    """The column as a pyarrow array of the type pyarrow infers, or None (mixed types, an int
    beyond int64)."""
    import pyarrow as pa

    try:
        return pa.array(col)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None


def _column_words(col: Sequence, arr) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(col)
    if arr is not None and arr.type == pa.int64():
        # pyarrow infers int64 only when every value is an int (or None) in range
        v = arr.fill_null(0).to_numpy(zero_copy_only=False).view(_U)
        w1, w2 = _mix(v ^ _U(_A)), _mix(v ^ _U(_B))
        if arr.null_count:
            nulls = arr.is_null().to_numpy(zero_copy_only=False)
            w1[nulls], w2[nulls] = _NULL
        return w1, w2
    if arr is not None and (pa.types.is_string(arr.type) or pa.types.is_boolean(arr.type)):
        # equal Arrow values are equal Python values with equal reprs: one digest per value
        enc = pc.dictionary_encode(arr)
        m = len(enc.dictionary)
        idx = enc.indices.fill_null(m).to_numpy(zero_copy_only=False).astype(np.int64)
        u1, u2 = np.empty(m + 1, _U), np.empty(m + 1, _U)
        u1[m], u2[m] = _NULL
        _, first = np.unique(idx, return_index=True)
        for f in first.tolist():
            code = idx[f]
            if code < m:
                u1[code], u2[code] = _blake(col[f])
        return u1[idx], u2[idx]
    w1, w2 = np.empty(n, _U), np.empty(n, _U)
    seen: dict[str, tuple[int, int]] = {}
    for i, v in enumerate(col):
        if v is None or type(v) is int:
            w1[i], w2[i] = value_words(v)
        else:
            r = repr(v)
            w = seen.get(r)
            if w is None:
                w = seen[r] = _words(r)
            w1[i], w2[i] = w
    return w1, w2


def digests(columns: Sequence[Sequence], n: int,
            arrays: Sequence | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The digests of ``n`` rows given column by column: two uint64 arrays, the high and the
    low halves (``row_digest(row) == h1[i].to_bytes(8, 'big') + h2[i].to_bytes(8, 'big')``).
    ``arrays``: the columns as ``infer`` returns them, when the caller has them already."""
    if arrays is None:
        arrays = [infer(col) for col in columns]
    h1, h2 = np.full(n, _SEED1, _U), np.full(n, _SEED2, _U)
    p = _U(_P)
    with np.errstate(over="ignore"):
        for j, (col, arr) in enumerate(zip(columns, arrays)):
            w1, w2 = _column_words(col, arr)
            h1 = _mix(h1 * p + w1 + _U(j))
            h2 = _mix(h2 * p + w2 + _U(j))
    return h1, h2


def digest_bytes(h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
    """The digests as an ``(n, 16)`` uint8 array, each row ``h1 ‖ h2`` big-endian."""
    out = np.empty((len(h1), 16), np.uint8)
    out[:, :8] = h1.astype(">u8").view(np.uint8).reshape(-1, 8)
    out[:, 8:] = h2.astype(">u8").view(np.uint8).reshape(-1, 8)
    return out
