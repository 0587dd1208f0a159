"""The order-statistic list behind window functions and Top-N, against a sorted Python list."""

import random

import pytest

from ivm_layer.engine import orderstat
from ivm_layer.engine.orderstat import OrderStatList


@pytest.mark.parametrize("seed", range(4))
def test_matches_a_sorted_list(seed, monkeypatch):
    monkeypatch.setattr(orderstat, "_LOAD", 4)  # tiny chunks: splits, merges and Fenwick rebuilds
    rng = random.Random(seed)
    ol = OrderStatList(2, (True, False))
    ref: dict[int, list] = {}  # key -> [count, sum, value]
    for step in range(1500):
        key = rng.randint(0, 60)
        if key in ref and rng.random() < 0.45:
            c, s, v = ref[key]
            d = -rng.randint(1, c)
            ol.add(key, (d, d * (v or 0)), (v, v))
            ref[key][0] += d
            ref[key][1] += d * (v or 0)
            if not ref[key][0]:
                del ref[key]
        else:
            v = ref[key][2] if key in ref else (None if rng.random() < 0.2 else rng.randint(-9, 9))
            d = rng.randint(1, 3)
            ol.add(key, (d, d * (v or 0)), (v, v))
            e = ref.setdefault(key, [0, 0, v])
            e[0] += d
            e[1] += d * (v or 0)
        keys = sorted(ref)
        probe = rng.randint(-1, 62)
        below = [k for k in keys if k < probe]
        assert ol.before(probe) == [sum(ref[k][0] for k in below), sum(ref[k][1] for k in below)]
        vals = [ref[k][2] for k in below if ref[k][2] is not None]
        assert ol.extreme_before(probe, 0) == (min(vals) if vals else None)
        assert ol.extreme_before(probe, 1) == (max(vals) if vals else None)
        assert [k for k, _ in ol.iter_from(probe)] == [k for k in keys if k >= probe]
        assert [k for k, _ in ol.iter_before(probe)] == below[::-1]
        assert ol.last_le(probe) == (max([k for k in keys if k <= probe]) if any(k <= probe for k in keys) else None)
        copies = [k for k in keys for _ in range(ref[k][0])]
        pos = rng.randint(0, len(copies))
        assert ol.kth(pos) == (copies[pos] if pos < len(copies) else None)
        assert ol.total == len(copies) and len(ol) == len(keys)
