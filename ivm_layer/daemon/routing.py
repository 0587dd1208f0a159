"""``--shards N``: route changes to N engines so that the union of their outputs is the view.

Every atom (table occurrence) of a view gets its own input table in the shard engines
(``ivm_a<i>_<table>``: the view's SQL is rewritten so each FROM item reads its own table),
so a row of a self-joined table is routed per occurrence. Then, per view:

- **hash**: when some variables are shared by *all* atoms (``r.k = s.k = t.k``), a row goes
  to the one shard ``H(its values of those variables) mod N``; every output tuple agrees
  on them, so all its rows meet in exactly one shard.
- **grid** (HyperCube over atoms, covers pure inequality joins): ``N = p_1 ⋯ p_n``; a row
  of atom i has coordinate ``H(row) mod p_i`` and is replicated to every cell with that
  coordinate; the output tuple ``(r_1, …, r_n)`` is produced only in the cell
  ``(H(r_1) mod p_1, …, H(r_n) mod p_n)``.

``H`` is a stable digest of canonical values (equal numbers of different Python types hash
alike), not Python's per-process ``hash``. DISTINCT and aggregate views are not split (their
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


def grid_shares(n_atoms: int, shards: int) -> list[int]:
    """Split ``shards`` into per-atom shares whose product is ``shards`` (prime factors dealt
    to the atoms with the smallest share)."""
    shares = [1] * n_atoms
    f, rest = 2, shards
    factors = []
    while rest > 1:
        while rest % f == 0:
            factors.append(f)
            rest //= f
        f += 1
    for p in sorted(factors, reverse=True):
        i = min(range(n_atoms), key=lambda j: shares[j])
        shares[i] *= p
    return shares


class ViewRouter:
    """Routing of one view's base-table changes to ``shards`` engines."""

    def __init__(self, d: ViewDef, schema: dict[str, dict[str, str]], shards: int):
        sql, tables = rewrite_per_atom(d.select_sql)
        self.shards = shards
        self.atom_schema = {atom_table(i, t): dict(schema[t]) for i, t in enumerate(tables)}
        view = compile_view(sql, self.atom_schema, dialect="postgres")
        gcq = view.plan.gcq
        if gcq.distinct or gcq.aggregate is not None:
            raise IVMError(f"view {d.name}: DISTINCT and aggregate views cannot be split over "
                           "shards yet; run it with --shards 1")
        self.defn = ViewDef(d.name, sql, d.materialized, list(self.atom_schema))
        atoms = gcq.atoms
        common = set.intersection(*(set(a.varset) for a in atoms)) if atoms else set()
        self.mode = "hash" if common and shards > 1 else "grid"
        self.by_table: dict[str, list[tuple[str, object]]] = {}
        shares = grid_shares(len(atoms), shards)
        strides, s = [], 1
        for p in shares:
            strides.append(s)
            s *= p
        self.shares = shares
        for i, a in enumerate(atoms):
            base = a.relation.split("_", 2)[2]
            if self.mode == "hash":
                pos = [a.vars.index(v) for v in sorted(common)]
                spec = ("hash", pos)
            else:
                others = [c for c in range(shards) if (c // strides[i]) % shares[i] == 0]
                spec = ("grid", (shares[i], strides[i], others))
            self.by_table.setdefault(base, []).append((a.relation, spec))
        #: an output row tells its shard (it holds the hashed columns): the shards' changes
        #: are disjoint and their union needs no consolidation
        out = list(gcq.output or [])
        plain = bool(out) and all(isinstance(o, str) for o in out)
        if self.mode == "hash":
            self.disjoint = plain and common <= set(out)
        else:
            self.disjoint = plain and all(
                set(a.vars) <= set(out) and len(a.vars) == len(self.atom_schema[a.relation])
                for a, p in zip(atoms, shares) if p > 1)

    def route(self, table: str, row: tuple | None) -> Iterator[tuple[int, str]]:
        """``(shard, atom table)`` pairs a change of ``table`` goes to (``row is None``: a
        TRUNCATE, which goes everywhere the table is)."""
        for atab, (kind, arg) in self.by_table.get(table, ()):
            if row is None:
                for s in range(self.shards):
                    yield s, atab
            elif kind == "hash":
                yield stable_hash(row[p] for p in arg) % self.shards, atab
            else:
                share, stride, others = arg
                coord = stable_hash(row) % share
                for base_cell in others:
                    yield base_cell + coord * stride, atab
