"""Transaction blocks of one client of an embedded server (a mixin of
:class:`~.duckclient.DuckClient`): ``BEGIN`` on the client's own DuckDB connection, the block's
writes to tracked tables captured by a :class:`~ivm_layer.session.duckdb.clients.ClientTransaction`
and applied at ``COMMIT`` under the exclusive gate, the write slot (one writer of tracked
tables at a time; a stale snapshot is 40001), ``25P02`` after an error until ``ROLLBACK``.
"""

from __future__ import annotations

from ..errors import UpdateError
from .results import Result
from .sqlstate import ServeError


class Transactions:
    """Needs ``backend``, ``conn``, ``status``, ``txn`` and the block flags of the client."""

    @property
    def block_wrote(self) -> bool:
        return self.wrote_in_block or self.untracked_writes

    def _no_open_writers(self) -> None:
        """Incremental-view DDL sees the tables as committed: a block that has written (to any
        table) and not committed would be missed by a view created now."""
        for other in list(self.backend.clients):
            if other is not self and other.status != "I" and other.block_wrote:
                raise ServeError("55006", "another client has an open transaction block with uncommitted writes; "
                                          "CREATE/DROP INCREMENTAL VIEW waits for no such block: retry after it ends")

    def _hold_slot(self) -> None:
        """The first write to a tracked table in this block: take the write slot; a snapshot
        older than the last commit to tracked tables cannot be written from (40001)."""
        if self.slot_held:
            return
        b = self.backend
        b.take_write_slot()
        self.slot_held = True
        if self.first_in_block:
            self.block_snapshot = b.write_commits
        if self.block_snapshot is not None and self.block_snapshot != b.write_commits:
            raise ServeError("40001", "could not serialize access due to concurrent update: tables that incremental "
                                      "views read changed after this transaction began",
                             hint="ROLLBACK and run the transaction again")

    def _drop_slot(self) -> None:
        if self.slot_held:
            self.slot_held = False
            self.backend.write_slot.release()

    def _transaction(self, kind: str) -> Result:
        b = self.backend
        if kind == "begin":
            if self.status != "I":
                return Result("BEGIN", count_in_tag=False, notice=("25001", "there is already a transaction in progress"))
            self.conn.execute("BEGIN TRANSACTION")
            self.txn = b.session.client_transaction(self.conn)
            self.status = "T"
            self.wrote_in_block = self.untracked_writes = False
            self.block_snapshot = None
            return Result("BEGIN", count_in_tag=False)
        if self.status == "I":
            return Result("COMMIT" if kind == "commit" else "ROLLBACK", count_in_tag=False,
                          notice=("25P01", "there is no transaction in progress"))
        txn, self.txn = self.txn, None
        failed = self.status == "E"
        self.status = "I"
        wrote = self.wrote_in_block or self.untracked_writes
        self.wrote_in_block = self.untracked_writes = False
        self.block_snapshot = None
        try:
            if kind == "rollback" or failed:
                txn.rollback()
                return Result("ROLLBACK", count_in_tag=False)
            if txn.wrote_tracked:
                with b.commit_section():
                    b.write_commits += 1
                    try:
                        txn.commit()
                    except UpdateError as e:     # the safety net: never a half-applied change
                        raise ServeError("40001", f"could not serialize access due to concurrent update: {e}",
                                         hint="run the transaction again") from None
            else:
                self.conn.commit()
        finally:
            self._drop_slot()
        if wrote:
            b.schema_changed()
        return Result("COMMIT", count_in_tag=False)

    def fail(self) -> None:
        """An error inside a transaction block: the block is aborted until ROLLBACK."""
        if self.status == "T":
            self.status = "E"
