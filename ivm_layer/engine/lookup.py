"""Parameterized views (paper 004): ``view.lookup(**inputs)`` over a maintained view.

CQAP0 views are planned access-top (``planner/params.py``): every node whose variables are
all inputs ("input node") keeps its own tuples, so a lookup

1. builds each input node's tuple from the inputs and probes its parent's index for it —
   O(1) each, and a miss anywhere means the answer is empty;
2. probes the first group of every other top-level branch (a component without inputs, or
   an output subtree under an input node) — an empty group means an empty answer;
3. enumerates the remaining nodes of N with Algorithm 1 seeded by those tuples (constant
   delay: every tuple of a probed group extends, the T-representation is calibrated).

Other views keep a materialized answer map ``{input tuple: {row: multiplicity}}`` updated
from the view's change (delta enumeration), so lookups are a dict probe there too.

Range parameters (``t.ts > $since``, ``BETWEEN $lo AND $hi``; ``engine/ranges.py``) read an
order on the compared column: in a CQAP0 view the enumeration index of the node right under
the inputs is ordered on it (step 3 starts there with a bisection), in the answer map each
input value's rows are. A lookup then costs O(log n + answer) (O(log n) when empty); a view
whose compared column sits deeper in the variable order filters the rows under its inputs
(EXPLAIN says which).
"""

from __future__ import annotations

from typing import Any, Iterator

from ..errors import ConcurrentModificationError, IVMError
from ..planner import Plan
from .answers import fold_change, fold_ordered
from .groups import OrderedGroup
from .inputs import bind_inputs
from .predicates import key_fn
from .ranges import RangeLookup
from .view import View


def _stale() -> ConcurrentModificationError:
    return ConcurrentModificationError(
        "the view was updated while this lookup was open; take list(view.lookup(...)) first")


