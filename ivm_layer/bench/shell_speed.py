"""``ivm shell`` beside psql: a pasted block, ``-f``, standard input and start-up, same machine, same run.

    python -m ivm_layer.bench.shell_speed                  # starts a throwaway PostgreSQL 15 cluster
    python -m ivm_layer.bench.shell_speed --lines 2000 --runs 3 --url postgresql://…
    python -m ivm_layer.bench.shell_speed --ivm "env PYTHONPATH=/old/tree python -m ivm_layer.cli"

The script (``--lines`` lines, default 2,000): ``DROP``/``CREATE TABLE``, then single-row
``INSERT`` s with every 25th one spread over three lines, and a final ``SELECT count(*)``.
The same text goes to each shell four ways:

- ``paste-typed``: written to the shell's pseudo-terminal as fast as it reads, lines ending
  in Enter (a terminal without bracketed paste, or a program typing);
- ``paste-bracketed``: the same wrapped in ``ESC[200~ … ESC[201~`` and followed by Enter,
  as a terminal sends a paste when the program asked for bracketed paste (readline does,
  prompt_toolkit does);
- ``-f FILE`` and standard input (``< FILE``): the whole process, start-up included.

A paste is timed from its first byte to the final count on the screen (the shell was
started and showed its prompt before). ``psql`` runs against PostgreSQL (``--url`` or the
throwaway cluster); ``ivm shell`` against an in-memory DuckDB (``duckdb``) and the same
PostgreSQL (``postgres``, a session). Runs alternate between the shells. Start-up:
``ivm shell -c "SELECT 1"`` beside ``python -c "import duckdb"`` and ``psql -c "SELECT 1"``.
``duckdb-python`` runs the file's statements through the duckdb module, one ``execute`` each:
the floor for any DuckDB client in Python.
Each figure is the median of ``--runs``; the JSON (``bench-results/shell-speed-*.json``) has
every run and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def script(lines: int, table: str = "paste_t") -> tuple[str, int]:
    """The SQL text of ``lines`` lines and how many rows it inserts."""
    out = [f"DROP TABLE IF EXISTS {table};", f"CREATE TABLE {table} (id INT, acc INT, note VARCHAR(40));"]
    i = 0
    while len(out) < lines - 1:
        if i % 25 == 24:
            out += [f"INSERT INTO {table}", f"  VALUES ({i}, {i % 97},", f"          'note {i}');"]
        else:
            out.append(f"INSERT INTO {table} VALUES ({i}, {i % 97}, 'note {i}');")
        i += 1
    out.append(f"SELECT count(*) AS total FROM {table};")
    return "\n".join(out) + "\n", i


# the floor on DuckDB: the same statements through the duckdb module, one execute() each
_DUCKDB_FLOOR = """
import sys, duckdb
c = duckdb.connect()
for stmt in open(sys.argv[1]).read().split(";\\n"):
    if stmt.strip():
        r = c.execute(stmt)
        if r.description:
            r.fetchall()
"""


def _env() -> dict[str, str]:
    """A user's environment: a fresh home, no history file, and neither PYTHONUNBUFFERED nor
    PYTHONDONTWRITEBYTECODE (set in some CI and sandboxes; no user has them)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")}
    home = tempfile.mkdtemp(prefix="ivm-bench-home-")
    env.update(HOME=home, IVM_HISTFILE="", TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1",
               PSQLRC="/dev/null", COLUMNS="120", LINES="40")
    return env


def _paste(argv: list[str], text: str, total: int, bracketed: bool, timeout: float) -> float:
    import pexpect

    child = pexpect.spawn(argv[0], argv[1:], env=_env(), encoding="utf-8", dimensions=(40, 120),
                          timeout=timeout, maxread=1 << 16, searchwindowsize=1 << 12)
    try:
        child.expect([r"=>", r"=#"], timeout=60)
        time.sleep(0.3)                        # let the prompt settle (readline / prompt_toolkit)
        data = text.replace("\n", "\r")
        if bracketed:
            data = "\x1b[200~" + data + "\x1b[201~\r"
        t0 = time.perf_counter()
        writer = threading.Thread(target=child.send, args=(data,), daemon=True)
        writer.start()
        child.expect(rf"total\s*\r\n-+\r\n\s*{total}\s*\r\n\(1 row\)")
        elapsed = time.perf_counter() - t0
        writer.join(timeout)
        return elapsed
    finally:
        child.close(force=True)


