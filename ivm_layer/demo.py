"""``ivm demo``: the credit-card fraud view of paper 000 §1, end to end on embedded DuckDB.

Creates a ``trans`` table with a history of generated transactions (``executemany``: one
insert of every row, through Arrow), ``CREATE INCREMENTAL VIEW fraud AS`` the query in
``ivm_layer/sql_examples/fraud.sql``, streams new transactions through the session in small
INSERT statements, prints the first detected patterns as they appear, then races the same
statements through plain DuckDB recomputing the view after each one, and prints both times and
the ratio. Every slow phase has a progress bar. The last check compares the engine's view with
DuckDB's own answer to the view's query over the same rows (``EXCEPT ALL`` both ways, in
DuckDB): never the engine with itself.
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
    """A bar for one phase: redrawn in place on a terminal, a line at each quarter otherwise."""

    def __init__(self, total: int, stream: TextIO, label: str = "", unit: str = "rows", width: int = 30):
        self.total, self.stream, self.width = max(total, 1), stream, width
        self.label, self.unit = label, unit
        self.start = time.perf_counter()
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.last = -1

    def update(self, done: int, found: int | None = None) -> None:
        pct = done * 100 // self.total
        if pct == self.last or (not self.tty and pct % 25):
            return
        self.last = pct
        filled = self.width * done // self.total
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        tail = f", {found} patterns" if found is not None else ""
        label = f"{self.label} " if self.label else ""
        line = (f"{label}[{'#' * filled}{'.' * (self.width - filled)}] {pct:3d}% {done:,}/{self.total:,} "
                f"{self.unit}, {rate:,.0f} {self.unit}/s{tail}")
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


def _load_history(executemany, history: int, seed: int, err: TextIO | None = None) -> None:
    """The first ``history`` transactions of the seeded stream, 50,000 rows per
    ``executemany("INSERT INTO trans VALUES (?, ?, ?, ?)", rows)`` (one statement each: an
    Arrow table of the rows), with a bar on ``err``."""
    stream = transactions(history + 1, seed, ACCOUNTS)
    bar = _Progress(history, err, "loading the history") if err is not None and history else None
    done = 0
    while done < history:
        part = [next(stream) for _ in range(min(50_000, history - done))]
        executemany("INSERT INTO trans VALUES (?, ?, ?, ?)", part)
        done += len(part)
        if bar is not None:
            bar.update(done)
    if bar is not None:
        bar.close()


def _duckdb_executemany(conn):
    """``executemany`` for plain DuckDB with the session's batching: the rows as one Arrow table."""
    import pyarrow as pa

    def executemany(sql: str, rows: list[tuple]) -> None:
        cols = list(zip(*rows))
        conn.register("_demo_rows", pa.table({f"c{i}": list(c) for i, c in enumerate(cols)}))
        try:
            conn.execute(sql.replace("VALUES (?, ?, ?, ?)", "SELECT * FROM _demo_rows"))
        finally:
            conn.unregister("_demo_rows")

    return executemany


def recompute(history: int, n: int, batch: int, seed: int, body: str,
              budget: float | None = None, err: TextIO | None = None) -> tuple[float, int, int]:
    """Plain DuckDB: each statement, then the view recomputed into a table. Returns (seconds,
    statements run, final view size); stops past ``budget`` seconds."""
    import duckdb

    conn = duckdb.connect()
    conn.execute(TABLE)
    _load_history(_duckdb_executemany(conn), history, seed)
    done = 0
    total = -(-n // batch)
    bar = _Progress(total, err, "plain DuckDB recomputing", "statements") if err is not None else None
    started = time.perf_counter()
    for _, sql in _statements(history, n, batch, seed):
        conn.execute(sql)
        conn.execute(f"CREATE OR REPLACE TABLE fraud AS {body}")
        done += 1
        if bar is not None:
            bar.update(done)
        if budget is not None and time.perf_counter() - started > budget:
            break
    if bar is not None:
        bar.close()
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
        _load_history(session.executemany, history, seed, err)
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
        t_duck, done, size = recompute(history, n, batch, seed, body, budget=15.0, err=err)
        full = done == statements
        per_session = 1000 * t_session / statements
        per_duck = 1000 * t_duck / max(done, 1)
        ratio = per_duck / max(per_session, 1e-9)
        print(f"ivm-layer session: {statements:,} statements in {t_session:.2f} s, {per_session:.2f} ms each "
              f"(view fresh after each, {len(view):,} patterns)", file=out)
        what = f"{t_duck:.2f} s" if full else f"stopped after {t_duck:.1f} s at statement {done:,} of {statements:,}"
        print(f"plain DuckDB, view recomputed after each statement: {what}, {per_duck:.2f} ms each", file=out)
        print(f"the session is {ratio:,.1f}x faster per statement", file=out)
        # DuckDB's answer to the view's query over the same rows (the session's table), against
        # the engine's rows (the served view): both differences must be empty
        missing, extra = session.execute(
            f"SELECT (SELECT count(*) FROM ((SELECT * FROM ({body}) AS q) EXCEPT ALL SELECT * FROM fraud)), "
            f"(SELECT count(*) FROM (SELECT * FROM fraud EXCEPT ALL (SELECT * FROM ({body}) AS q)))").fetchone()
        ok = missing == 0 and extra == 0 and served == len(view) and (not full or size == served)
        if ok:
            print(f"the view's {served:,} rows equal DuckDB's answer to its query over the same "
                  f"{history + n:,} rows", file=out)
        else:
            print(f"DuckDB's answer over the same rows has {missing:,} row(s) the view lacks and lacks "
                  f"{extra:,} of the view's", file=out)
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