class ParamView(View):
    """A view with input parameters. ``columns`` are the outputs; ``rows()`` ranges over
    ``params + columns`` (every input/output pair)."""

    def __init__(self, plan: Plan, sql: str, params: list[str], columns: list[str], cqap0: bool,
                 copies: dict[str, list[str]] | None = None, eq_params: list[str] | None = None,
                 ranges: list[tuple[str, str, int]] = (), indexed: list[int] = (), range_node: int | None = None,
                 merge: bool = True):
        """``ranges``: the range parameters ``(name, op, position of the compared value in a
        lookup's raw row)``; ``indexed``: those the order serves (one column); ``range_node``:
        for CQAP0, the GJT node whose enumeration index is ordered on it (None: filter the rows
        under the inputs); ``merge``: the compared columns are not all among ``columns``."""
        self._eq = list(eq_params) if eq_params is not None else list(params)
        self._ranges = list(ranges)
        # the compared columns are ordered (index, bisection): their values must be of one kind,
        # checked per update before any change (engine/leaves.py), as for inequality joins
        start = len(self._eq) + len(columns)
        compared = plan.gcq.output[start:start + len(self._ranges)]
        super().__init__(plan, sql, extra_ordered=compared)
        self.params = list(params)
        self.columns = list(columns)
        self.cqap0 = cqap0
        self._n = len(self._eq)
        self._nout = len(self.columns)  # engine outputs (constant columns of a subclass excluded)
        self._width = self._n + len(self.columns) + len(self._ranges)
        self._copies = copies or {}
        self._split = any(len(c) > 1 for c in self._copies.values())
        self._answers: dict[tuple, Any] | None = None
        if cqap0 and range_node is not None and not self._orderable(range_node):
            range_node = None  # (not expected: the planner put the node under the inputs)
        if cqap0 and range_node is None:
            indexed = ()
        self._range_node = range_node
        self._rl = RangeLookup(self._ranges, list(indexed), self._nout, merge,
                               distinct=plan.gcq.distinct) if self._ranges else None
        self._sort_pos = self._ranges[indexed[0]][2] if self._ranges and indexed and not cqap0 else None
        if cqap0:
            self._prepare_lookup()
        else:
            self._answers = {}  # kept up to date by _commit (the view's own bookkeeping, not a subscriber)

    def _orderable(self, node_id: int) -> bool:
        r = self._trep.nodes.get(node_id)
        return r is not None and r.p_index is not None and r.p_index.sort_pos is not None and not r.parent.fused

    def __repr__(self) -> str:
        return (f"<ivm_layer.ParamView {'CQAP0' if self.cqap0 else 'answer map'} params={self.params} "
                f"columns={self.columns}>")

    # -- lookups -------------------------------------------------------------------------
    def _inputs(self, args: tuple, kwargs: dict) -> tuple:
        return bind_inputs(self.params, args, kwargs)

    def lookup(self, *args: Any, **kwargs: Any) -> Iterator[tuple[tuple, int]]:
        """``(row over columns, multiplicity)`` of the view for these inputs (SQL semantics: a
        NULL input matches nothing).

        Examples:
            >>> from ivm_layer import compile_view
            >>> recent = compile_view("SELECT t.id, t.amount FROM trans t WHERE t.acc = $acc",
            ...                       {"trans": ["id", "acc", "amount"]})
            >>> recent.apply({"trans": [((1, 7, 50), 1), ((2, 7, 60), 1), ((3, 8, 70), 1)]})
            >>> recent.params, recent.columns, sorted(recent.lookup(acc=7))
            (['acc'], ['id', 'amount'], [((1, 50), 1), ((2, 60), 1)])
            >>> list(recent.lookup(9)), list(recent.lookup(acc=None))  # positionally; NULL matches nothing
            ([], [])
        """
        values = dict(zip(self.params, self._inputs(args, kwargs)))
        if any(v is None for v in values.values()):
            return iter(())
        key = tuple(values[p] for p in self._eq)
        rl = self._rl
        bounds = None
        if rl is not None:
            rvalues = tuple(values[name] for name in rl.names)
            bounds = rl.interval(rvalues)
            if bounds is None:  # an empty interval ($lo > $hi)
                return iter(())
        if self._answers is not None:
            if self._sort_pos is not None:
                raw = self._iter_ordered(self._answers.get(key), bounds)
            else:
                raw = self._iter_answer(self._answers.get(key))
        else:
            env = {}
            for p, v in zip(self._eq, key):
                for c in self._copies[p]:
                    if env.setdefault(c, v) != v:  # two parameters on one column disagree
                        return iter(())
            raw = self._seeded(env, bounds if self._range_node is not None else None)
        if rl is None:
            return raw
        return rl.finish(raw, rvalues)

    def _iter_answer(self, answer: dict | None) -> Iterator[tuple[tuple, int]]:
        if not answer:
            return
        v0 = self._trep.version
        for item in answer.items():
            yield item
            if self._trep.version != v0:
                raise _stale()

    def _iter_ordered(self, answer: OrderedGroup | None, bounds: tuple) -> Iterator[tuple[tuple, int]]:
        """The rows of one input value whose indexed column lies in ``bounds``: one bisection,
        then O(1) per row."""
        if answer is None:
            return iter(())
        try:
            if answer.edge_in(*bounds) is None:
                return iter(())
        except TypeError as e:
            raise IVMError(f"a range parameter cannot be compared with the column's values: {e}") from None
        return self._walk_buckets(answer.buckets_in(*bounds))

    def _walk_buckets(self, buckets) -> Iterator[tuple[tuple, int]]:
        v0 = self._trep.version
        for b in buckets:
            for item in b.items():
                yield item
                if self._trep.version != v0:
                    raise _stale()

    def _single(self, table: str, row: Any, k: int) -> bool:
        if self._answers is not None:
            return False  # the general path: _commit keeps the answer map
        return super()._single(table, row, k)

    def _commit(self, steps: list, want_change: bool):
        if self._answers is None:
            return super()._commit(steps, want_change)
        change = super()._commit(steps, True)
        if change:
            self._on_change(change)
        return change

    def _on_change(self, change: list[tuple[tuple, int]]) -> None:
        if self._sort_pos is not None:
            fold_ordered(self._answers, change, self._n, self._sort_pos)
        else:
            fold_change(self._answers, change, self._n)

    # -- the seeded enumeration (CQAP0) ----------------------------------------------------
    def _prepare_lookup(self) -> None:
        trep = self._trep
        inputs = {c for cs in self._copies.values() for c in cs}
        order = []  # N in pre-order, without the root

        def walk(r):
            for c in r.children:
                if c.in_n:
                    if (c.p_bounds is not None and c.id != self._range_node) or c.p_resid is not None:
                        raise IVMError("internal: a CQAP0 plan has an inequality edge")  # planner bug
                    order.append(c)
                    walk(c)

        walk(trep.root)
        self._seeds = [r for r in order if r.node.vars <= inputs and not r.fused]
        seed_ids = {r.id for r in self._seeds}
        self._rest = [r for r in order if r.id not in seed_ids]
        self._heads = [r for r in self._rest if r.parent.id in seed_ids or r.parent.parent is None]
        layout = {trep.root.id: {}}  # where each node's variables sit in the tuple it binds
        for r in order:
            layout[r.id] = r.pos if r.id in seed_ids else (
                layout[r.parent.id] if r.parent.fused else r.enum_pos)
        bound = self._seeds + self._rest
        self._holders = []
        for v in self.plan.gcq.output[self._n:self._width]:
            h = next(r for r in bound if v in layout[r.id] and v in r.node.vars)
            self._holders.append((h.id, layout[h.id][v]))
        self._frontier = [r.id for r in bound if r.frontier]
        # the engine's group key of each node, read off its parent's tuple
        self._keyf = {r.id: key_fn(r.p_key_vars, layout[r.parent.id]) for r in order if not r.parent.fused}
        self._compile_enum()

    def _seeded(self, env: dict, bounds: tuple | None = None) -> Iterator[tuple[tuple, int]]:
        root = self._trep.root
        tup = {root.id: ()}
        mult: dict[int, int] = {}
        keyf = self._keyf
        for r in self._seeds:  # step 1: O(1) probes
            t = tuple(env[v] for v in r.form)
            g = r.p_index.groups.get(keyf[r.id](tup[r.parent.id]))
            m = g.get(t) if g is not None else None
            if not m:
                return iter(())
            tup[r.id], mult[r.id] = t, m
        for r in self._heads:  # step 2: an empty branch empties the answer
            if not r.parent.fused and r.p_index.groups.get(keyf[r.id](tup[r.parent.id])) is None:
                return iter(())
        if self._range_node is not None:  # and an empty range: one bisection, O(log n)
            r = self._trep.nodes[self._range_node]
            try:
                g = r.p_index.groups.get(keyf[r.id](tup[r.parent.id]))
                if g is None or g.edge_in(*bounds) is None:
                    return iter(())
            except TypeError as e:
                raise IVMError(f"a range parameter cannot be compared with the column's values: {e}") from None
        return self._enum(tup, mult, self._trep, self._trep.version, bounds)

    def _compile_enum(self) -> None:
        """Generate the nested loops over the non-input nodes of N (Algorithm 1 seeded by the
        input nodes' tuples), as Python source, like the engine's own enumeration."""
        ns: dict[str, Any] = {"_stale": _stale, "_NONE": {}, "_NONE_ORDERED": OrderedGroup(0)}
        lines = ["def _enum(tup, mult, trep, v0, rb):"]
        ind = "    "
        lines.append(f"{ind}t{self._trep.root.id} = ()")
        for r in self._seeds:
            lines.append(f"{ind}t{r.id} = tup[{r.id}]; m{r.id} = mult[{r.id}]")
        for r in self._rest:
            p = r.parent
            if p.fused:  # the same tuple as its parent
                lines.append(f"{ind}t{r.id} = t{p.id}; m{r.id} = m{p.id}")
                continue
            ns[f"P{r.id}"] = r.p_index.groups
            ns[f"K{r.id}"] = self._keyf[r.id]
            if r.id == self._range_node:  # the range's values, in order, from one bisection
                lines.append(f"{ind}for b{r.id} in P{r.id}.get(K{r.id}(t{p.id}), _NONE_ORDERED).buckets_in(*rb):")
                ind += "    "
                lines.append(f"{ind}for t{r.id}, m{r.id} in b{r.id}.items():")
            elif r.p_bounds is not None:  # an ordered index read whole (not expected under N of CQAP0)
                lines.append(f"{ind}for b{r.id} in P{r.id}.get(K{r.id}(t{p.id}), _NONE_ORDERED).buckets_in("
                             "None, False, None, False):")
                ind += "    "
                lines.append(f"{ind}for t{r.id}, m{r.id} in b{r.id}.items():")
            else:
                lines.append(f"{ind}for t{r.id}, m{r.id} in P{r.id}.get(K{r.id}(t{p.id}), _NONE).items():")
            ind += "    "
        row = "(" + "".join(f"t{h}[{j}], " for h, j in self._holders) + ")"
        mult = " * ".join(f"m{f}" for f in self._frontier) or "1"
        lines.append(f"{ind}yield {row}, {mult}")
        lines.append(f"{ind}if trep.version != v0: raise _stale()")
        exec(compile("\n".join(lines) + "\n", "<ivm lookup enumeration>", "exec"), ns)
        self._enum = ns["_enum"]


    # -- all input/output pairs --------------------------------------------------------------
    def rows(self) -> Iterator[tuple[tuple, int]]:
        if not self._split:
            if self.cqap0:
                return self._cut(super().rows())
            return super().rows()
        return self._joined_rows()

    def _cut(self, it):
        w = self._width
        for row, m in it:
            yield row[:w], m

    def _joined_rows(self) -> Iterator[tuple[tuple, int]]:
        """Rows of a fractured view: the components' product filtered to agreeing input copies."""
        gcq = self.plan.gcq
        pos = {v: i for i, v in enumerate(gcq.output)}
        groups = [[pos[c] for c in self._copies[p]] for p in self._eq]
        for row, m in super().rows():
            if all(row[i] == row[g[0]] for g in groups for i in g[1:]):
                yield row[:self._width], m

    def __len__(self) -> int:
        if self._split:
            return sum(m for _, m in self.rows())
        return super().__len__()