def _whole(argv: list[str], stdin_path: str | None, timeout: float) -> float:
    t0 = time.perf_counter()
    with open(stdin_path or os.devnull, "rb") as f:
        r = subprocess.run(argv, stdin=f, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env=_env(), timeout=timeout, check=False)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ivm_layer.bench.shell_speed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=int, default=2000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--url", help="PostgreSQL for psql and the ivm PostgreSQL session (default: a throwaway cluster)")
    p.add_argument("--ivm", default=f"{shlex.quote(sys.executable)} -m ivm_layer.cli",
                   help="how to start ivm (default: this Python's ivm_layer)")
    p.add_argument("--psql", default=shutil.which("psql") or "/usr/lib/postgresql/15/bin/psql")
    p.add_argument("--only", default="", help="comma-separated subset: paste-typed,paste-bracketed,file,stdin,startup")
    p.add_argument("--targets", default="duckdb,postgres", help="ivm shell targets: duckdb,postgres")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", default="bench-results")
    args = p.parse_args(argv)
    cluster = None
    url = args.url
    if url is None:
        from .pg_cluster import Cluster

        cluster = Cluster().start()
        cluster.wait_ready()
        url = cluster.create_database()
    try:
        return _run(args, url)
    finally:
        if cluster is not None:
            cluster.stop()


def _run(args, url: str) -> int:
    text, total = script(args.lines)
    path = Path(tempfile.mkdtemp(prefix="ivm-bench-shell-")) / "paste.sql"
    path.write_text(text)
    ivm = shlex.split(args.ivm)
    shells = {"psql/postgres": [args.psql, "-X", url]}
    targets = [t for t in args.targets.split(",") if t]
    if "duckdb" in targets:
        shells["ivm/duckdb"] = ivm + ["shell"]
    if "postgres" in targets:
        shells["ivm/postgres"] = ivm + ["shell", url]
    only = set(filter(None, args.only.split(","))) or {"paste-typed", "paste-bracketed", "file", "stdin", "startup"}
    floor = [sys.executable, "-c", _DUCKDB_FLOOR, str(path)]
    runs: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.runs):
        for name, argv in shells.items():
            r = runs.setdefault(name, {})
            if "paste-typed" in only:
                r.setdefault("paste-typed", []).append(_paste(argv, text, total, False, args.timeout))
            if "paste-bracketed" in only:
                r.setdefault("paste-bracketed", []).append(_paste(argv, text, total, True, args.timeout))
            if "file" in only:
                r.setdefault("file", []).append(_whole(argv + ["-f", str(path)], None, args.timeout))
            if "stdin" in only:
                r.setdefault("stdin", []).append(_whole(argv, str(path), args.timeout))
        if "file" in only and "duckdb" in targets:    # what any DuckDB client in Python pays
            runs.setdefault("duckdb-python", {}).setdefault("file", []).append(_whole(floor, None, args.timeout))
        if "startup" in only:
            r = runs.setdefault("startup", {})
            r.setdefault("ivm shell -c 'SELECT 1' (DuckDB)", []).append(
                _whole(ivm + ["shell", "-c", "SELECT 1"], None, args.timeout))
            r.setdefault("python -c 'import duckdb'", []).append(
                _whole([sys.executable, "-c", "import duckdb"], None, args.timeout))
            r.setdefault("psql -c 'SELECT 1'", []).append(
                _whole([args.psql, "-X", url, "-c", "SELECT 1"], None, args.timeout))
    medians = {name: {k: round(statistics.median(v), 4) for k, v in r.items()} for name, r in runs.items()}
    ratios = {}
    base = medians.get("psql/postgres", {})
    for name, m in medians.items():
        if name.startswith("ivm/"):
            ratios[name] = {k: round(v / base[k], 2) for k, v in m.items() if base.get(k)}
    doc = {"bench": "shell-speed", "lines": args.lines, "statements": total + 3, "runs": args.runs,
           "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "load_avg": os.getloadavg(),
           "cpu_count": os.cpu_count(), "ivm": args.ivm, "median_seconds": medians,
           "ratio_to_psql": ratios, "all_seconds": runs}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"shell-speed-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"median_seconds": medians, "ratio_to_psql": ratios, "load_avg": doc["load_avg"]}, indent=2))
    print(f"written to {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
