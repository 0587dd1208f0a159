"""Maintenance as generated Python source (000 Algorithm 2, compiled per view, table and leaf).

:func:`gen_single` writes, for one input table of a view, the function behind
``view.insert`` / ``view.delete``: the checks of the general path (row shape, NaN's canonical
form, the stored rows, value kinds, filters — an :class:`UpdateError` before anything changes),
the table's store, then for each of the table's leaves the propagation along that leaf's path
to the root with the plan inlined — keys, contents and projections as direct tuple indexing,
one group operation per index on the path (``add``; a one-sided range sum as one call:
``below``/``upto``/``above``/``atleast``), the derived top join's per-key counts — with no
per-node dispatch and no delta dicts. A step that fans out (a non-guard child) becomes a loop
and the rest of the path runs inside it, tuple by tuple: Algorithm 2 is linear in Δ and a
path reads only nodes off the path, so this is the same update. Inside such a loop, a group
with the constant key ``()`` is looked up once before it: a sibling's (read; nothing on the
path writes it) and, when no opaque derived update runs in the body, the path's own (written:
the loop keeps its variable in step when it creates or drops the group). :func:`gen_path` writes the
propagation of a leaf's batch delta ``{t: d}`` the same way.

Steps without inline code (the derived chains of engine/chain.py and engine/keyedchain.py,
the chain's ``t_up``) are called through their own update functions, still without the
generic loop. :func:`compile_enabled` reads ``IVM_COMPILE`` (``0`` switches generated code
off; the interpreter, ``TRep.propagate``, is the reference).

Cost: generating and compiling the source once per (view, table) at its first update, about
a millisecond; afterwards an update costs its data-structure operations and one Python call
per group it touches.
"""

from __future__ import annotations

import os
from decimal import Decimal
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable

from ..errors import UpdateError
from .boxgroup import BoxGroup
from .groups import HashGroup, OrderedGroup
from .leaves import bad_row
from .predicates import (
    RANGE_SUM,
    bound_source,
    bounds_lines,
    box_vars,
    compile_bounds,
    compile_box_bounds,
    compile_cross_check,
    key_expr,
    range_args_source,
)
from .values import canonical_row

if TYPE_CHECKING:
    from .rnode import RNode


def compile_enabled() -> bool:
    """Generated update code is on unless the environment says ``IVM_COMPILE=0``."""
    return os.environ.get("IVM_COMPILE", "1").strip() not in ("0", "false", "no", "off")


class NotCompiled(Exception):
    """A plan shape the generator does not cover (the caller keeps the interpreter and says so)."""


def tuple_source(names: list[str], pos: dict[str, int], tvar: str, width: int | None = None) -> str:
    """Source of the tuple of ``names`` read from ``tvar`` (laid out by ``pos``); ``tvar``
    itself when that is the same tuple (``width``: its length, when known)."""
    idx = [pos[v] for v in names]
    if width is not None and idx == list(range(width)):
        return tvar
    if not idx:
        return "()"
    return "(" + "".join(f"{tvar}[{i}], " for i in idx) + ")"


def _chain_items(buckets: Any) -> Any:
    """``(tuple, multiplicity)`` of every bucket, in order, iterated at C speed."""
    return chain.from_iterable(map(dict.items, buckets))


def _acc_rec(rec: dict, nid: int, t: tuple, d: Any) -> None:
    """``rec[nid][t] += d`` (a zero sum stays: it marks a touched tuple, as the interpreter's)."""
    r = rec.get(nid)
    if r is None:
        rec[nid] = {t: d}
    else:
        r[t] = r.get(t, 0) + d


def _merge_rec(rec: dict, part: dict) -> None:
    """Add the deltas recorded by one call of a derived structure to ``rec``."""
    for nid, delta in part.items():
        r = rec.get(nid)
        if r is None:
            rec[nid] = dict(delta)
        else:
            for t, d in delta.items():
                r[t] = r.get(t, 0) + d


