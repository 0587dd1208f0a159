"""Which code runs each update path of one view: generated or interpreted, built once and kept.

:class:`UpdateCode` holds, per view, the single-row update of each input table (behind
``View.insert``/``View.delete``), the batch propagation of each leaf (with and without
recording the deltas ``diff()`` and subscribers read) and the bulk path's hand-overs. Each is
built at its first use: generated source (engine/updgen.py) where the generator covers the
plan, the interpreter (:meth:`TRep.propagate`, :func:`single_generic`) where it does not or
under ``IVM_COMPILE=0``; ``notes`` says which ran and why (``View.update_paths()``).

Cost: a dict lookup per update once a path is built; building one costs generating and
compiling its source (about a millisecond), once per view, table and leaf.
"""

from __future__ import annotations

from typing import Any, Callable

from ..identifiers import resolve
from ..errors import UpdateError
from .bulk import BULK_MIN
from .bulk import propagate as bulk_propagate
from .leaves import bad_row
from .wiring import sweep_min
from .updgen import NotCompiled, build, compile_enabled, gen_path, gen_rest, gen_single
from .values import canonical_row

MISSING = object()


class UpdateCode:
    """The update code of one view (see the module docstring). Built from the view's state,
    which it shares, not copies: ``trep``, the base-table ``stores`` and leaf ``extractors``
    per table, each table's ``arity``, the value ``kinds`` first seen, the view's
    ``subscribers``; ``aliases`` of its atoms (for the notes); ``payload_free`` when the view
    keeps no materialized result and no ring payloads; ``core`` the UpdateCode of a
    materialized cyclic core (``core_extractor`` reads the core's rows into this view's core
    leaf); ``general(table, {row: k})`` the view's full two-phase update of one row."""

    def __init__(self, trep: Any, stores: dict, extractors: dict, arity: dict, kinds: dict,
                 subscribers: list, aliases: list[str], payload_free: bool,
                 general: Callable[[str, dict], None], core: UpdateCode | None = None,
                 core_extractor: Any = None) -> None:
        self.trep = trep
        self.stores = stores
        self.extractors = extractors
        self.arity = arity
        self.kinds = kinds
        self.subscribers = subscribers
        self.aliases = aliases
        self.payload_free = payload_free
        self.plain = payload_free and core is None  # fixed when the view is built
        self.general = general
        self.core = core
        self.core_extractor = core_extractor
        self.enabled = compile_enabled()
        self.single: dict[Any, Callable[[Any, int], bool]] = {}  # table spelling -> one-row update
        self.paths: dict[tuple[int, bool], Callable | None] = {}  # (atom, recording) -> leaf path
        self.rests: dict[tuple[int, bool], Callable[[dict], None]] = {}  # the bulk path's hand-overs
        self.notes: dict[str, str] = {}
        self.sources: dict[str, str] = {}

    # -- one row ------------------------------------------------------------------------
    def single_row(self, table: Any, row: Any, k: int) -> bool:
        """Update one row through the table's single-row path (built at its first use);
        False for a table this view does not store itself or a row that is not a tuple
        (the caller's general path then runs)."""
        fn = self.single.get(table)
        if fn is None:
            fn = self.single_fn(table)
            if fn is None:
                return False
            self.single[table] = fn
        return fn(row, k)

    def entry(self, table: Any) -> tuple | None:
        """``(name, stored rows, leaf extractors, arity, plain)`` of a table spelled ``table``
        ("R" for r); None for a name this view does not store itself."""
        name = resolve(table, self.stores) if type(table) is str else table
        store = self.stores.get(name)
        if store is None:
            return None
        return (name, store, tuple(self.extractors.get(name, ())), self.arity[name], self.plain)

    def single_fn(self, table: Any) -> Callable[[Any, int], bool] | None:
        """The single-row update of a table spelled ``table``: generated code, or the generic
        path (:func:`single_generic`) where generation is off or does not apply."""
        entry = self.entry(table)
        if entry is None:
            return None
        name, store, exs, arity, plain = entry

        def generic(row: Any, k: int) -> bool:
            return single_generic(self, entry, row, k)

        label = f"insert/delete {name}"
        if not self.enabled:
            self.notes[label] = "interpreter: IVM_COMPILE=0"
            return generic
        core = None
        c = self.core
        if c is not None and self.payload_free and c.plain:
            core = (c.trep, list(c.extractors.get(name, ())), lambda atom: c.path(atom, True),
                    self.core_extractor)
        elif not plain:
            self.notes[label] = ("interpreter: the view has a materialized result or ring payloads "
                                 "(updates need the delta)")
            return generic
        try:
            src, ns, touched = gen_single(self.trep, name, arity, store, list(exs), self.kinds,
                                          self.subscribers, generic, core)
        except NotCompiled as e:
            self.notes[label] = f"interpreter: {e}"
            return generic
        self.sources[label] = src
        self.notes[label] = "generated: " + (", ".join(dict.fromkeys(touched)) or "the store only")
        return build(src, ns, "upd", f"update {name}")

    # -- a leaf's delta -----------------------------------------------------------------
    def propagate(self, atom: int, delta: dict[tuple, int], change: dict[tuple, int] | None) -> None:
        """Leaf ``atom``'s delta to the root: in bulk for a large one, else by the leaf's
        generated path (or the interpreter); with ``change``, the view's change is added to it."""
        trep = self.trep
        if change is None and len(delta) >= BULK_MIN and self.enabled:
            bulk_propagate(trep, atom, delta, self.rest)
            return
        fn = self.path(atom, change is not None)
        if change is None:
            if fn is not None:
                fn(delta)
            else:
                trep.propagate(atom, delta)
            return
        record: dict[int, dict] = {}
        if fn(delta, record) if fn is not None else trep.propagate(atom, delta, record):
            for row, m in trep.delta_rows(atom, record):
                change[row] = change.get(row, 0) + m

    def path(self, atom: int, record: bool) -> Callable | None:
        """Leaf ``atom``'s generated batch propagation (``record``: also filling the deltas
        delta enumeration reads), or None (the interpreter)."""
        key = (atom, record)
        fn = self.paths.get(key, MISSING)
        if fn is not MISSING:
            return fn
        label = f"{'change of' if record else 'batch'} {self.aliases[atom]}"
        fn = None
        if not self.enabled:
            self.notes[label] = "interpreter: IVM_COMPILE=0"
        else:
            try:
                src, ns, touched = gen_path(self.trep, atom, sweep_min(), self.trep.propagate, record)
            except NotCompiled as e:
                self.notes[label] = f"interpreter: {e}"
            else:
                self.sources[label] = src
                self.notes[label] = "generated: " + ", ".join(dict.fromkeys(touched))
                fn = build(src, ns, "path", f"{'record ' if record else ''}path {atom}")
        self.paths[key] = fn
        return fn

    def rest(self, node: Any, delta: dict, own: bool) -> None:
        """The bulk path's hand-over: ``node``'s delta propagated upwards by generated code
        (``own``: node's own indexes too, else they hold it already), one function per node."""
        fn = self.rests.get((node.id, own))
        if fn is None:
            src, ns, _ = gen_rest(self.trep, node, own)
            fn = self.rests[(node.id, own)] = build(src, ns, "rest", f"rest {node.id}")
            self.sources[f"bulk rest {node.id}{'' if own else ' (indexes applied)'}"] = src
        fn(delta)


