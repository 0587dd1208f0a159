"""The ``ivm`` command line. ``ivm explain`` prints a view's plan; the other subcommands
(shell, daemon, demo, bench) arrive with their own issues and say so when called."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import IVMError

_PENDING = {
    "shell": "the proxy CLI (`ivm shell`)",
    "daemon": "the CDC daemon on Spark",
}


def _parse_schema(text: str) -> dict:
    """``--schema`` is JSON (``{"r": ["a", "b"]}``) or ``r(a,b);s(c,d)``."""
    text = text.strip()
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise IVMError(f"--schema is not valid JSON: {e}") from None
    schema: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if "(" not in part or not part.endswith(")"):
            raise IVMError(f"--schema entry {part!r} must look like table(col1, col2)")
        name, cols = part[:-1].split("(", 1)
        schema[name.strip()] = [c.strip() for c in cols.split(",") if c.strip()]
    if not schema:
        raise IVMError("--schema is empty")
    return schema


def _cmd_explain(args: argparse.Namespace) -> int:
    from .compile import compile_view

    sql = args.sql
    if sql == "-":
        sql = sys.stdin.read()
    view = compile_view(sql, _parse_schema(args.schema), dialect=args.dialect)
    print(view.explain())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(n=args.rows, batch=args.batch, seed=args.seed)


def _cmd_bench(args: argparse.Namespace) -> int:
    try:
        from bench.engine_smoke import main as bench_main
    except ImportError:
        print("ivm bench: the benchmark suite lives in bench/ of a source checkout; "
              "run it there with `python -m bench.engine_smoke`", file=sys.stderr)
        return 2
    return bench_main(args.rest) or 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ivm", description="Incremental views over DuckDB and PostgreSQL change streams.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ex = sub.add_parser("explain", help="print the plan and the class of a view")
    ex.add_argument("sql", help="the SELECT defining the view ('-' reads it from stdin)")
    ex.add_argument("--schema", required=True,
                    help='tables and columns: JSON {"r": ["a","b"]} or "r(a,b); s(b,c)"')
    ex.add_argument("--dialect", default="duckdb", help="SQL dialect of the query (default: duckdb)")
    ex.set_defaults(func=_cmd_explain)
    de = sub.add_parser("demo", help="the fraud-detection example end to end on embedded DuckDB")
    de.add_argument("--rows", type=int, default=20_000, help="transactions to stream (default 20000)")
    de.add_argument("--batch", type=int, default=200, help="rows per INSERT statement (default 200)")
    de.add_argument("--seed", type=int, default=7, help="random seed of the generated stream")
    de.set_defaults(func=_cmd_demo)
    be = sub.add_parser("bench", help="run the engine benchmark (source checkout)")
    be.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to bench.engine_smoke")
    be.set_defaults(func=_cmd_bench)
    for name, what in _PENDING.items():
        p = sub.add_parser(name, help=f"{what} (not available yet)")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda a, what=what, name=name: _pending(name, what))
    return parser


def _pending(name: str, what: str) -> int:
    print(f"ivm {name}: {what} is not available in this version yet.", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # everything after `bench` belongs to the benchmark's own parser
        return _cmd_bench(argparse.Namespace(rest=argv[1:]))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except IVMError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
