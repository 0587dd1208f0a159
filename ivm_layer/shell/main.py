"""``ivm shell``: connect, then run ``-c``/``-f`` inputs, standard input, or the REPL."""

from __future__ import annotations

import logging
import os
import shutil
import sys

from ..errors import IVMError
from .args import build_parser
from .meta import QuitShell, ShellError
from .redact import mask
from .render import Display
from .runner import Runner, database_errors

EXIT_OK, EXIT_FATAL, EXIT_SCRIPT_ERROR, EXIT_INTERRUPTED = 0, 1, 3, 130


def _connect(url: str | None, args) -> object:
    import ivm_layer

    options: dict[str, object] = {}
    if args.session is not None:
        options["session"] = args.session
    if args.set_replica_identity:
        options["set_replica_identity"] = True
    from ..io.postgres.conninfo import is_postgres_target

    if options and not is_postgres_target(url):
        raise ShellError(f"{', '.join('--' + k.replace('_', '-') for k in options)}: "
                         "only for PostgreSQL URLs")
    return ivm_layer.connect(url, **options)


def _database_name(runner: Runner) -> str:
    try:
        res = runner.execute("SELECT current_database()")
        return str(res.rows[0][0]) if res.rows else "ivm"
    except runner.db_errors:
        return "ivm"


def _banner(runner: Runner, url: str | None) -> None:
    from .. import __version__

    s = runner.session
    where = mask(url) if url else "in-memory"
    runner.write(f"ivm shell {__version__} ({'PostgreSQL' if s.dialect == 'postgres' else 'DuckDB'}, "
                 f"{where})\nType \\? for help, \\q to quit.\n")


def main(argv: list[str]) -> int:
    """Run ``ivm shell`` with ``argv`` (the arguments after ``shell``); return the exit status."""
    args = build_parser().parse_args(argv)
    # sqlglot warns on statements it passes through unparsed (ALTER TABLE … REPLICA IDENTITY):
    # noise in a shell, where the database itself is the judge of the SQL.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    interactive = not args.actions and sys.stdin.isatty()
    out_tty = sys.stdout.isatty()
    display = Display(
        format=args.format,
        expanded="on" if args.expanded else "off",
        timing=interactive and not args.quiet,
        quiet=args.quiet,
        null=args.null,
        color=out_tty and args.format == "aligned" and "NO_COLOR" not in os.environ,
        width=shutil.get_terminal_size().columns if out_tty else None,
    )
    try:
        session = _connect(args.url, args)
    except (ShellError, *database_errors()) as e:
        where = mask(args.url) if args.url else "in-memory DuckDB"
        message = mask(str(e).strip())
        if not isinstance(e, IVMError):  # the layer's own messages already name the database
            message = f"cannot connect to {where}: {message}"
        print(f"ivm shell: error: {message}", file=sys.stderr)
        return EXIT_FATAL
    runner = Runner(session, display, interactive=interactive,
                    on_error_stop=args.on_error_stop and not interactive)
    try:
        if interactive:
            from .repl import run_repl

            if not args.quiet:
                _banner(runner, args.url)
            return run_repl(runner, _database_name(runner))
        return _run_batch(runner, args)
    finally:
        try:
            session.close()
        except runner.db_errors as e:
            print(f"ivm shell: error while closing the session: {mask(str(e))}", file=sys.stderr)


def _run_batch(runner: Runner, args) -> int:
    actions = args.actions or [("f", "-")]
    try:
        for kind, value in actions:
            if kind == "c":
                ok = runner.run_source(value, "-c")
            else:
                try:
                    ok = runner.run_file(value)
                except ShellError as e:
                    print(f"ivm shell: error: {mask(str(e))}", file=sys.stderr)
                    return EXIT_FATAL
            if not ok:
                return EXIT_SCRIPT_ERROR if args.on_error_stop else EXIT_INTERRUPTED
    except QuitShell:
        pass
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_FATAL if runner.last_failed else EXIT_OK