class ConstantColumnsView(ParamView):
    """A parameterized view whose SELECT list holds constants besides (or instead of) its
    outputs: 004's Boolean lookups ``SELECT 1 AS hit … WHERE r.a = $a`` are ``Q(·|A)``, a
    lookup yields ``((1,), k)`` with k the number of derivations (SQL's bag of rows), or
    nothing. The constants are put back into each row as it is read: O(1) per row on top of
    :class:`ParamView` (``constants``: ``(position in the SELECT list, name, value)``)."""

    def __init__(self, *args: Any, constants: list[tuple[int, str, Any]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._consts = sorted(constants, key=lambda c: c[0])
        merged = list(self.columns)
        for pos, name, _ in self._consts:
            merged.insert(pos, name)
        self.columns = merged

    def _widen(self, it: Iterator[tuple[tuple, int]], n: int) -> Iterator[tuple[tuple, int]]:
        consts = self._consts
        for row, m in it:
            out = list(row)
            for pos, _, value in consts:
                out.insert(n + pos, value)
            yield tuple(out), m

    def lookup(self, *args: Any, **kwargs: Any) -> Iterator[tuple[tuple, int]]:
        """:meth:`ParamView.lookup` with the constant columns in place."""
        return self._widen(super().lookup(*args, **kwargs), 0)

    def rows(self) -> Iterator[tuple[tuple, int]]:
        return self._widen(super().rows(), len(self.params))

    def rows_batches(self, size: int = 1024) -> Iterator[list[tuple[tuple, int]]]:
        batch: list[tuple[tuple, int]] = []
        for item in self.rows():
            batch.append(item)
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch
