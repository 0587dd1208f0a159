"""Paper 004's classes (Definition 1) as ``planner/heavylight.py`` computes them: the smallest
CQAP1 queries of §3, the 4-cycle (Ex. 2), the triangle and the non-hierarchical R(A),S(A,B),T(B)
(beyond CQAP1), and CQAP0 examples; and which CQAP1 shapes get the heavy/light plan."""

import pytest

from ivm_layer.gcqtext import parse_gcq
from ivm_layer.planner.heavylight import HeavyLightRefused, parameter_class, plan_heavy_light

CASES = [
    # (atoms, inputs, outputs, class)
    ("r(a, b) ⋈ s(b)", ["a"], ["b"], "CQAP1"),        # Q(B|A): not input-dominant, almost
    ("r(a, b) ⋈ s(b)", ["a"], [], "CQAP1"),           # Q(·|A)
    ("r(a, b) ⋈ s(b)", ["b"], ["a"], "CQAP0"),        # Ex. 2's Q(A|B)
    ("r(a, b) ⋈ s(b, c) ⋈ t(c, d) ⋈ u(a, d)", ["b", "d"], ["a", "c"], "CQAP1"),  # the 4-cycle
    ("r(a, b) ⋈ s(b, c) ⋈ t(c, a)", ["a"], ["b", "c"], "beyond CQAP1"),         # triangle Q(B,C|A)
    ("r(a, b) ⋈ s(b, c) ⋈ t(c, a)", ["a", "b"], [], "CQAP1"),  # edge-triangle Q(·|A,B): set intersection
    ("r(x, a) ⋈ s(a, b) ⋈ t(b)", ["x"], ["a", "b"], "beyond CQAP1"),  # R(A),S(A,B),T(B) inside: not hierarchical
    ("r(a) ⋈ s(a, b) ⋈ t(b)", ["a"], ["b"], "CQAP1"),  # the input A splits it: S(A,B),T(B) is Q(B|A)
    ("r(a, b) ⋈ s(b, c) ⋈ t(c, d)", ["b", "c"], ["a", "d"], "CQAP0"),         # the 3-path, via the fracture
]


@pytest.mark.parametrize("atoms, inputs, outputs, klass", CASES)
def test_parameter_class(atoms, inputs, outputs, klass):
    q = parse_gcq(atoms)
    assert parameter_class(q, inputs, outputs)[0] == klass


def test_heavy_light_plans_and_refusals():
    q = parse_gcq("r(a, b) ⋈ s(b)")
    hl = plan_heavy_light(q, ["a"], ["a"], ["b"], 0.5)
    assert hl.key == ["b"] and hl.heavy.cqap0 and hl.key_positions == {"r": [1], "s": [0]}
    assert "update O(N^0.5) amortized" in " ".join(hl.notes())
    assert plan_heavy_light(q, ["a"], ["a"], [], 0.5).boolean
    half = parse_gcq("r(a, b) ⋈ u(a, d)")
    assert plan_heavy_light(half, ["b", "d"], ["b", "d"], ["a"], 0).key == ["a"]
    with pytest.raises(HeavyLightRefused, match="one-component fractures; this one has 2"):
        plan_heavy_light(parse_gcq("r(a, b) ⋈ s(b, c) ⋈ t(c, d) ⋈ u(a, d)"), ["b", "d"], ["b", "d"], ["a", "c"], 0.5)
    with pytest.raises(HeavyLightRefused, match="not in CQAP1.*not almost input-dominant.*Thm. 17"):
        # w(a) and one other atom do not cover b and d: not almost input-dominant
        plan_heavy_light(parse_gcq("r(a, b) ⋈ u(a, d) ⋈ w(a)"), ["b", "d"], ["b", "d"], ["a"], 0.5)
    with pytest.raises(HeavyLightRefused, match="merged"):  # bound key with outputs (004's Ex. 19 shape)
        plan_heavy_light(parse_gcq("r(a, b, c) ⋈ s(a, b, d)"), ["a", "c"], ["a", "c"], ["d"], 0.5)


def test_cli_explain_takes_epsilon(capsys):
    from ivm_layer.cli import main

    sel = "SELECT r.b FROM r JOIN s ON r.b = s.b WHERE r.a = $a"
    assert main(["explain", f"CREATE INCREMENTAL VIEW v WITH (epsilon = 0.25) AS {sel}", "--schema", "r(a,b); s(b)"]) == 0
    out = capsys.readouterr().out
    assert "class CQAP1, ε = 0.25, partition key {r.b}" in out and "lookup delay O(N^0.75)" in out
    assert main(["explain", sel, "--schema", "r(a,b); s(b)", "--epsilon", "0"]) == 0
    assert "update O(1) amortized" in capsys.readouterr().out