def _filter_error(row: tuple, alias: str, e: Exception) -> UpdateError:
    return UpdateError(f"row {row!r} of {alias}: a filter cannot compare its values ({e}); "
                       "no change was applied")


class _Gen:
    """Source lines and the namespace they read (objects named once each)."""

    def __init__(self, trep: Any) -> None:
        self.trep = trep
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {"TREP": trep, "UpdateError": UpdateError,
                                   "chain_items": _chain_items, "acc_rec": _acc_rec, "merge_rec": _merge_rec}
        self._names: dict[int, str] = {}
        self._count = 0
        self.touched: list[str] = []  # what the path reaches, for introspection
        # Per open fan-out loop: the per-key count updates with a constant key deferred to
        # after the loop as one sum ``(accumulator, counts, key)``.
        self.deferred: list[list[tuple[str, str, str]]] = []
        # Per open fan-out loop: lines run once before it — the lookups of constant-key ()
        # groups the loop body reads off the path (siblings' indexes: no step of this path
        # writes them) or writes on it (no opaque derived update in the body, see ``loop_writes``).
        self.hoisted: list[list[str]] = []
        self.loop_writes: list[bool] = []
        # Record mode (delta enumeration after the update): the deltas of the nodes in N go to
        # ``rec`` ({node id: {tuple: Δ}}, accumulated tuple by tuple) and ``reached`` says
        # whether the change reached the root (TRep.propagate's result).
        self.record = False

    def ref(self, obj: Any, prefix: str) -> str:
        name = self._names.get(id(obj))
        if name is None:
            name = f"{prefix}{len(self._names)}"
            self._names[id(obj)] = name
            self.ns[name] = obj
        return name

    def const(self, c: Any) -> str:
        return self.ref(c, "K")

    def var(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def emit(self, ind: int, line: str) -> None:
        self.lines.append(" " * ind + line)

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"

    # -- group reads --------------------------------------------------------------------
    def bounds(self, on: list, pos: dict[str, int], tv: str, ind: int) -> str:
        """Emit the range of several predicates on one order inline where it can (else call
        the compiled closure); returns the source of its four arguments."""
        out = self.var("b")
        lines = bounds_lines(on, pos, tv, self.const, out)
        if lines is None:
            return f"*{self.ref(compile_bounds(on, pos), 'B')}({tv})"
        for line in lines:
            self.emit(ind, line)
        return f"{out}lo, {out}li, {out}hi, {out}hii"

    def range_sum(self, g: str, on: list, pos: dict[str, int], tv: str, ind: int) -> str:
        """Source of the sum of ``g``'s weights inside the range ``on`` admits for ``tv``."""
        if not on:
            return f"{g}.total"
        src = bound_source(on, pos, tv, self.const)
        if src is None:
            return f"{g}.range_sum({self.bounds(on, pos, tv, ind)})"
        op, x = src
        if op in RANGE_SUM:
            return f"{g}.{RANGE_SUM[op]}({x})"
        return f"{g}.range_sum({range_args_source(op, x)})"

    def range_items(self, g: str, on: list, pos: dict[str, int], tv: str, ind: int) -> str:
        """Source iterating ``(tuple, multiplicity)`` of ``g`` inside the range of ``on``."""
        if not on:
            return f"{g}.items()"
        src = bound_source(on, pos, tv, self.const)
        # the buckets of the range at C speed (no generator frame per tuple)
        if src is None:
            return f"chain_items({g}.buckets_in({self.bounds(on, pos, tv, ind)}))"
        return f"chain_items({g}.buckets_in({range_args_source(*src)}))"

    def group_sum(self, idx: Any, key_vars: list[str], on: list, rest: list, pos: dict[str, int],
                  other_pos: dict[str, int], tv: str, ind: int) -> tuple[str, int]:
        """``s = Σ ρ(u)`` over the sibling group of ``tv`` (predicates ``on`` by the order, ``rest``
        tuple by tuple); returns ``s`` and the indentation inside ``if s:``."""
        g, s = self.var("g"), self.var("s")
        self.group_get(g, idx.groups, key_vars, pos, tv, ind)
        self.emit(ind, f"if {g} is not None:")
        ind += 4
        if type(idx.sort_pos) is tuple:  # a multi-level box index: one box sum
            bv = box_vars(on)
            self.emit(ind, f"{s} = {g}.box_sum({self.ref(compile_box_bounds(on, bv, pos), 'BX')}({tv}))")
        elif rest:
            resid = self.ref(compile_cross_check(rest, other_pos, pos), "R")
            u, m = self.var("u"), self.var("m")
            self.emit(ind, f"{s} = 0")
            self.emit(ind, f"for {u}, {m} in {self.range_items(g, on, pos, tv, ind)}:")
            self.emit(ind + 4, f"if {resid}({u}, {tv}): {s} += {m}")
        else:
            self.emit(ind, f"{s} = {self.range_sum(g, on, pos, tv, ind)}")
        self.emit(ind, f"if {s}:")
        return s, ind + 4

    def group_get(self, g: str, groups: dict, key_vars: list[str], pos: dict[str, int], tv: str,
                  ind: int) -> None:
        """``g = groups.get(key)`` of a group read off the path: before the innermost fan-out
        loop when the key is constant (``()``), else here."""
        line = f"{g} = {self.ref(groups, 'G')}.get({key_expr(key_vars, pos, tv)})"
        if not key_vars and self.hoisted:
            self.hoisted[-1].append(line)
        else:
            self.emit(ind, line)

    # -- one node's own structures ------------------------------------------------------
    def indexes(self, n: RNode, tv: str, dv: str, ind: int) -> None:
        """The group operations of n's indexes (and the derived chain's axis feeds)."""
        feeds = self._feeds(n, tv, dv)
        if len(n.appliers) != len(n.indexes) + len(feeds):
            raise NotCompiled(f"node {n.id} has appliers the generator does not know")
        for idx in n.indexes:
            _, key_vars, content_vars, _ = idx.spec
            groups = self.ref(idx.groups, "G")
            sp = idx.sort_pos
            new = self.ref(HashGroup.of if sp is None else partial(
                BoxGroup.of if type(sp) is tuple else OrderedGroup.of, sp), "NEW")
            i = ind
            c = tv
            if content_vars is not None:
                c = self.var("c")
                self.emit(i, f"{c} = {tuple_source(list(content_vars), n.pos, tv, len(n.form))}")
            if idx.content_filter is not None:
                self.emit(i, f"if {self.ref(idx.content_filter, 'F')}({c}):")
                i += 4
            kv, g = self.var("k"), self.var("g")
            if not key_vars and self.hoisted and self.loop_writes[-1]:
                # one group for the whole fan-out: looked up once before the loop, kept in step
                self.hoisted[-1].append(f"{g} = {groups}.get(())")
                self.emit(i, f"if {g} is None: {g} = {groups}[()] = {new}({c}, {dv})")
                self.emit(i, f"elif not {g}.add({c}, {dv}) and not len({g}): del {groups}[()]; {g} = None")
            else:
                self.emit(i, f"{kv} = {key_expr(list(key_vars), n.pos, tv)}")
                self.emit(i, f"{g} = {groups}.get({kv})")
                self.emit(i, f"if {g} is None: {groups}[{kv}] = {new}({c}, {dv})")
                self.emit(i, f"elif not {g}.add({c}, {dv}) and not len({g}): del {groups}[{kv}]")
            self.touched.append(f"index {idx.spec[0]}:{'/'.join(key_vars) or '()'}")
        for line in feeds:
            self.emit(ind, line)

    def _feeds(self, n: RNode, tv: str, dv: str) -> list[str]:
        c = self.trep.chain
        if c is None:
            return []
        add = self.ref(c.axis.add, "AX")
        if n is c.mr:
            return [f"{add}(0, {self.ref(c.x_key, 'XK')}({tv}), {dv})"]
        if n is c.gs:
            return [f"{add}(1, ({tv}[{c.y_pos}], 1), {dv})"]
        if n is c.gt:
            return [f"{add}(2, {self.ref(c.z_key, 'ZK')}({tv}), {dv})"]
        return []

    # -- the path -----------------------------------------------------------------------
    def path(self, n: RNode, tv: str, dv: str, ind: int, own: bool = True) -> None:
        """Propagate the single tuple ``tv`` with multiplicity change ``dv`` from n to the root
        (``own``: n's own indexes too; False when they already hold the change)."""
        if own:
            self.indexes(n, tv, dv, ind)
        if self.record and n.in_n:
            self.emit(ind, f"acc_rec(rec, {n.id}, {tv}, {dv})")
        p = n.parent
        if p is None:  # the root: its one tuple () carries the view's count
            self.emit(ind, f"TREP.count += {dv}")
            if self.record:
                self.emit(ind, "reached = True")
            return
        if p.derived is not None and self.record:
            # the derived structure's own update, recording into a fresh dict merged into rec
            lrec = self.var("r")
            self.emit(ind, f"{lrec} = {{}}")
            self.emit(ind, f"if {self.ref(p.derived, 'DER')}({self.ref(n, 'N')}, {{{tv}: {dv}}}, {lrec}): reached = True")
            self.emit(ind, f"merge_rec(rec, {lrec})")
            self.touched.append(f"derived {type(p.derived.__self__).__name__}")
            return
        if p.derived is not None:
            v = p.virtual
            c = p.chain
            if v is not None and p.kchain is None and p.derived == v.update:
                self.virtual(v, n, tv, dv, ind)
            elif c is not None and p.derived == c.update and n is c.mr:
                # R under the derived chain: the view's count changes by its pairs on the axis
                w = self.var("w")
                self.touched.append("derived chain")
                self.emit(ind, f"{w} = {dv} * {self.ref(c, 'CH')}.pairs_r({tv})")
                self.emit(ind, f"if {w}:")
                self._count_update(self.ref(c.v.counts, "VC"), "()", w, ind + 4)
            elif c is not None and p.derived == c.update and n is c.gs and n.step[0] == "guard":
                # S under the derived chain: Algorithm 2's two range sums (to p1, then the top join)
                _, idx, key_vars, on, rest = n.step
                s, ind = self.group_sum(idx, key_vars, on, rest, n.pos, n.sibling.pos, tv, ind)
                pt, d2 = self.var("t"), self.var("d")
                self.emit(ind, f"{pt} = {tuple_source(p.form, n.pos, tv, len(n.form))}")
                self.emit(ind, f"{d2} = {dv} * {s}")
                self.touched.append("derived chain")
                self.virtual(c.v, p, pt, d2, ind)
            else:  # a derived chain: its own update (engine/chain.py, engine/keyedchain.py)
                self.emit(ind, f"{self.ref(p.derived, 'DER')}({self.ref(n, 'N')}, {{{tv}: {dv}}}, None)")
                self.touched.append(f"derived {type(p.derived.__self__).__name__}")
            return
        step = n.step
        kind = step[0] if step is not None else None
        if kind == "fused":
            if step[1] is not None:
                self.emit(ind, f"if {self.ref(step[1], 'F')}({tv}):")
                ind += 4
            self.path(p, tv, dv, ind)
        elif kind == "project":
            pt = self.var("t")
            self.emit(ind, f"{pt} = {tuple_source(p.form, n.pos, tv, len(n.form))}")
            if p.filter is not None:
                self.emit(ind, f"if {self.ref(p.filter, 'F')}({pt}):")
                ind += 4
            self.path(p, pt, dv, ind)
        elif kind == "guard":
            _, idx, key_vars, on, rest = step
            s, ind = self.group_sum(idx, key_vars, on, rest, n.pos, n.sibling.pos, tv, ind)
            pt, d2 = self.var("t"), self.var("d")
            self.emit(ind, f"{pt} = {tuple_source(p.form, n.pos, tv, len(n.form))}")
            if p.filter is not None:
                self.emit(ind, f"if {self.ref(p.filter, 'F')}({pt}):")
                ind += 4
            self.emit(ind, f"{d2} = {dv} * {s}")
            self.path(p, pt, d2, ind)
        elif kind == "nonguard":
            _, idx, key_vars, on, rest = step
            g, u, m, d2 = self.var("g"), self.var("u"), self.var("m"), self.var("d")
            self.emit(ind, f"{g} = {self.ref(idx.groups, 'G')}.get({key_expr(key_vars, n.pos, tv)})")
            self.emit(ind, f"if {g} is not None:")
            start = len(self.lines)
            if type(idx.sort_pos) is tuple:  # a multi-level box index: the box's tuples
                bx = self.ref(compile_box_bounds(on, box_vars(on), n.pos), "BX")
                self.emit(ind + 4, f"for {u}, {m} in {g}.box_items({bx}({tv})):")
            else:
                self.emit(ind + 4, f"for {u}, {m} in {self.range_items(g, on, n.pos, tv, ind + 4)}:")
            body = ind + 8
            if rest:
                self.emit(body, f"if not {self.ref(compile_cross_check(rest, p.pos, n.pos), 'R')}({u}, {tv}): continue")
            self.emit(body, f"{d2} = {dv} * {m}")
            self.touched.append(f"fan-out at node {n.id}")
            self.deferred.append([])
            self.hoisted.append([])
            self.loop_writes.append(not self.opaque_above(p))
            self.path(p, u, d2, body)
            self.loop_writes.pop()
            for line in self.hoisted.pop():
                self.lines.insert(start, " " * (ind + 4) + line)
            for acc, counts, key in self.deferred.pop():
                self.lines.insert(start, " " * (ind + 4) + f"{acc} = 0")
                self.emit(ind + 4, f"if {acc}:")
                self._count_update(counts, key, acc, ind + 8)
        elif n.up is not None:  # another step: its closure, once per parent tuple it yields
            pt, d2 = self.var("t"), self.var("d")
            self.emit(ind, f"for {pt}, {d2} in {self.ref(n.up, 'UP')}({{{tv}: {dv}}}).items():")
            self.emit(ind + 4, f"if not {d2}: continue")
            self.path(p, pt, d2, ind + 4)
        else:
            raise NotCompiled(f"node {n.id} has no step to its parent")

    def opaque_above(self, n: RNode) -> bool:
        """Does the path from n to the root call a derived structure's own update (which
        may write indexes the generated lines do not see)?"""
        while n.parent is not None:
            p = n.parent
            if p.derived is not None:
                if self.record:
                    return True
                v, c = p.virtual, p.chain
                if v is not None and p.kchain is None and p.derived == v.update:
                    return False
                if c is not None and p.derived == c.update and (
                        n is c.mr or (n is c.gs and n.step[0] == "guard")):
                    return False
                return True
            n = p
        return False

    def virtual(self, v: Any, n: RNode, tv: str, dv: str, ind: int) -> None:
        """:meth:`Virtual.update` for one tuple of child n: the per-key count and the view's."""
        counts = self.ref(v.counts, "VC")
        self.touched.append("derived join")
        step = n.step
        if n is v.g and step[0] == "guard":
            _, idx, key_vars, on, rest = step
            s, ind = self.group_sum(idx, key_vars, on, rest, n.pos, n.sibling.pos, tv, ind)
            if v.p.filter is not None:
                pt = self.var("t")
                self.emit(ind, f"{pt} = {tuple_source(v.p.form, n.pos, tv, len(n.form))}")
                self.emit(ind, f"if {self.ref(v.p.filter, 'F')}({pt}):")
                ind += 4
            if not key_vars and self.deferred and v.p.filter is None:  # inside a fan-out: one update after it
                acc = self.var("acc")
                self.deferred[-1].append((acc, counts, "()"))
                self.emit(ind, f"{acc} += {dv} * {s}")
                return
            w = self.var("w")
            self.emit(ind, f"{w} = {dv} * {s}")
            self._count_update(counts, key_expr(key_vars, n.pos, tv), w, ind)
        elif n is v.g and v.chain is not None and v.p.filter is None:
            # T under a derived chain: its step is the chain's pair count
            s, w = self.var("s"), self.var("w")
            self.emit(ind, f"{s} = {self.ref(v.chain, 'CH')}.pairs_t({tv})")
            self.emit(ind, f"if {s}:")
            self.emit(ind + 4, f"{w} = {dv} * {s}")
            self._count_update(counts, "()", w, ind + 4)
        elif n is v.g:
            pt, w = self.var("t"), self.var("w")
            self.emit(ind, f"for {pt}, {w} in {self.ref(n.up, 'UP')}({{{tv}: {dv}}}).items():")
            self.emit(ind + 4, f"if not {w}: continue")
            self._count_update(counts, f"{self.ref(v.p_key, 'PK')}({pt})", w, ind + 4)
        else:  # the non-guard side: one range sum over g's projected group
            if step is None or step[0] != "nonguard":
                raise NotCompiled("the derived join's non-guard child has no non-guard step")
            _, idx, key_vars, on, rest = step
            if rest:
                raise NotCompiled("the derived join's edge has predicates outside its order")

            g, w, w2 = self.var("g"), self.var("w"), self.var("w")
            kv = self.var("k")
            if key_vars or not self.hoisted:
                self.emit(ind, f"{kv} = {key_expr(key_vars, n.pos, tv)}")
            self.group_get(g, v.g_groups, key_vars, n.pos, tv, ind)
            self.emit(ind, f"if {g} is not None:")
            if type(idx.sort_pos) is tuple:  # several variables compared: one box sum
                bx = self.ref(compile_box_bounds(on, box_vars(on), n.pos), "BX")
                self.emit(ind + 4, f"{w} = {g}.box_sum({bx}({tv}))")
            else:
                self.emit(ind + 4, f"{w} = {self.range_sum(g, on, n.pos, tv, ind + 4)}")
            self.emit(ind + 4, f"if {w}:")
            if not key_vars and self.deferred:  # inside a fan-out: one count update after it
                acc = self.var("acc")
                self.deferred[-1].append((acc, counts, "()"))
                self.emit(ind + 8, f"{acc} += {dv} * {w}")
                return
            self.emit(ind + 8, f"{w2} = {dv} * {w}")
            self._count_update(counts, kv, w2, ind + 8)

    def _count_update(self, counts: str, key: str, w: str, ind: int) -> None:
        kv, c = self.var("k"), self.var("c")
        self.emit(ind, f"{kv} = {key}")
        self.emit(ind, f"{c} = {counts}.get({kv}, 0) + {w}")
        self.emit(ind, f"if {c}: {counts}[{kv}] = {c}")
        self.emit(ind, f"else: del {counts}[{kv}]")
        self.emit(ind, f"TREP.count += {w}")



def emit_leaf_tuple(gen: _Gen, ex: Any, ind: int) -> str:
    """Emit ``t = the leaf tuple of row, or None`` for extractor ``ex`` (raising UpdateError
    on a value of the wrong kind or a filter that cannot compare; first-seen kinds go to
    ``pending``). Same checks and order as :meth:`LeafExtractor.leaf_tuple`."""
    t = gen.var("t")
    pos = ex.positions
    conds = [f"row[{i}] is not None and not (row[{i}] != row[{j}])" for i, j in ex.eqs]
    conds += [f"row[{pos[i]}] is not None" for i in ex.strict]
    gen.emit(ind, f"{t} = None")
    if conds:
        gen.emit(ind, "if " + " and ".join(conds) + ":")
        ind += 4
    gen.emit(ind, f"{t} = {_leaf_src(pos, ex.arity)}")
    if ex.ordered:
        kinds_get = gen.ref(ex.kinds.get, "KG")
        fast = []
        for i, v, c in ex.ordered:
            if v in ex.temporal:
                fast = None
                break
            fast.append(f"type({t}[{i}]) is int and {kinds_get}({gen.const(c)}) == 'number'")
        check = gen.ref(ex.check_kinds, "KC")
        gen.emit(ind, "if True:" if fast is None else "if not (" + " and ".join(fast) + "):")
        gen.emit(ind + 4, "if pending is None: pending = {}")
        gen.emit(ind + 4, f"{check}({t}, pending)")
    if ex.filter is not None:
        gen.ns["_filter_error"] = _filter_error
        gen.emit(ind, "try:")
        gen.emit(ind + 4, f"if not {gen.ref(ex.filter, 'F')}({t}): {t} = None")
        gen.emit(ind, "except TypeError as e:")
        gen.emit(ind + 4, f"raise _filter_error(row, {gen.const(ex.alias)}, e) from None")
    return t


def _leaf_src(pos: list[int], arity: int) -> str:
    if pos == list(range(arity)):
        return "row"  # the leaf tuple is the row itself: one object for the store and the indexes
    return "(" + "".join(f"row[{p}], " for p in pos) + ")"


def gen_single(trep: Any, name: str, arity: int, store: dict, extractors: list, kinds: dict,
               subscribers: list, generic: Callable[[tuple, int], bool],
               core: tuple | None = None) -> tuple[str, dict, list[str]]:
    """Source of ``upd(row, k) -> bool`` for one table (see the module docstring): False
    defers a row that is not a tuple to the caller's general path; with subscribers, the
    generic single-row path ``generic(row, k)`` runs instead. ``core``: ``(core TRep, the
    core's extractors of this table, its recording paths per atom, the extractor of the core
    relation's rows in this view)`` when the table also feeds a materialized cyclic core:
    the core's change (delta enumeration) then updates this view's core leaf, as
    ``View._commit`` does. Returns (source, namespace, what the paths touch). Raises
    :class:`NotCompiled` for a plan it does not cover."""
    gen = _Gen(trep)
    ns = gen.ns
    ns.update(STORE=store, STORE_GET=store.get, ARITY=arity, NAME=name, SUBS=subscribers, GENERIC=generic,
              BAD_ROW=bad_row, CANON=canonical_row, FD=frozenset((float, Decimal)),
              KINDS_UPDATE=kinds.update)
    e = gen.emit
    e(0, "def upd(row, k):")
    e(4, "if type(row) is not tuple: return False")
    e(4, "if SUBS: return GENERIC(row, k)")
    e(4, "if len(row) != ARITY: raise BAD_ROW(NAME, row, ARITY)")
    e(4, "if " + " or ".join(f"type(row[{i}]) in FD" for i in range(arity)) + ": row = CANON(row)"
      if arity else "pass")
    e(4, "try:")
    e(8, "have = STORE_GET(row, 0)")
    e(4, "except TypeError:")
    e(8, "raise UpdateError(f'row {row!r} has an unhashable value; no change was applied') from None")
    e(4, "nk = have + k")
    e(4, "if nk < 0:")
    e(8, "raise UpdateError(f'cannot delete {row!r} from {NAME!r}: it is not present; no change was applied')")
    e(4, "pending = None")
    leaves = [(ex, emit_leaf_tuple(gen, ex, 4)) for ex in extractors]
    core_leaves = [(ex, emit_leaf_tuple(gen, ex, 4)) for ex in core[1]] if core is not None else []
    e(4, "if pending: KINDS_UPDATE(pending)")
    e(4, "if nk: STORE[row] = nk")
    e(4, "else: del STORE[row]")
    # Self-joins: one leaf at a time, each fully propagated (ALGORITHMS.md §4).
    for ex, t in leaves:
        e(4, f"if {t} is not None:")
        gen.path(trep.leaves[ex.atom], t, "k", 8)
    if core is not None:
        ctrep, _, cpaths, cex = core
        ns.update(CTREP=ctrep, CDELTA=ctrep.delta_rows, CTUPLE=cex.tuple_of)
        e(4, "ch = {}")
        for ex, t in core_leaves:  # the core's own commit: its change by delta enumeration
            fn = cpaths(ex.atom)
            if fn is None:
                raise NotCompiled(f"the core's leaf {ex.alias} has no generated path")
            cp = gen.ref(fn, "CPATH")
            e(4, f"if {t} is not None:")
            e(8, "rec = {}")
            e(8, f"if {cp}({{{t}: k}}, rec):")
            e(12, f"for r, m in CDELTA({ex.atom}, rec): ch[r] = ch.get(r, 0) + m")
        e(4, "CTREP.version += 1")
        e(4, "for r, m in ch.items():")
        e(8, "if m:")
        e(12, "t = CTUPLE(r)")
        e(12, "if t is not None:")
        gen.touched.append("core change")
        gen.path(trep.leaves[cex.atom], "t", "m", 16)
    e(4, "TREP.version += 1")
    e(4, "if TREP.open_buffers: TREP.bump()")  # open rows() iterators: their next step raises
    e(4, "return True")
    return gen.source(), ns, gen.touched


def gen_path(trep: Any, atom: int, sweep_min: int, interpreter: Callable,
             record: bool = False) -> tuple[str, dict, list[str]]:
    """Source of ``path(delta)``: leaf ``atom``'s batch delta ``{t: d}`` propagated tuple by
    tuple (see the module docstring). A path with an ordered fan-out keeps the interpreter's
    sorted sweep (000 Thm. 2) for a delta of ``sweep_min`` tuples or more:
    ``interpreter(atom, delta)`` then runs instead. With ``record``: ``path(delta, rec)``
    fills ``rec`` as ``TRep.propagate(atom, delta, rec)`` does and returns its result.
    Raises :class:`NotCompiled`."""
    gen = _Gen(trep)
    gen.record = record
    gen.ns.update(PROPAGATE=interpreter)
    leaf = trep.leaves[atom]
    gen.emit(0, "def path(delta, rec):" if record else "def path(delta):")
    n = leaf
    sweeps = False
    while n.parent is not None and n.parent.derived is None:
        if n.step is not None and n.step[0] == "nonguard" and n.step[3] and not n.step[4]:
            sweeps = True
        n = n.parent
    if record:
        if sweeps:
            gen.emit(4, f"if len(delta) >= {int(sweep_min)}: return PROPAGATE({atom}, delta, rec)")
        gen.emit(4, "reached = False")
    elif sweeps:
        gen.emit(4, f"if len(delta) >= {int(sweep_min)}: return PROPAGATE({atom}, delta)")
    gen.emit(4, "for t, d in delta.items():")
    gen.emit(8, "if not d: continue")
    gen.path(leaf, "t", "d", 8)
    if record:
        gen.emit(4, "return reached")
    return gen.source(), gen.ns, gen.touched


def gen_rest(trep: Any, node: RNode, own: bool) -> tuple[str, dict, list[str]]:
    """Source of ``rest(delta)``: a delta of ``node`` propagated from node upwards, tuple by
    tuple (``own``: node's indexes and feeds too; False when the bulk path built them)."""
    gen = _Gen(trep)
    gen.emit(0, "def rest(delta):")
    gen.emit(4, "for t, d in delta.items():")
    gen.emit(8, "if not d: continue")
    gen.path(node, "t", "d", 8, own=own)
    return gen.source(), gen.ns, gen.touched


def build(src: str, ns: dict, fn: str, label: str) -> Callable:
    """Compile generated source and return its function ``fn``."""
    exec(compile(src, f"<ivm {label}>", "exec"), ns)
    return ns[fn]
