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
        epilog="URL: nothing (in-memory DuckDB), duckdb:///path/file.duckdb, path/file.duckdb (or .db), "
               "or postgresql://[user[:password]@][host][:port][/dbname] or a libpq conninfo string "
               "(missing parts come from PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD and ~/.pgpass, "
               "as in libpq). Exit status, as psql's: 0 ok; 1 a -c command failed (it stops at its first "
               "error), or a fatal error of the shell (a missing -f file); 2 the connection failed; "
               "3 a script stopped at an error with ON_ERROR_STOP (-v ON_ERROR_STOP=1 or "
               "--on-error-stop); 130 interrupted. "
               "History: $IVM_HISTFILE or ~/.ivm_history (lines with passwords or secrets are not kept).")
    p.add_argument("url", nargs="?", default=None, help="the database (default: in-memory DuckDB)")
    p.add_argument("-c", "--command", dest="actions", action=_Ordered, const="c", metavar="SQL",
                   help="run SQL statements and meta-commands and exit; stops at its first error; "
                        "repeatable")
    p.add_argument("-f", "--file", dest="actions", action=_Ordered, const="f", metavar="FILE",
                   help="run the statements of FILE ('-': standard input) and exit; repeatable")
    p.add_argument("--on-error-stop", action="store_true",
                   help="stop scripts (-f, standard input, \\i) at their first error, exit status 3 "
                        "(the same as -v ON_ERROR_STOP=1)")
    p.add_argument("-v", "--set", "--variable", dest="variables", action="append", default=[],
                   metavar="NAME=VALUE", help="set a variable, as \\set does (NAME alone: unset it)")
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
    pg.add_argument("--client", action="store_true",
                    help="be a plain client (like psql): statements go to the server unchanged and the "
                         "server keeps any incremental views; chosen by itself when the server is "
                         "ivm serve (it reports the ivm_version setting). Without it, the shell keeps "
                         "the incremental views itself, from logical replication")
    pg.add_argument("--session", metavar="NAME",
                    help="the layer session whose incremental views to resume (default: default)")
    pg.add_argument("--state-dir", metavar="DIR",
                    help="where the session keeps its views' checkpoints (as ivm_layer.connect(url, "
                         "state_dir=DIR)); give the same directory as the program that created the views "
                         "so they resume instead of being rebuilt from a fresh snapshot")
    pg.add_argument("--set-replica-identity", action="store_true",
                    help="let CREATE INCREMENTAL VIEW set REPLICA IDENTITY FULL on source tables")
    p.set_defaults(actions=[], format="aligned")
    return p
