"""Command-line arguments of ``ivm shell``, in psql's spelling where psql has one."""

from __future__ import annotations

import argparse


class _Ordered(argparse.Action):
    """``-c`` and ``-f`` may repeat and run in the order given (like psql)."""

    def __call__(self, parser, namespace, values, option_string=None):
        actions = list(getattr(namespace, "actions", None) or [])
        actions.append((self.const, values))
        namespace.actions = actions


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ivm shell",
        description="A psql-like shell with incremental views over DuckDB or PostgreSQL. "
                    "Without -c/-f it reads statements from standard input when that is not a "
                    "terminal, else it is interactive.",
        epilog="URL: nothing (in-memory DuckDB), duckdb:///path/file.duckdb, path/file.duckdb, "
               "or postgresql://[user[:password]@][host][:port][/dbname] (missing parts come from "
               "PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD and ~/.pgpass, as in libpq). "
               "Exit status: 0 ok, 1 connection failure or the last statement failed, "
               "3 a statement failed with --on-error-stop. "
               "History: $IVM_HISTFILE or ~/.ivm_history (lines with passwords or secrets are not kept).")
    p.add_argument("url", nargs="?", default=None, help="the database (default: in-memory DuckDB)")
    p.add_argument("-c", "--command", dest="actions", action=_Ordered, const="c", metavar="SQL",
                   help="run SQL statements (or one meta-command) and exit; repeatable")
    p.add_argument("-f", "--file", dest="actions", action=_Ordered, const="f", metavar="FILE",
                   help="run the statements of FILE ('-': standard input) and exit; repeatable")
    p.add_argument("--on-error-stop", action="store_true",
                   help="stop at the first failing statement, exit status 3")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", dest="format", action="store_const", const="csv",
                     help="results as CSV (NULL is an empty field)")
    fmt.add_argument("--json", dest="format", action="store_const", const="json",
                     help="results as JSON: one array of row objects per line")
    p.add_argument("-x", "--expanded", action="store_true", help="expanded output (like \\x on)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no banner, command tags (INSERT 0 1) or timing; results only")
    p.add_argument("--null", default="NULL", metavar="TEXT",
                   help="how NULL is shown in aligned output (default: NULL)")
    pg = p.add_argument_group("PostgreSQL")
    pg.add_argument("--session", metavar="NAME",
                    help="the layer session whose incremental views to resume (default: default)")
    pg.add_argument("--set-replica-identity", action="store_true",
                    help="let CREATE INCREMENTAL VIEW set REPLICA IDENTITY FULL on source tables")
    p.set_defaults(actions=[], format="aligned")
    return p
