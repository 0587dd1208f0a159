"""``--shards N``: route changes to N engines so that the union of their outputs is the view.

Every atom (table occurrence) of a view gets its own input table in the shard engines
(``ivm_a<i>_<table>``: the view's SQL is rewritten so each FROM item reads its own table),
so a row of a self-joined table is routed per occurrence. Then, per view, the HyperCube of
:mod:`.shares` over the view's join variables: a row goes to the shards whose coordinates
agree with the hashes of its values of the split variables (and of the whole row, for an
atom split by its rows), replicated along the dimensions it does not carry. Every join
result is produced on exactly one shard.

DISTINCT and aggregate views are not split (their
rows would be counted once per shard) and are refused with ``--shards > 1``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from decimal import Decimal

import sqlglot
from sqlglot import exp

from ..compile import compile_view
from ..errors import IVMError
from ..identifiers import normalize_tree
from .shares import choose_shares, describe, equality_variables, row_dim
from .state import ViewDef


def canonical(v) -> bytes:
    """A byte string equal for values the engine considers equal (1 == 1.0 == Decimal('1'))."""
    if v is None:
        return b"n"
    if isinstance(v, bool):
        return b"b1" if v else b"b0"
    if isinstance(v, (int, float, Decimal)):
        try:
            if v == int(v):
                return b"i" + str(int(v)).encode()
        except (OverflowError, ValueError):  # inf, nan
            pass
        return b"f" + repr(float(v)).encode()
    if isinstance(v, str):
        return b"s" + v.encode()
    return b"r" + repr(v).encode()


def stable_hash(values: Iterable) -> int:
    h = hashlib.blake2b(digest_size=8)
    for v in values:
        c = canonical(v)
        h.update(len(c).to_bytes(4, "little"))
        h.update(c)
    return int.from_bytes(h.digest(), "little")


def atom_table(i: int, table: str) -> str:
    return f"ivm_a{i}_{table}"


def rewrite_per_atom(select_sql: str) -> tuple[str, list[str]]:
    """The SELECT with its i-th FROM item reading ``ivm_a<i>_<table>`` (aliased as before);
    returns the SQL and the original table of each FROM item."""
    tree = normalize_tree(sqlglot.parse_one(select_sql, read="postgres"), "postgres")
    tables: list[str] = []
    for i, node in enumerate(tree.find_all(exp.Table)):
        name = node.name
        alias = node.alias or node.name
        tables.append(name)
        node.set("this", exp.to_identifier(atom_table(i, name)))
        node.set("db", None)
        node.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return tree.sql(dialect="postgres"), tables


class ViewRouter:
    """Routing of one view's base-table changes to ``shards`` engines, by the HyperCube of
    :mod:`.shares`. ``shares``: a recorded plan (dimension → share) to route by; without it
    the shares are chosen from ``sizes`` (rows per base table; missing: 1)."""

    def __init__(self, d: ViewDef, schema: dict[str, dict[str, str]], shards: int,
                 shares: dict[str, int] | None = None, sizes: dict[str, float] | None = None):
        sql, tables = rewrite_per_atom(d.select_sql)
        self.shards = shards
        self.atom_schema = {atom_table(i, t): dict(schema[t]) for i, t in enumerate(tables)}
        view = compile_view(sql, self.atom_schema, dialect="postgres")
        gcq = view.plan.gcq
        if shards > 1 and (gcq.distinct or gcq.aggregate is not None):
            raise IVMError(f"view {d.name}: DISTINCT and aggregate views cannot be split over "
                           "shards yet; run it with --shards 1")
        self.defn = ViewDef(d.name, sql, d.materialized, list(self.atom_schema))
        atoms = gcq.atoms
        bases = [a.relation.split("_", 2)[2] for a in atoms]
        atom_vars = [a.varset for a in atoms]
        if shares is None:
            sizes = sizes or {}
            shares = choose_shares(atom_vars, [sizes.get(b, 1) for b in bases], shards)
        self.shares = {k: int(v) for k, v in shares.items() if int(v) > 1}
        product = 1
        for p in self.shares.values():
            product *= p
        known = set(equality_variables(atom_vars)) | {row_dim(i) for i in range(len(atoms))}
        if product != shards or not set(self.shares) <= known:
            raise IVMError(f"view {d.name}: the recorded routing plan {self.shares} does not fit "
                           f"{shards} shards and this view; start with a new --checkpoint")
        #: the grid's dimensions in a fixed order (variables by name, then atoms' rows)
        dims = sorted(self.shares, key=lambda x: (x.startswith("#"), x))
        strides, s = {}, 1
        for dim in dims:
            strides[dim] = s
            s *= self.shares[dim]
        self.by_table: dict[str, list[tuple[str, list, list[int]]]] = {}
        for i, a in enumerate(atoms):
            # (dimension, share, stride, column position or None for the whole row)
            own = [(dim, self.shares[dim], strides[dim], a.vars.index(dim)) for dim in dims if dim in a.varset]
            own += [(dim, self.shares[dim], strides[dim], None) for dim in dims if dim == row_dim(i)]
            cells = [0]
            for dim in dims:   # replicated along the dimensions the atom does not carry
                if dim not in a.varset and dim != row_dim(i):
                    cells = [c + j * strides[dim] for c in cells for j in range(self.shares[dim])]
            self.by_table.setdefault(bases[i], []).append((a.relation, own, cells))
        self.scheme = describe([f"{b} (as {a.alias})" if a.alias != b else b for a, b in zip(atoms, bases)],
                               atom_vars, self.shares, shards)
        #: an output row tells its shard (it holds every split coordinate): the shards' changes
        #: are disjoint and their union needs no consolidation
        out = list(gcq.output or [])
        plain = bool(out) and all(isinstance(o, str) for o in out)
        self.disjoint = plain and all(
            (dim in out) if not dim.startswith("#") else
            (None not in atoms[int(dim[1:])].vars and set(atoms[int(dim[1:])].vars) <= set(out))
            for dim in dims)

    @property
    def mode(self) -> str:
        """``hash`` (only variables split), ``grid`` (some atom split by its rows), ``single``."""
        if not self.shares:
            return "single"
        return "grid" if any(d.startswith("#") for d in self.shares) else "hash"

    def route(self, table: str, row: tuple | None) -> Iterator[tuple[int, str]]:
        """``(shard, atom table)`` pairs a change of ``table`` goes to (``row is None``: a
        TRUNCATE, which goes everywhere the table is)."""
        for atab, own, cells in self.by_table.get(table, ()):
            if row is None:
                for s in range(self.shards):
                    yield s, atab
                continue
            base = 0
            for dim, share, stride, pos in own:
                value = row if pos is None else (row[pos],)
                base += (stable_hash((dim, *value)) % share) * stride
            for c in cells:
                yield base + c, atab
