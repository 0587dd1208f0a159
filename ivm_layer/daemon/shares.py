"""Shares over a join's variables (Afrati–Ullman *Shares*, Beame–Koutris–Suciu *HyperCube*):
how ``--shards N`` splits one view's join so that every result row is produced on exactly
one shard. Pure Python (no Spark, no engine): the planner of :mod:`.routing`.

The N shards are the cells of a grid whose dimensions are

- the view's **equality variables** (a column variable shared by two or more atoms:
  ``r.k = s.k``): a row's coordinate on such a dimension is a hash of its value of the
  variable, so rows that join agree on it;
- one **row dimension per atom** (``#i``): the coordinate is a hash of the whole row; it
  splits an atom that shares no hashed variable with the others (inequality-only joins,
  cross products): that atom is partitioned, the others are replicated along the dimension.

Each dimension ``d`` gets a share ``p_d`` with ``∏ p_d = N``. A row of atom ``i`` has one
coordinate on every dimension it carries (its hashed variables, its own row dimension) and
is **replicated** to every cell on the other dimensions: ``N / ∏_{d ∈ i} p_d`` copies. A
join result fixes every coordinate (each variable has one value, each atom one row), so it
is produced in exactly one cell. An atom that carries no dimension with a share above 1
(a small table) is replicated to all N shards.

The shares minimise the rows routed, ``Σ_i |R_i| · N / ∏_{d ∈ i} p_d`` (the total
communication of Shares; the per-shard load is that total over N), over all factorisations
of N into the dimensions — a few thousand at most for N ≤ 64. Ties go to fewer split
dimensions, then to variables over row dimensions. Table sizes are estimates taken when a
checkpoint starts; the chosen plan is recorded with the checkpoint (:func:`plan_json`) so a
restart routes exactly as before even when the tables' sizes changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import IVMError

MAX_SHARDS = 4096


def row_dim(i: int) -> str:
    """The name of atom ``i``'s row dimension."""
    return f"#{i}"


def equality_variables(atom_vars: Sequence[frozenset[str]]) -> list[str]:
    """Variables carried by two or more atoms (sorted: the plan must not depend on set order)."""
    seen: dict[str, int] = {}
    for vs in atom_vars:
        for v in vs:
            seen[v] = seen.get(v, 0) + 1
    return sorted(v for v, n in seen.items() if n >= 2)


def _factorisations(n: int, dims: int):
    """Every ordered tuple of ``dims`` positive integers whose product is ``n``."""
    if dims == 1:
        yield (n,)
        return
    for p in range(1, n + 1):
        if n % p == 0:
            for rest in _factorisations(n // p, dims - 1):
                yield (p, *rest)


def routed_rows(atom_vars: Sequence[frozenset[str]], sizes: Sequence[float], shares: dict[str, int],
                n: int) -> float:
    """The rows sent to the shards when every atom's table holds ``sizes[i]`` rows."""
    total = 0.0
    for i, (vs, size) in enumerate(zip(atom_vars, sizes)):
        own = shares.get(row_dim(i), 1)
        for v in vs:
            own *= shares.get(v, 1)
        total += size * n / own
    return total


def choose_shares(atom_vars: Sequence[frozenset[str]], sizes: Sequence[float], n: int) -> dict[str, int]:
    """The shares (dimension → share, only those above 1) that route the fewest rows."""
    if n < 1 or n > MAX_SHARDS:
        raise IVMError(f"--shards must be between 1 and {MAX_SHARDS}, got {n}")
    if n == 1 or not atom_vars:
        return {}
    eq = equality_variables(atom_vars)
    dims = eq + [row_dim(i) for i in range(len(atom_vars))]
    sizes = [max(1.0, float(s)) for s in sizes]   # empty tables still need a plan that splits
    best, best_key = None, None
    for combo in _factorisations(n, len(dims)):
        shares = {d: p for d, p in zip(dims, combo) if p > 1}
        cost = routed_rows(atom_vars, sizes, shares, n)
        split_rows = sum(1 for d in shares if d.startswith("#"))
        # fewest rows, then fewest split dimensions, then variables before row dimensions,
        # then larger shares on earlier dimensions (deterministic)
        key = (round(cost, 6), len(shares), split_rows, tuple(-p for p in combo))
        if best_key is None or key < best_key:
            best, best_key = shares, key
    return dict(best or {})


def describe(atom_names: Sequence[str], atom_vars: Sequence[frozenset[str]], shares: dict[str, int],
             n: int) -> list[str]:
    """One line per atom: how its rows are routed (``--status`` and the start-up log)."""
    out = []
    for i, (name, vs) in enumerate(zip(atom_names, atom_vars)):
        on = [f"{v} (share {shares[v]})" for v in sorted(vs) if v in shares]
        if row_dim(i) in shares:
            on.append(f"its rows (share {shares[row_dim(i)]})")
        own = 1
        for d in list(vs) + [row_dim(i)]:
            own *= shares.get(d, 1)
        copies = n // own
        if not on:
            out.append(f"{name}: replicated to all {n} shards")
        else:
            how = "hashed on " + ", ".join(on)
            out.append(f"{name}: {how}" + (f", each row replicated to {copies} shards" if copies > 1 else
                                            ", each row on one shard"))
    return out
