"""``ivm demo``: the credit-card fraud view of paper 000 §1, end to end on embedded DuckDB.

Creates a ``trans`` table, ``CREATE INCREMENTAL VIEW fraud AS`` the query in
``sql_examples/fraud.sql``, streams generated transactions through the session in
multi-row INSERT statements (with a progress bar), prints each detected pattern as it
appears, and ends with the view's size next to DuckDB recomputing the query from scratch.
"""

from __future__ import annotations

import pathlib
import random
import sys
import time
from typing import TextIO

from .errors import IVMError

_FRAUD_SQL = pathlib.Path(__file__).resolve().parent.parent / "sql_examples" / "fraud.sql"


def fraud_sql() -> str:
    """The fraud query's SELECT (comments stripped)."""
    if not _FRAUD_SQL.exists():
        raise IVMError(f"{_FRAUD_SQL} not found: run the demo from a source checkout")
    lines = [ln for ln in _FRAUD_SQL.read_text().splitlines() if not ln.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";")


def transactions(n: int, seed: int = 7, accounts: int | None = None):
    """A seeded stream of card transactions ``(id, acc, ts, amnt)`` in time order.

    Mostly ordinary purchases; now and then an account shows the fraud pattern: two small
    test purchases followed within the hour by a large one."""
    rng = random.Random(seed)
    accounts = accounts or max(10, n // 25)
    ts = 0
    for i in range(n):
        ts += rng.randint(1, 40)
        acc = rng.randint(1, accounts)
        r = rng.random()
        amnt = rng.randint(1, 99) if r < 0.3 else rng.randint(401, 2000) if r < 0.37 else rng.randint(100, 400)
        yield (i, acc, ts, amnt)


class _Progress:
    def __init__(self, total: int, stream: TextIO, width: int = 30):
        self.total, self.stream, self.width = total, stream, width
        self.start = time.perf_counter()
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.last = -1

    def update(self, done: int, found: int) -> None:
        pct = done * 100 // self.total
        if pct == self.last or (not self.tty and pct % 25):
            return
        self.last = pct
        filled = self.width * done // self.total
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {pct:3d}% {done:,}/{self.total:,} rows, {rate:,.0f} rows/s, {found} patterns"
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def run(n: int = 20_000, batch: int = 200, seed: int = 7, show: int = 10,
        out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run the demo; returns 0 when the incremental view equals DuckDB's recomputation."""
    from .sessions import connect

    body = fraud_sql()
    session = connect()
    try:
        session.execute("CREATE TABLE trans (id INTEGER, acc INTEGER, ts INTEGER, amnt INTEGER)")
        session.execute(f"CREATE INCREMENTAL VIEW fraud AS {body}")
        view = session.view("fraud")
        print("view fraud:", file=out)
        print("  " + view.explain().replace("\n", "\n  "), file=out)
        found = [0]

        def on_change(change):
            for row, k in change:
                if k > 0:
                    found[0] += k
                    if found[0] <= show:  # columns: S1.(id, acc, ts, amnt), S2.(…), L.(…)
                        print(f"  pattern: account {row[1]}: {row[3]} at t={row[2]}, {row[7]} at t={row[6]}, "
                              f"then {row[11]} at t={row[10]}", file=out)
                    elif found[0] == show + 1:
                        print(f"  … (showing the first {show})", file=out)

        view.subscribe(on_change)
        progress = _Progress(n, err)
        pending: list[tuple] = []
        started = time.perf_counter()
        for i, row in enumerate(transactions(n, seed), 1):
            pending.append(row)
            if len(pending) == batch or i == n:
                values = ", ".join(f"({a}, {b}, {c}, {d})" for a, b, c, d in pending)
                session.execute(f"INSERT INTO trans VALUES {values}")
                pending.clear()
                progress.update(i, found[0])
        progress.close()
        elapsed = time.perf_counter() - started
        t0 = time.perf_counter()
        recomputed = session.execute(f"SELECT count(*) FROM ({body}) q").fetchone()[0]
        t_re = time.perf_counter() - t0
        served = session.execute("SELECT count(*) FROM fraud").fetchone()[0]
        print(f"streamed {n:,} transactions in {elapsed:.1f}s ({n / elapsed:,.0f} rows/s, "
              f"statements of {batch} rows)", file=out)
        print(f"incremental view: {len(view):,} patterns (served: {served:,}); "
              f"full recomputation by DuckDB: {recomputed:,} ({t_re * 1000:.0f} ms)", file=out)
        ok = len(view) == recomputed == served
        print("match" if ok else "MISMATCH", file=out)
        return 0 if ok else 1
    finally:
        session.close()
