"""psycopg loaders and dumpers for ``'infinity'``/``'-infinity'`` of date, timestamp and
timestamptz (issue 29 case 4).

psycopg's own loaders raise ``DataError`` on these values; the session's connections and the
pgoutput decoder load them as the engine's infinities (:mod:`ivm_layer.engine.temporal`), and
the engine's infinities are dumped back as PostgreSQL's (text ``infinity``, binary
±(2**31-1)/INT32_MIN days, INT64_MAX/INT64_MIN µs). Finite values go to psycopg's loaders
unchanged: one bytes comparison more per temporal value.
"""

from __future__ import annotations

import struct
from typing import Any

from psycopg import pq
from psycopg.adapt import Dumper
from psycopg.types import datetime as pgdt

from ...engine import temporal

_TEXT = {b"infinity": 1, b"-infinity": -1}
#: PostgreSQL's binary infinities: DATEVAL_NOEND/NOBEGIN, DT_NOEND/NOBEGIN
_DATE_BIN = {struct.pack(">i", 2**31 - 1): 1, struct.pack(">i", -(2**31)): -1}
_TS_BIN = {struct.pack(">q", 2**63 - 1): 1, struct.pack(">q", -(2**63)): -1}


def _loader(base, kind: str, table: dict):
    class InfinityLoader(base):
        def load(self, data: Any) -> Any:
            sign = table.get(bytes(data))
            if sign is not None:
                return temporal.infinity(kind, sign)
            return super().load(data)

    InfinityLoader.__name__ = f"Infinity{base.__name__}"
    return InfinityLoader


_LOADERS = [("date", pgdt.DateLoader, "DATE", _TEXT), ("date", pgdt.DateBinaryLoader, "DATE", _DATE_BIN),
            ("timestamp", pgdt.TimestampLoader, "TIMESTAMP", _TEXT),
            ("timestamp", pgdt.TimestampBinaryLoader, "TIMESTAMP", _TS_BIN),
            ("timestamptz", pgdt.TimestamptzLoader, "TIMESTAMPTZ", _TEXT),
            ("timestamptz", pgdt.TimestamptzBinaryLoader, "TIMESTAMPTZ", _TS_BIN)]


class _TextDumper(Dumper):
    def dump(self, obj: Any) -> bytes:
        return str(obj).encode()


class _BinaryDumper(Dumper):
    format = pq.Format.BINARY
    _wide = False

    def dump(self, obj: Any) -> bytes:
        if self._wide:
            return struct.pack(">q", 2**63 - 1 if obj._sign > 0 else -(2**63))
        return struct.pack(">i", 2**31 - 1 if obj._sign > 0 else -(2**31))


def register(adapters) -> None:
    """Register the loaders and dumpers on an ``AdaptersMap`` (a connection's, or a copy of
    psycopg's global one)."""
    from psycopg import postgres

    for name, base, kind, table in _LOADERS:
        adapters.register_loader(name, _loader(base, kind, table))
    for value, name in ((temporal.DATE_INF, "date"), (temporal.TS_INF, "timestamp"),
                        (temporal.TSTZ_INF, "timestamptz")):
        oid = postgres.types[name].oid
        text = type(f"Infinity{name.title()}Dumper", (_TextDumper,), {"oid": oid})
        binary = type(f"Infinity{name.title()}BinaryDumper", (_BinaryDumper,),
                      {"oid": oid, "_wide": name != "date"})
        for cls in (type(value), type(temporal.infinity(value._kind, -1))):
            adapters.register_dumper(cls, binary)
            adapters.register_dumper(cls, text)


def adapters_map():
    """A copy of psycopg's global adapters with the infinity loaders and dumpers."""
    import psycopg
    from psycopg.adapt import AdaptersMap

    m = AdaptersMap(psycopg.adapters)
    register(m)
    return m
