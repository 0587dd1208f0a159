"""The statements a client connection has read once (Parse, or a simple query's text): what the
embedded DuckDB client (:class:`Prepared`) and the proxy (:class:`ProxyPrepared`) keep of each,
so that Bind/Execute and the mixins that run them (commands, COPY, view reads) need not read
it again. Plain data, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass

from ..session import pointreads as fastpath
from ..session.router import Route
from .copyio import CopyFormat


@dataclass
class Statement:
    """What both clients keep of a statement: its text as sent and as run, its route, its
    parameters (declared and inferred types), the parsed command and the engine's shape."""

    sql: str
    text: str
    route: Route
    nparams: int
    declared: list[int]
    command: object | None = None
    shape: fastpath.Shape | None = None
    inferred: list[int] | None = None


@dataclass
class Prepared(Statement):
    """A statement the embedded DuckDB client read once (Parse, or a simple query's text)."""

    catalog: bool = False                   # answered by the catalog emulation
    copy: CopyFormat | None = None
    rows: bool = False                      # returns rows


@dataclass
class ProxyPrepared(Statement):
    """A statement the proxy read once (Parse, or a simple query's text)."""

    copy: str | None = None                 # "in" / "out" for COPY … STDIN / STDOUT
