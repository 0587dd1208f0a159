"""``ivm shell``: connect, then run ``-c``/``-f`` inputs, standard input, or the REPL.

Start-up loads only what the target needs: a DuckDB shell never imports psycopg (nor
prompt_toolkit unless it is interactive); a PostgreSQL URL is first opened as a plain
connection only when ``--client`` is given, or to see whether the server is ``ivm serve``
(:mod:`.client`), which costs one connection start.

Exit statuses follow psql: 0; 1 when a ``-c`` command failed (it stops at its first error)
or on a fatal error of the shell (a missing ``-f`` file, arguments it cannot use); 2 when the
connection failed; 3
when a script stopped at an error under ``ON_ERROR_STOP``; 130 when interrupted.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys

from ..errors import IVMError
from .args import build_parser
from .meta import QuitShell, ShellError
from .notices import Notices
from .redact import mask
from .render import Display
from .runner import Runner, database_errors
from .variables import VariableError, Variables

EXIT_OK, EXIT_FAILURE, EXIT_BADCONN, EXIT_USER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(ShellError):
    """The command line asks for something the shell cannot do (exit status 1, as psql)."""

_MEMORY = (None, "duckdb://", "duckdb:///", "duckdb:///:memory:", ":memory:")
FORMS = ("nothing (an in-memory DuckDB), a DuckDB file (app.duckdb, app.db, duckdb:///path/app.duckdb), "
         "or a PostgreSQL URL or conninfo string (postgresql://user@host:5432/db, 'host=… dbname=…')")


def _check_target(url: str | None) -> bool:
    """Whether ``url`` names PostgreSQL; raises :class:`ShellError` when it names nothing the
    shell can open."""
    from ..io.postgres.conninfo import is_postgres_target

    if is_postgres_target(url):
        return True
    if url in _MEMORY or url.startswith("duckdb://") or ("://" not in url and url.endswith((".duckdb", ".db"))):
        return False
    raise UsageError(f"{url!r} is not a database the shell can open; give {FORMS}")


def _connect(url: str | None, args) -> tuple[object, str]:
    """The session (or plain client) for ``url`` and a phrase saying how the shell works with it."""
    postgres = _check_target(url)
    options: dict[str, object] = {}
    if args.session is not None:
        options["session"] = args.session
    if args.state_dir is not None:
        options["state_dir"] = args.state_dir
    if args.set_replica_identity:
        options["set_replica_identity"] = True
    if not postgres:
        if options or args.client:
            given = [*("--" + k.replace("_", "-") for k in options), *(["--client"] if args.client else [])]
            raise UsageError(f"{', '.join(given)}: only for PostgreSQL URLs")
        import ivm_layer

        return ivm_layer.connect(url, **options), "an embedded DuckDB session"
    from .client import ClientSession, open_connection, server_ivm_version

    if args.client or not options:
        conn = open_connection(url)
        if args.client or server_ivm_version(conn):
            if options:
                raise UsageError(f"{', '.join('--' + k.replace('_', '-') for k in options)}: "
                                 "not for a client (the server keeps the views)")
            client = ClientSession(conn, url)
            return client, client.mode
        conn.close()
    import ivm_layer

    session = ivm_layer.connect(url, **options)
    name = getattr(session, "session", "default")
    return session, f"a PostgreSQL session ({name!r}) keeping incremental views from logical replication"


def _database_name(session) -> str:
    try:
        if session.dialect == "postgres":
            return session.connection.info.dbname
        return str(session.connection.execute("SELECT current_database()").fetchone()[0])
    except Exception:  # noqa: BLE001 - a prompt without the name is still a prompt
        return "ivm"


def _banner(runner: Runner, url: str | None) -> None:
    from .. import __version__

    s = runner.session
    where = mask(url) if url else "in-memory"
    kind = "PostgreSQL" if s.dialect == "postgres" else "DuckDB"
    if getattr(s, "ivm_version", None):
        kind = f"ivm serve {s.ivm_version}"
    elif hasattr(s, "view_listing"):
        kind = "PostgreSQL, plain client"
    runner.say(f"ivm shell {__version__} ({kind}, {where})\nType \\? for help, \\q to quit.\n")


def _variables(args) -> Variables:
    variables = Variables()
    for spec in args.variables:
        name, eq, value = spec.partition("=")
        if eq:
            variables.set(name, value)
        else:
            variables.unset(name)
    if args.on_error_stop:
        variables.set("ON_ERROR_STOP", "on")
    return variables


def main(argv: list[str]) -> int:
    """Run ``ivm shell`` with ``argv`` (the arguments after ``shell``); return the exit status."""
    args = build_parser().parse_args(argv)
    # sqlglot warns on statements it passes through unparsed (ALTER TABLE … REPLICA IDENTITY):
    # noise in a shell, where the database itself is the judge of the SQL.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    try:
        variables = _variables(args)
    except VariableError as e:
        print(f"ivm shell: error: {e}", file=sys.stderr)
        return EXIT_FAILURE
    interactive = not args.actions and sys.stdin.isatty()
    out_tty = sys.stdout.isatty()
    display = Display(
        format=args.format,
        expanded="on" if args.expanded else "off",
        timing=interactive and not args.quiet,
        quiet=args.quiet or variables.flag("QUIET"),
        null=args.null,
        color=out_tty and args.format == "aligned" and "NO_COLOR" not in os.environ,
        width=shutil.get_terminal_size().columns if out_tty else None,
    )
    notices = Notices(sys.stderr)
    notices.install()      # warnings while connecting (a view rebuilt …) print as WARNING: lines
    try:
        session, mode = _connect(args.url, args)
    except (ShellError, *database_errors()) as e:
        where = mask(args.url) if args.url else "in-memory DuckDB"
        message = mask(str(e).strip())
        if not isinstance(e, IVMError):  # the layer's own messages already name the database
            message = f"cannot connect to {where}: {message}"
        print(f"ivm shell: error: {message}", file=sys.stderr)
        return EXIT_FAILURE if isinstance(e, UsageError) else EXIT_BADCONN
    runner = Runner(session, display, interactive=interactive, variables=variables, mode=mode,
                    database=_database_name(session))
    runner.notices = notices
    notices.before = runner.flush
    _connection_variables(runner)
    try:
        if interactive:
            from .repl import run_repl

            if not args.quiet:
                _banner(runner, args.url)
            return run_repl(runner, runner.database)
        return _run_batch(runner, args)
    finally:
        runner.close()
        try:
            session.close()
        except runner.db_errors as e:
            print(f"ivm shell: error while closing the session: {mask(str(e))}", file=sys.stderr)


def _connection_variables(runner: Runner) -> None:
    from .. import __version__

    v = runner.variables
    v.quiet_set("DBNAME", runner.database)
    v.quiet_set("IVM_VERSION", __version__)
    if runner.session.dialect == "postgres":
        info = runner.session.connection.info
        v.quiet_set("USER", info.user)
        v.quiet_set("HOST", info.host)
        v.quiet_set("PORT", str(info.port))


def _run_batch(runner: Runner, args) -> int:
    """``-c`` and ``-f`` in the order given (standard input when there are none), with psql's
    exit statuses: each action's own, the next one runs after a failure unless
    ``ON_ERROR_STOP``; the last action's status is the shell's."""
    actions = args.actions or [("f", "-")]
    status = EXIT_OK
    try:
        for kind, value in actions:
            if kind == "c":
                ok = runner.run_source(value, "-c", stop_at_error=True)
                status = EXIT_OK if ok and not runner.last_failed else EXIT_FAILURE
            else:
                try:
                    ok = runner.run_file(value)
                except ShellError as e:
                    print(f"ivm shell: error: {mask(str(e))}", file=sys.stderr)
                    return EXIT_FAILURE
                if not ok:
                    status = EXIT_INTERRUPTED if runner.cancelled else EXIT_USER
                else:
                    status = EXIT_OK
            if status != EXIT_OK and (runner.on_error_stop or status == EXIT_INTERRUPTED):
                break
    except QuitShell:
        pass
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return status
