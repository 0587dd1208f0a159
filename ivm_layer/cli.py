"""The ``ivm`` command line: ``explain`` and ``demo`` live here; ``shell``, ``daemon`` and
``bench`` are delegated to their own modules, which parse their own arguments."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from .errors import ConfigError, IVMError, SQLError

# Subcommands implemented in their own modules, each with its own argument parser: `ivm X ...`
# hands everything after X to module.main(argv).
_DELEGATED = {
    "serve": ("ivm_layer.serve.cli", "the PostgreSQL-wire endpoint: any client reads and subscribes to views"),
    "shell": ("ivm_layer.shell", "the proxy CLI: a psql-like shell with incremental views"),
    "daemon": ("ivm_layer.daemon.cli", "the CDC daemon: change streams through Spark into views and sinks"),
    "status": ("ivm_layer.status", "WAL held by the replication slots of PostgreSQL sessions and daemons, open or closed"),
    "bench": ("ivm_layer.bench.__main__", "the benchmark suite (ivm bench session: what a session user feels)"),
}


def _parse_schema(text: str) -> dict:
    """``--schema`` is JSON (``{"r": ["a", "b"]}``) or ``r(a,b);s(c,d)``."""
    text = text.strip()
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--schema is not valid JSON: {e}") from None
    schema: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if "(" not in part or not part.endswith(")"):
            raise ConfigError(f"--schema entry {part!r} must look like table(col1, col2)")
        name, cols = part[:-1].split("(", 1)
        schema[name.strip()] = [c.strip() for c in cols.split(",") if c.strip()]
    if not schema:
        raise ConfigError("--schema is empty")
    return schema


def _cmd_explain(args: argparse.Namespace) -> int:
    from .compile import compile_view

    sql = args.sql
    if sql == "-":
        sql = sys.stdin.read()
    static = [t.strip() for t in (args.static or "").split(",") if t.strip()]
    params = [p.strip() for p in (args.params or "").split(",") if p.strip()]
    if sql.lstrip()[:6].upper() == "CREATE":  # CREATE INCREMENTAL VIEW … WITH (static = …) AS SELECT …
        from .sql.statements import CreateIncrementalView, classify

        stmt = classify(sql.strip().rstrip(";"), args.dialect)
        if not isinstance(stmt, CreateIncrementalView):
            raise SQLError("ivm explain takes a SELECT or a CREATE INCREMENTAL VIEW … AS SELECT … statement")
        sql = stmt.select_sql
        static = list(dict.fromkeys([*static, *stmt.static]))
        if stmt.epsilon is not None and getattr(args, "epsilon", None) is None:
            args.epsilon = stmt.epsilon
    eps = getattr(args, "epsilon", None)
    view = compile_view(sql, _parse_schema(args.schema), dialect=args.dialect, static=static, params=params,
                        **({"epsilon": eps} if eps is not None else {}))
    print(view.explain())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run

    return run(n=args.rows, batch=args.batch, seed=args.seed, plan=args.plan, history=args.history)


def _delegate(name: str, argv: list[str]) -> int:
    import importlib

    module, _ = _DELEGATED[name]
    return importlib.import_module(module).main(argv) or 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ivm", description="Incremental views over DuckDB and PostgreSQL change streams.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ex = sub.add_parser("explain", help="print the plan and the class of a view")
    ex.add_argument("sql", help="the SELECT defining the view, or a CREATE INCREMENTAL VIEW … AS SELECT … "
                    "statement ('-' reads it from stdin)")
    ex.add_argument("--schema", required=True,
                    help='tables and columns: JSON {"r": ["a","b"]} or "r(a,b); s(b,c)"')
    ex.add_argument("--dialect", default="duckdb", help="SQL dialect of the query (default: duckdb)")
    ex.add_argument("--static", default="",
                    help="comma-separated tables loaded once (paper 003), like WITH (static = '…')")
    ex.add_argument("--params", default="",
                    help="comma-separated output columns that become lookup inputs (paper 004)")
    ex.add_argument("--epsilon", type=float, default=None,
                    help="paper 004's heavy/light trade-off for a CQAP1 parameterized view, like WITH (epsilon = …)")
    ex.set_defaults(func=_cmd_explain)
    de = sub.add_parser("demo", help="the fraud-detection example end to end on embedded DuckDB")
    de.add_argument("--history", type=int, default=100_000,
                    help="past transactions in the table before the view is created (default 100000)")
    de.add_argument("--rows", type=int, default=2_000, help="new transactions to stream (default 2000)")
    de.add_argument("--batch", type=int, default=1, help="rows per INSERT statement (default 1)")
    de.add_argument("--plan", action="store_true", help="print the view's plan (the GJT, class, costs) first")
    de.add_argument("--seed", type=int, default=7, help="random seed of the generated stream")
    de.set_defaults(func=_cmd_demo)
    for name, (_, what) in _DELEGATED.items():
        p = sub.add_parser(name, help=what, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(argv)
    except BrokenPipeError:  # `ivm … | head`: the reader went away; stop quietly like other CLIs
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: list[str]) -> int:
    if argv[:1] and argv[0] in _DELEGATED:  # the rest belongs to the subcommand's own parser
        try:
            return _delegate(argv[0], argv[1:])
        except IVMError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    parser = build_parser()
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
