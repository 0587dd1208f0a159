"""The runtime node of a T-representation (:class:`RNode`), and :class:`Host`: what the
structures a :class:`~ivm_layer.engine.trep.TRep` builds around its nodes (the derived top
join, the derived chains, the generated enumeration code) read of it. They import this
module, not ``trep``, so the engine's imports stay a tree.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from ..planner.gjt import Node
from .index import Index


class Host(Protocol):
    """The T-representation as its derived structures see it."""

    root: RNode
    count: int  # the view's total multiplicity (the root's ρ)
    leaves: dict
    out_vars: list[str]
    version: int
    virtual: Any  # the derived top join (engine/virtual.py), or None


class RNode:
    """Runtime data of one GJT node.

    ``form`` is the layout of the tuples this node's deltas and indexes carry and ``pos``
    maps variables to positions in it. A *fused* node is a projection (single child): it
    carries its child's tuples unchanged and reads its own variables through ``pos``, so a
    chain leaf → projection costs no extra tuples, dicts or loop levels. Where distinct
    projected tuples matter (the frontier's output, a sibling's probe) the index projects.
    """

    __slots__ = ("node", "id", "form", "pos", "own", "own_pos", "fused", "parent", "children",
                 "sibling", "in_n", "frontier", "is_guard", "filter", "indexes", "appliers", "up",
                 "p_index", "p_key_vars", "p_bounds", "p_resid", "p_check", "enum_pos", "atom",
                 "virtual", "v_index", "v_key", "v_bounds", "p_sort_pos", "chain", "e_bounds", "kchain",
                 "weight", "derived", "step", "p_box")

    def __init__(self, node: Node, form: list[str], fused: bool):
        self.node = node
        self.id = node.id
        self.form = form
        self.pos = {v: i for i, v in enumerate(form)}
        self.own = sorted(node.vars) if not node.is_leaf else list(form)
        self.own_pos = {v: i for i, v in enumerate(self.own)}
        self.fused = fused
        self.parent: RNode | None = None
        self.children: list[RNode] = []
        self.sibling: RNode | None = None
        self.in_n = False
        self.frontier = False
        self.is_guard = False
        self.filter: Callable[[tuple], bool] | None = None
        self.indexes: list[Index] = []
        self.appliers: list = []  # bound Index.apply of self.indexes (hot path)
        self.up: Callable[[dict], dict] | None = None
        self.p_index: Index | None = None  # P_n for enumeration
        self.p_key_vars: list[str] = []
        self.p_bounds = None  # f(parent tuple) -> (lo, li, hi, hii) for ordered P_n
        self.p_resid = None  # f(own tuple as enumerated, parent tuple): predicates not covered by the order
        self.p_check = None  # f(delta-form tuple, parent tuple): all edge predicates (delta enumeration)
        self.enum_pos: dict[str, int] = self.pos  # layout of the tuples full enumeration yields
        self.atom: int | None = node.atom
        # The virtual top join (see TRep): on that node, its ``Virtual``; on its children, the
        # sibling's index they probe, their key into it and (non-guard child) its range bounds.
        self.virtual: Any = None  # a Virtual (engine/virtual.py) or None
        self.v_index: Index | None = None
        self.v_key = None
        self.v_bounds = None
        self.p_sort_pos: int | None = None  # position (in ``pos``) of the variable P_n is ordered on
        # A derived lower join (engine/chain.py): on that node, its ``Chain``; ``e_bounds`` is
        # then its full-enumeration range (``p_bounds`` cut to the d's with a partner).
        self.chain: Any = None  # a Chain (engine/chain.py) or None
        self.e_bounds = None
        # A keyed chain with a derived frontier (engine/keyedchain.py): on its frontier node
        # and on the derived top join, its ``KeyedChain``; ``weight`` (on the top of the
        # frontier's fused chain) multiplies the ρ_S read from P_n by the R partners' count.
        self.kchain: Any = None  # a KeyedChain (engine/keyedchain.py) or None
        self.weight = None
        # The update of the structure that derives this node's ρ from its children's (its
        # KeyedChain, Virtual or Chain, in that order), bound once the TRep is built.
        self.derived: Any = None
        # How ``up`` was built, for generated update code (engine/updgen.py): ("fused", filter),
        # ("project",), ("chain",), ("guard" | "nonguard", sibling index, key variables,
        # predicates the index order covers, predicates checked tuple by tuple); None at the root.
        self.step: Any = None
        # P_n a multi-level box index (an edge with inequalities on several of n's variables,
        # engine/boxgroup.py): f(parent tuple) -> the box, per variable (lo, li, hi, hii)
        self.p_box = None