def single_generic(code: UpdateCode, entry: tuple, row: Any, k: int) -> bool:
    """The interpreted single-row path (the reference for the generated one): the checks of
    the general path, the store, then each leaf's delta by :meth:`TRep.propagate`. A view with
    subscribers, a materialized result or ring payloads takes its general update instead."""
    if type(row) is not tuple:
        return False
    name, store, exs, arity, plain = entry
    if len(row) != arity:
        raise bad_row(name, row, arity)
    row = canonical_row(row)
    try:
        have = store.get(row, 0)
    except TypeError:
        raise UpdateError(f"row {row!r} has an unhashable value; no change was applied") from None
    if have + k < 0:
        raise UpdateError(f"cannot delete {row!r} from {name!r}: it is not present; no change was applied")
    if not plain or code.subscribers:
        code.general(name, {row: k})
        return True
    pending: dict[str, str] = {}
    trep = code.trep
    leaf = []
    for ex in exs:  # self-joins: every leaf checked first, then one leaf at a time
        t = ex.leaf_tuple(row, pending)
        if t is not None:
            leaf.append((ex.atom, t))
    if pending:
        code.kinds.update(pending)
    if have + k:
        store[row] = have + k
    else:
        del store[row]
    for atom, t in leaf:
        trep.propagate(atom, {t: k})
    trep.bump()
    return True
