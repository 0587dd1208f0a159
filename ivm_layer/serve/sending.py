"""Running a statement and sending its answer (a mixin of :class:`~.protocol.Protocol`):
the statement timeout, RowDescription/DataRow/CommandComplete or PortalSuspended, COPY out
and in, and the spilling that lets a writer in while a slow client reads a result holding
the views' gate.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass

from . import codec
from . import messages as m
from .outbox import ClientGone
from .results import FLUSH, RawEncoder, Result, RowEncoder, copy_line, spill
from .sqlstate import ServeError, cancelled

log = logging.getLogger("ivm_layer.serve")


@dataclass
class Portal:
    """A bound statement (Bind): its parameters, formats and, once run, its result."""

    stmt: object
    params: list
    formats: m.Bind
    result: Result | None = None
    encoder: RowEncoder | None = None
    done: bool = False
    sent: int = 0


class Sending:
    """Needs ``client``, ``out``, ``settings``, ``metrics``, ``schedule``, ``spool_rows``,
    ``max_copy_bytes``, ``_timer``, ``_result`` and ``_next`` of the protocol."""

    @property
    def streaming(self) -> bool:
        """A SUBSCRIBE is being sent: it never ends by itself, so a shutdown does not wait for it."""
        res = self._result
        return res is not None and res.stream is not None

    def _run(self, p, params, bind: m.Bind | None = None) -> Result:
        self._arm()
        t0 = time.perf_counter()
        try:
            res = self.client.execute(p, params, bind)
        except BaseException:
            self._disarm()
            raise
        if self.metrics is not None:
            self.metrics.statement(p, time.perf_counter() - t0)
        return res

    def _arm(self) -> None:
        """Start the statement timeout (``SET statement_timeout``) for the next statement."""
        self._disarm()
        timeout = self.settings.statement_timeout()
        if timeout > 0 and self.schedule is not None:
            self._timer = self.schedule(timeout, lambda: self.client.cancel("statement timeout"))

    def _disarm(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer()

    def send_result(self, res: Result, encoder: RowEncoder | None, max_rows: int, describe: bool,
                    portal: Portal | None = None) -> bool:
        """Rows and CommandComplete (or PortalSuspended: returns False)."""
        finished = True
        try:
            if res.notice is not None:
                self.out.send(codec.notice_response(res.notice[1], res.notice[0], "WARNING"))
            if res.copy_in is not None:
                self._copy_in(res)
                return True
            if res.columns is None:
                self.out.send(codec.empty_query() if res.tag == "EMPTY" else codec.command_complete(res.complete_tag(0)))
                res.close()
                return True
            if res.copy_out is not None:
                return self._copy_out(res)
            if encoder is None:
                encoder = row_encoder(res, None)
            if describe:
                self.out.send(codec.row_description(encoder.fields(res.columns)))
            done, n = self._pump(res, encoder, max_rows)
            if portal is not None:
                portal.sent += n
                n = portal.sent
            if not done:
                finished = False
                if res.stream is None:
                    spill(res, self.spool_rows)
                self.out.send(codec.portal_suspended())
                return False
            res.close()
            self.out.send(codec.command_complete(res.complete_tag(n)))
            return True
        except BaseException:
            res.close()
            raise
        finally:
            if finished:
                self._disarm()

    def _pump(self, res: Result, encoder: RowEncoder, max_rows: int) -> tuple[bool, int]:
        """Encode and send rows; ``(finished, rows sent)``."""
        self._result = res
        send = self.out.send
        n = 0
        client = self.client
        try:
            it = res.rows
            while True:
                if res.rows is not it:     # spilled while a send waited (_on_wait): go on from the spool
                    it = res.rows
                if max_rows and n >= max_rows:
                    try:
                        first = next(it)
                    except StopIteration:
                        return True, n
                    res.rows = prepend(first, it)
                    return False, n
                try:
                    row = next(it)
                except StopIteration:
                    return True, n
                if row is FLUSH:
                    self.out.flush()
                    continue
                send(encoder(row))
                n += 1
                if n & 1023 == 0:
                    if client.cancel_reason:
                        raise cancelled(client.cancel_reason)
                    if res.holds_gate and self._writer_waiting():
                        spill(res, self.spool_rows)
                        it = res.rows
        finally:
            self._result = None

    def _writer_waiting(self) -> bool:
        gate = getattr(self.client.backend, "gate", None)
        return gate is not None and gate.writer_waiting.is_set()

    def _on_wait(self) -> None:
        """The client is not reading: let a waiting writer in by spilling the current result;
        a subscription that fell too far behind ends the connection (its error cannot reach a
        client that does not read)."""
        res = self._result
        if res is not None and res.holds_gate and self._writer_waiting():
            spill(res, self.spool_rows)
        if res is not None and res.stream is not None:
            if res.stream.dropped is not None:
                log.debug("connection %s: %s", self.client.pid, res.stream.dropped)
                self.out.closed.set()
                raise ClientGone()
            if self.client.cancel_reason:
                raise cancelled(self.client.cancel_reason)

    def _copy_out(self, res: Result) -> bool:
        out = res.copy_out
        self.out.send(codec.copy_out_response(len(res.columns)))
        if out.raw:
            n = 0
            for data in res.rows:
                self.out.send(codec.copy_data(data))
                n += 1
            res.close()
            self.out.send(codec.copy_done())
            self.out.send(codec.command_complete(res.complete_tag(n)))
            return True
        enc = RowEncoder(res.columns)
        texts = enc.encoders
        n = 0
        if out.header:
            self.out.send(codec.copy_data(copy_line([c.name.encode() for c in res.columns], out)))
        self._result = res
        res.rows = iter(res.rows)
        try:
            while True:
                try:
                    row = next(res.rows)   # res.rows, not a held iterator: a spill replaces it
                except StopIteration:
                    break
                if row is FLUSH:
                    self.out.flush()
                    continue
                vals = [None if v is None else t(v) for t, v in zip(texts, row)]
                self.out.send(codec.copy_data(copy_line(vals, out)))
                n += 1
                if n & 1023 == 0 and self.client.cancel_reason:
                    raise cancelled(self.client.cancel_reason)
        finally:
            self._result = None
        res.close()
        self.out.send(codec.copy_done())
        self.out.send(codec.command_complete(f"COPY {n}"))
        return True

    def _copy_in(self, res: Result) -> None:
        cin = res.copy_in
        self.out.send(codec.copy_in_response(cin.columns))
        self.out.flush()
        data = tempfile.SpooledTemporaryFile(max_size=8 << 20, prefix="ivm-serve-copy-")  # noqa: SIM115
        size = 0
        try:
            while True:
                msg = self._next()
                if isinstance(msg, m.CopyData):
                    size += len(msg.data)
                    if size > self.max_copy_bytes:
                        raise ServeError("54000", f"COPY data over this server's limit of {self.max_copy_bytes} bytes")
                    data.write(msg.data)
                elif isinstance(msg, m.CopyDone):
                    break
                elif isinstance(msg, m.CopyFail):
                    raise ServeError("57014", f"COPY from stdin failed: {msg.message}")
                elif isinstance(msg, (m.Sync, m.Flush)):
                    continue
                else:
                    raise ServeError("08P01", f"unexpected message type {type(msg).__name__} during COPY from stdin")
            done = cin.finish(data)
        finally:
            data.close()
        self.out.send(codec.command_complete(done.complete_tag(0)))


def row_encoder(res: Result, formats):
    """The encoder of a result's rows: framing only for wire values already (a proxy), else
    per-column encoders in the formats the client asked for."""
    if res.raw_formats is not None:
        return RawEncoder(res.raw_formats)
    return RowEncoder(res.columns, formats)


def prepend(first, it):
    yield first
    yield from it
