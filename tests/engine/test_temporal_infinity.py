"""The engine's ±infinity of DATE / TIMESTAMP / TIMESTAMPTZ (issue 29 case 4): order, equality,
hashing, pickling and the text and Arrow integers given back to the backend."""

from __future__ import annotations

import pickle
import random
from datetime import UTC, date, datetime, timedelta, timezone

from ivm_layer.engine import temporal as tp


def test_infinities_sort_around_every_finite_value_and_stay_apart_from_the_extremes():
    rng = random.Random(5)
    finite = [date.min, date.max] + [date(1, 1, 1) + timedelta(days=rng.randrange(3_000_000)) for _ in range(50)]
    values = finite + [tp.DATE_INF, tp.DATE_NEG_INF] * 3
    rng.shuffle(values)
    out = sorted(values)
    assert out[:3] == [tp.DATE_NEG_INF] * 3 and out[-3:] == [tp.DATE_INF] * 3
    assert out[3:-3] == sorted(finite)
    assert tp.DATE_INF != date.max and tp.DATE_NEG_INF != date.min
    assert len({tp.DATE_INF: 1, date.max: 2, tp.DATE_NEG_INF: 3, date.min: 4}) == 4
    aware = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-3)))
    assert tp.TSTZ_NEG_INF < aware.replace(year=1) and aware < tp.TSTZ_INF
    assert datetime.max < tp.TS_INF and not (tp.TS_INF < datetime.max) and tp.TS_INF != datetime.max


def test_pickling_text_and_arrow_integers():
    for v in (tp.DATE_INF, tp.DATE_NEG_INF, tp.TS_INF, tp.TS_NEG_INF, tp.TSTZ_INF, tp.TSTZ_NEG_INF):
        assert pickle.loads(pickle.dumps(v)) is v
        assert tp.parse(v._kind, tp.sql_text(v)) is v
    assert tp.arrow_int(tp.DATE_INF, True) == 2**31 - 1 and tp.arrow_int(tp.TS_NEG_INF, False) == -(2**63 - 1)
    assert tp.arrow_int(date(1970, 1, 2), True) == 1
    assert tp.arrow_int(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), False) == 1_000_000
    assert tp.parse("DATE", "9999-12-31") == date.max and tp.parse("TIMESTAMP", None) is None
