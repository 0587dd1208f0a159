"""The papers' notation of a GCQ, read back: the inverse of ``str(GCQ)``.

``π[x, u](r(x, y) ⋈ s(y, z, w) ⋈ t(u, v) | x < z ∧ w < u)`` is paper 000's Example 3 query.
ASCII works too: ``pi[x, u](r(x,y), s(y,z,w), t(u,v) | x < z AND w < u)``; without
``π[…](…)`` every variable is an output. ``_`` is a column the query never reads; a
predicate is ``var op var [± number]`` or ``var op number`` with ``op`` one of
``< <= > >= = <>``. A relation named twice (a self-join) gets the aliases ``t1``, ``t2``, …;
otherwise the alias is the relation's name. Used by the planner's doctests and fixture
files; cost: linear in the text.
"""

from __future__ import annotations

import re

from .errors import SQLError
from .query import GCQ, Atom, Predicate

_PROJECTION = re.compile(r"\s*(?:π|pi)\s*\[([^\]]*)\]\s*\((.*)\)\s*", re.S)
_ATOM = re.compile(r"\s*([A-Za-z_]\w*)\s*\(([^)]*)\)\s*")
_NUMBER = r"-?\d+(?:\.\d+)?"
_PREDICATE = re.compile(
    rf"\s*([A-Za-z_]\w*)\s*(<=|>=|<>|<|>|=)\s*(?:([A-Za-z_]\w*)(?:\s*([+-])\s*({_NUMBER[2:]}))?|({_NUMBER}))\s*")


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def parse_gcq(text: str) -> GCQ:
    """The GCQ written in the papers' notation (see the module docstring); raises
    :class:`~ivm_layer.errors.IVMError` naming the part it cannot read.

    Examples:
        >>> q = parse_gcq("π[x, u](r(x, y) ⋈ s(y, z, w) ⋈ t(u, v) | x < z ∧ w < u)")
        >>> [a.alias for a in q.atoms], q.output, [str(p) for p in q.predicates]
        (['r', 's', 't'], ['x', 'u'], ['x < z', 'w < u'])
        >>> str(parse_gcq("t(i, ts), t(j, ts2) | ts < ts2 AND ts2 < ts + 3600"))
        'π[i, ts, j, ts2](t(i, ts) ⋈ t(j, ts2) | ts < ts2 ∧ ts2 < ts + 3600)'
    """
    output = None
    m = _PROJECTION.fullmatch(text)
    body = text
    if m:
        output = [v.strip() for v in m.group(1).split(",") if v.strip()]
        body = m.group(2)
    atoms_text, bar, preds_text = body.partition("|")
    parts = [p for p in re.split(r"⋈|\)\s*,", atoms_text)]
    parts = [p if p.rstrip().endswith(")") else p + ")" for p in parts]
    raw = []
    for part in parts:
        am = _ATOM.fullmatch(part)
        if am is None:
            raise SQLError(f"cannot read the atom {part.strip()!r} in {text!r}: write name(var, var, …)")
        vs = tuple(None if v.strip() == "_" else v.strip() for v in am.group(2).split(","))
        raw.append((am.group(1), vs))
    counts: dict[str, int] = {}
    seen: dict[str, int] = {}
    for rel, _ in raw:
        counts[rel] = counts.get(rel, 0) + 1
    atoms = []
    for rel, vs in raw:
        seen[rel] = seen.get(rel, 0) + 1
        atoms.append(Atom(rel, rel if counts[rel] == 1 else f"{rel}{seen[rel]}", vs))
    preds = []
    if bar:
        for ptext in re.split(r"∧|\bAND\b", preds_text):
            pm = _PREDICATE.fullmatch(ptext)
            if pm is None:
                raise SQLError(f"cannot read the predicate {ptext.strip()!r} in {text!r}: "
                               "write var op var [± number] or var op number")
            left, op, right, sign, off, const = pm.groups()
            if right is not None:
                offset = _number(off) if off else 0
                preds.append(Predicate(left, op, right, -offset if sign == "-" else offset))
            else:
                preds.append(Predicate(left, op, None, _number(const)))
    if output is None:
        output = list(dict.fromkeys(v for a in atoms for v in a.vars if v is not None))
    q = GCQ(atoms, preds, output, list(output))
    q.validate()
    return q
