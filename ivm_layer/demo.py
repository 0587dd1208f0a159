"""``ivm demo``: the credit-card fraud view of paper 000 §1, end to end on embedded DuckDB.

Creates a ``trans`` table, ``CREATE INCREMENTAL VIEW fraud AS`` the query in
``sql_examples/fraud.sql``, streams generated transactions through the session in small
INSERT statements (with a progress bar), prints the first detected patterns as they appear,
then races the same statements through plain DuckDB recomputing the view after each one, and
prints both times, the ratio, and whether the two views agree.
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


INTRO = """\
ivm demo: card-fraud detection (paper 000, section 1) on embedded DuckDB.
The incremental view `fraud` finds two small purchases followed, within the hour, by a large
one on the same account: a three-way self-join with inequalities on time and amount.
The same {n:,} transactions are written twice, in {statements:,} INSERT statements of {batch}:
through an ivm-layer session, which keeps the view fresh after every statement, and into
plain DuckDB, which recomputes the view after every statement (CREATE OR REPLACE TABLE …
AS the view's query). `ivm demo --plan` shows how the view is maintained.
"""


def _statements(n: int, batch: int, seed: int):
    pending: list[tuple] = []
    for i, row in enumerate(transactions(n, seed), 1):
        pending.append(row)
        if len(pending) == batch or i == n:
            yield i, "INSERT INTO trans VALUES " + ", ".join(f"({a}, {b}, {c}, {d})" for a, b, c, d in pending)
            pending.clear()


def recompute(n: int, batch: int, seed: int, body: str, budget: float | None = None) -> tuple[float, int, int]:
    """Plain DuckDB: each statement, then the view recomputed into a table. Returns (seconds,
    statements run, final view size); stops early (extrapolating nothing) past ``budget`` s."""
    import duckdb

    conn = duckdb.connect()
    conn.execute("CREATE TABLE trans (id INTEGER, acc INTEGER, ts INTEGER, amnt INTEGER)")
    done = 0
    started = time.perf_counter()
    for _, sql in _statements(n, batch, seed):
        conn.execute(sql)
        conn.execute(f"CREATE OR REPLACE TABLE fraud AS {body}")
        done += 1
        if budget is not None and time.perf_counter() - started > budget:
            break
    elapsed = time.perf_counter() - started
    size = conn.execute("SELECT count(*) FROM fraud").fetchone()[0]
    conn.close()
    return elapsed, done, size


def race(n: int = 20_000, batch: int = 20, seed: int = 7, show: int = 10, plan: bool = False,
         out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> dict:
    """The demo's race; returns its figures (``session_s``, ``duckdb_s``, ``ratio``, ``match``)."""
    from .sessions import connect

    body = fraud_sql()
    statements = -(-n // batch)
    print(INTRO.format(n=n, statements=statements, batch=batch), file=out)
    session = connect()
    try:
        session.execute("CREATE TABLE trans (id INTEGER, acc INTEGER, ts INTEGER, amnt INTEGER)")
        session.execute(f"CREATE INCREMENTAL VIEW fraud AS {body}")
        view = session.view("fraud")
        if plan:
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

        session.subscribe("fraud", on_change)
        progress = _Progress(n, err)
        started = time.perf_counter()
        for i, sql in _statements(n, batch, seed):
            session.execute(sql)
            progress.update(i, found[0])
        progress.close()
        t_session = time.perf_counter() - started
        served = session.execute("SELECT count(*) FROM fraud").fetchone()[0]
        t_duck, done, size = recompute(n, batch, seed, body, budget=max(60.0, 40 * t_session))
        full = done == statements
        print(f"ivm-layer session: {n:,} rows in {statements:,} statements, view fresh after each: "
              f"{t_session:.2f} s ({len(view):,} patterns)", file=out)
        if full:
            print(f"plain DuckDB, view recomputed after each statement: {t_duck:.2f} s "
                  f"({size:,} patterns)", file=out)
            ratio = t_duck / max(t_session, 1e-9)
            print(f"the session is {ratio:,.1f}x faster", file=out)
        else:
            print(f"plain DuckDB, view recomputed after each statement: stopped after {t_duck:.0f} s "
                  f"at statement {done:,} of {statements:,}", file=out)
            ratio = None
        ok = len(view) == served and (not full or size == served)
        print("match" if ok else "MISMATCH", file=out)
        return {"rows": n, "statements": statements, "session_s": round(t_session, 3),
                "duckdb_s": round(t_duck, 3), "duckdb_complete": full,
                "ratio": round(ratio, 2) if ratio else None, "match": ok}
    finally:
        session.close()


def run(n: int = 20_000, batch: int = 20, seed: int = 7, show: int = 10, plan: bool = False,
        out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run the demo; returns 0 when the incremental view equals DuckDB's recomputation."""
    return 0 if race(n, batch, seed, show, plan, out, err)["match"] else 1
