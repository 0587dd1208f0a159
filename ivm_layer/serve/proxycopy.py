"""``COPY … FROM STDIN`` / ``TO STDOUT`` passed through to the PostgreSQL behind a proxy (a
mixin of :class:`~.proxyclient.ProxyClient`): the client's data is spooled, then written with
libpq's COPY calls without holding the GIL; COPY output lines go back as CopyData unchanged.
"""

from __future__ import annotations

import select
from typing import TYPE_CHECKING

from psycopg import pq

from . import pgtypes
from .results import Column, CopyIn, CopyOut, Result
from .sqlstate import ServeError

if TYPE_CHECKING:
    from .prepared import ProxyPrepared

class ProxyCopy:
    """Needs ``pg``, ``status``, ``backend``, ``cancel_reason`` and the client's ``_result``,
    ``_drain`` and ``_cancel_upstream``."""

    def _copy_in(self, p: ProxyPrepared) -> Result:
        pg = self.pg
        pg.send_query(p.text.encode())
        res = self._result()
        if res.status != pq.ExecStatus.COPY_IN:
            self._drain()
            raise ServeError("08P01", "PostgreSQL did not start COPY FROM STDIN")
        ncols = res.nfields

        def finish(data) -> Result:
            data.seek(0)
            while chunk := data.read(1 << 16):
                while not pg.put_copy_data(chunk):
                    select.select([], [pg.socket], [], 0.1)
            while not pg.put_copy_end(None):
                select.select([], [pg.socket], [], 0.1)
            while pg.flush():
                select.select([], [pg.socket], [], 0.1)
            done = self._result()
            self._drain()
            if self.status == "I":
                self.backend.wrote()
            return Result((done.command_status or b"COPY").decode(), count_in_tag=False)
        return Result("COPY", copy_in=CopyIn(ncols, finish))

    def _copy_out(self, p: ProxyPrepared, values, oids, fmts) -> Result:
        pg = self.pg
        pg.send_query(p.text.encode())
        res = self._result()
        if res.status != pq.ExecStatus.COPY_OUT:
            self._drain()
            raise ServeError("08P01", "PostgreSQL did not start COPY TO STDOUT")
        cols = [Column(f"c{i}", pgtypes.TEXT) for i in range(res.nfields)]

        def lines():
            while True:
                n, data = pg.get_copy_data(1)
                if n == 0:             # nothing yet: wait for the socket (GIL released)
                    select.select([pg.socket], [], [], 0.1)
                    pg.consume_input()
                    if self.cancel_reason:
                        self._cancel_upstream()
                    continue
                if n < 0:
                    break
                yield bytes(data)
            self._drain()
        return Result("COPY", cols, lines(), copy_out=CopyOut(raw=True))
