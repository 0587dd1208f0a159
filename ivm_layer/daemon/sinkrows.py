"""A view change made ready for the PostgreSQL sink's ``COPY``: keys, key order, encoding.

:class:`CopyRows` does all the work that needs no connection when it is built (on the
query's thread, while the sink's thread still writes the previous batch), and
:meth:`CopyRows.copy` streams the rows into a table (on the sink's thread). Rows go in the
order of their keys: the primary key's index is then walked once, in order (keys in arrival
order are random: each row touched a random index page, and the cost per row grew with the
table). Keys are :mod:`.rowdigest` digests computed a column at a time, and the rows go in
PostgreSQL's binary format (:mod:`.pgcopy`), encoded a block at a time while the server stores
the previous block. A ``legacy`` table (keyed by :func:`row_key`, from an older release),
columns of other types, and small changes are written as text rows.

Cost per 1M five-column rows (ints and a short string): 0.45 s to build, 0.5 s to encode
while the server stores them (≈ 1.5 s of the server's time with the primary key); the text
rows of the previous release cost 3.3 s of Python.
"""

from __future__ import annotations

import hashlib
from operator import itemgetter

from ..engine.view import Change

#: rows per binary COPY block (the server stores one block while the next is encoded)
COPY_BLOCK = 65_536
#: below this many rows a change is written row by row (numpy's set-up costs more)
SMALL_CHANGE = 64
#: the comment on ``ivm_key`` of tables keyed by ``rowdigest`` (others keep ``row_key``)
DIGEST_COMMENT = "ivm-layer row digest 2"


def row_key(row: tuple) -> str:
    """The key of an older release's sink table: a digest of the row's ``repr``."""
    return hashlib.blake2b(repr(row).encode(), digest_size=16).hexdigest()


def qi(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


class CopyRows:
    """``change`` (``[(row, k)]``) keyed, ordered and encoded for ``COPY`` into a table of
    the view's columns plus ``ivm_count`` and ``ivm_key``."""

    def __init__(self, cols: list[str], types: list[str], change: Change, legacy: bool = False):
        import numpy as np

        from ..io.postgres import bincopy as pgcopy
        from .rowdigest import digest_bytes, digests, infer, row_digest

        self.n = n = len(change)
        self.names = ", ".join(["ivm_key", "ivm_count"] + [qi(c) for c in cols])
        self.text: list[tuple] | None = None
        self.blocks: list | None = None
        if legacy or n < SMALL_CHANGE:
            keyed = [(row_key(row) if legacy else row_digest(row).hex(), k, *row) for row, k in change]
            keyed.sort(key=itemgetter(0))
            self.text = keyed
            return
        rows = list(map(itemgetter(0), change))
        counts = np.fromiter(map(itemgetter(1), change), np.int64, n)
        columns = [list(map(itemgetter(j), rows)) for j in range(len(cols))]
        arrays = [infer(c) for c in columns]
        h1, h2 = digests(columns, n, arrays)
        self.order = np.argsort(h1)   # a uuid compares bytewise: the high word decides
        keys = digest_bytes(h1, h2)
        binary = pgcopy.fields(arrays, types)
        if binary is None:
            self.text = [(keys[i].tobytes().hex(), change[i][1], *rows[i]) for i in self.order.tolist()]
        else:
            self.blocks = [pgcopy.uuid_field(keys), pgcopy.bigint_field(counts), *binary]

    def copy(self, conn, table: str) -> None:
        """COPY the rows into ``table`` (psycopg streams them while the server stores them)."""
        from ..io.postgres import bincopy as pgcopy

        if self.text is not None:
            with conn.cursor().copy(f"COPY {qi(table)} ({self.names}) FROM STDIN") as cp:
                write = cp.write_row
                for row in self.text:
                    write(row)
            return
        with conn.cursor().copy(f"COPY {qi(table)} ({self.names}) FROM STDIN (FORMAT binary)") as cp:
            cp.write(pgcopy.HEADER)
            for lo in range(0, self.n, COPY_BLOCK):
                sel = self.order[lo:lo + COPY_BLOCK]
                cp.write(pgcopy.encode([f.take(sel) for f in self.blocks], len(sel)))
            cp.write(pgcopy.TRAILER)
