"""``ivm demo``: the credit-card fraud view of paper 000 §1, end to end on embedded DuckDB.

Creates a ``trans`` table, ``CREATE INCREMENTAL VIEW fraud AS`` the query in
``ivm_layer/sql_examples/fraud.sql``, streams generated transactions through the session in small
INSERT statements (with a progress bar), prints the first detected patterns as they appear,
then races the same statements through plain DuckDB recomputing the view after each one, and
prints both times, the ratio, and whether the two views agree.
"""

from __future__ import annotations

import random
import sys
import time
from typing import TextIO


def fraud_sql() -> str:
    """The fraud query's SELECT (comments stripped), from the SQL examples packaged with
    :mod:`ivm_layer.sql_examples`."""
    from .sql_examples import read

    text = read("fraud")
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
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
A table of {history:,} past transactions is loaded, then {n:,} new ones arrive in {statements:,}
INSERT statements of {batch} row(s), written twice: through an ivm-layer session, which keeps the
view fresh after every statement, and into plain DuckDB, which recomputes the view after every
statement (CREATE OR REPLACE TABLE … AS the view's query). `ivm demo --plan` shows the plan.
"""

ACCOUNTS = 250   # cards in the generated stream: enough activity per card to show patterns
TABLE = "CREATE TABLE trans (id INTEGER, acc INTEGER, ts INTEGER, amnt INTEGER)"


def _statements(history: int, n: int, batch: int, seed: int):
    """``(rows so far, INSERT statement)`` for the stream after the first ``history`` rows."""
    pending: list[tuple] = []
    stream = transactions(history + n, seed, ACCOUNTS)
    for _ in range(history):
        next(stream)
    for i, row in enumerate(stream, 1):
        pending.append(row)
        if len(pending) == batch or i == n:
            yield i, "INSERT INTO trans VALUES " + ", ".join(f"({a}, {b}, {c}, {d})" for a, b, c, d in pending)
            pending.clear()


def _load_history(execute, history: int, seed: int) -> None:
    """The first ``history`` transactions in one statement (DuckDB generates nothing: the rows
    come from the same seeded stream)."""
    stream = transactions(history + 1, seed, ACCOUNTS)
    rows = [next(stream) for _ in range(history)]
    for start in range(0, len(rows), 50_000):
        part = rows[start:start + 50_000]
        execute("INSERT INTO trans VALUES " + ", ".join(f"({a}, {b}, {c}, {d})" for a, b, c, d in part))


def recompute(history: int, n: int, batch: int, seed: int, body: str,
              budget: float | None = None) -> tuple[float, int, int]:
    """Plain DuckDB: each statement, then the view recomputed into a table. Returns (seconds,
    statements run, final view size); stops past ``budget`` seconds."""
    import duckdb

    conn = duckdb.connect()
    conn.execute(TABLE)
    _load_history(conn.execute, history, seed)
    done = 0
    started = time.perf_counter()
    for _, sql in _statements(history, n, batch, seed):
        conn.execute(sql)
        conn.execute(f"CREATE OR REPLACE TABLE fraud AS {body}")
        done += 1
        if budget is not None and time.perf_counter() - started > budget:
            break
    elapsed = time.perf_counter() - started
    size = conn.execute("SELECT count(*) FROM fraud").fetchone()[0] if done else 0
    conn.close()
    return elapsed, done, size


def race(n: int = 2_000, batch: int = 1, seed: int = 7, show: int = 10, plan: bool = False,
         out: TextIO = sys.stdout, err: TextIO = sys.stderr, history: int = 100_000) -> dict:
    """The demo's race; returns its figures (``session_s``, ``duckdb_s``, per-statement
    milliseconds, ``ratio`` per statement, ``match``)."""
    from .session import connect

    body = fraud_sql()
    statements = -(-n // batch)
    print(INTRO.format(history=history, n=n, statements=statements, batch=batch), file=out)
    session = connect()
    try:
        session.execute(TABLE)
        _load_history(session.execute, history, seed)
        t0 = time.perf_counter()
        session.execute(f"CREATE INCREMENTAL VIEW fraud AS {body}")
        print(f"view created over {history:,} rows in {time.perf_counter() - t0:.1f} s "
              f"({len(session.view('fraud')):,} patterns so far)", file=out)
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
        for i, sql in _statements(history, n, batch, seed):
            session.execute(sql)
            progress.update(i, found[0])
        progress.close()
        t_session = time.perf_counter() - started
        served = session.execute("SELECT count(*) FROM fraud").fetchone()[0]
        t_duck, done, size = recompute(history, n, batch, seed, body, budget=15.0)
        full = done == statements
        per_session = 1000 * t_session / statements
        per_duck = 1000 * t_duck / max(done, 1)
        ratio = per_duck / max(per_session, 1e-9)
        print(f"ivm-layer session: {statements:,} statements in {t_session:.2f} s, {per_session:.2f} ms each "
              f"(view fresh after each, {len(view):,} patterns)", file=out)
        what = f"{t_duck:.2f} s" if full else f"stopped after {t_duck:.1f} s at statement {done:,} of {statements:,}"
        print(f"plain DuckDB, view recomputed after each statement: {what}, {per_duck:.2f} ms each", file=out)
        print(f"the session is {ratio:,.1f}x faster per statement", file=out)
        ok = len(view) == served and (not full or size == served)
        print("match" if ok else "MISMATCH", file=out)
        return {"history": history, "rows": n, "statements": statements, "batch": batch,
                "session_s": round(t_session, 3), "session_ms_per_statement": round(per_session, 3),
                "duckdb_s": round(t_duck, 3), "duckdb_statements": done,
                "duckdb_ms_per_statement": round(per_duck, 3), "ratio": round(ratio, 2), "match": ok}
    finally:
        session.close()


def run(n: int = 2_000, batch: int = 1, seed: int = 7, show: int = 10, plan: bool = False,
        out: TextIO = sys.stdout, err: TextIO = sys.stderr, history: int = 100_000) -> int:
    """Run the demo; returns 0 when the incremental view equals DuckDB's recomputation."""
    return 0 if race(n, batch, seed, show, plan, out, err, history)["match"] else 1
