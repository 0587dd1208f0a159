"""What a source of changes and a sink of view changes promise: the contracts between the
outside systems (:mod:`ivm_layer.io`) and the drivers (sessions, the daemon, ``ivm serve``).

Modelled on Feldera's transport endpoints (``InputEndpoint::fault_tolerance``: none,
at-least-once, exactly-once; ``OutputEndpoint::batch_start/batch_end``: "if data for the given
step has been written before, discard it") and Pathway's ``ConnectorSubject`` (``next``,
``commit``, ``seek``): a source hands out batches in position order and replays everything
after the last position its consumer committed; a sink writes each batch under its id, once,
and says which batches it holds. With an exactly-once source and exactly-once sinks, a driver
that records each batch in its checkpoint before the sinks write it (the daemon's order) is
exactly once end to end: after a crash it replays the source from its checkpoint and writes
again only the batches a sink does not hold (``committed()``).

Both are ``typing.Protocol`` s (``runtime_checkable``: ``isinstance(x, Sink)`` checks the
members are there; the promises are the implementations' and their tests'). Implementations:
the replication feed :class:`ivm_layer.io.postgres.feed.ChangeFeed` (a :class:`Source`,
exactly once: positions are LSNs, the slot replays after its confirmed position) and the
daemon's sinks (:mod:`ivm_layer.daemon.sinks`: PostgreSQL, DuckDB and Parquet exactly once,
the console none).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

Change = list[tuple[tuple, int]]


class FaultTolerance(enum.Enum):
    """What survives a crash of the process reading a source or writing a sink."""

    #: nothing is promised: a batch in flight may be lost (or, for a source, skipped)
    NONE = "none"
    #: every batch arrives, some maybe twice (a source replays; a sink keeps no record)
    AT_LEAST_ONCE = "at_least_once"
    #: every batch exactly once (a source replays from a committed position; a sink skips a
    #: batch id it holds)
    EXACTLY_ONCE = "exactly_once"


@runtime_checkable
class Source(Protocol):
    """Batches of committed changes in position order (positions: ints that only grow).

    - ``drain(limit, timeout)`` takes up to ``limit`` batches out, waiting up to ``timeout``
      seconds for the first; ``position``: every batch at or before it was handed out or is
      ready to be;
    - ``commit(position)``: the consumer made everything up to ``position`` durable — it is
      never handed out again, even after a crash (exactly once);
    - resuming after a crash is a new source at the consumer's committed position (Feldera's
      *seek*); ``error`` holds a failure the source cannot recover from (reported after the
      batches before it); ``close()`` releases the connection."""

    fault_tolerance: FaultTolerance
    position: int
    committed: int
    error: BaseException | None

    def drain(self, limit: int, timeout: float = 0.0) -> list[Any]: ...

    def commit(self, position: int) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Sink(Protocol):
    """A destination of view changes, written batch by batch.

    - ``prepare(layouts, fresh)`` once: create what is missing for ``{view: (columns,
      types)}``; ``fresh`` (a new checkpoint) also empties earlier output;
    - ``write(batch_id, changes)``: ``{view: [(row, Δk)]}`` of one batch, idempotent per id —
      a batch it already holds is discarded (returns False), so a replay writes nothing twice;
    - ``committed()``: the last batch id it holds for sure (-1: none), or None for a sink that
      keeps no record (``fault_tolerance`` NONE: the driver never writes it a batch again);
    - ``close()``."""

    fault_tolerance: FaultTolerance
    label: str

    def prepare(self, layouts: Mapping[str, tuple[list[str], list[str]]], fresh: bool) -> None: ...

    def write(self, batch_id: int, changes: Mapping[str, Change], prepared: object = None) -> bool: ...

    def committed(self) -> int | None: ...

    def close(self) -> None: ...
