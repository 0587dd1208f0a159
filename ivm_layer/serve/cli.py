"""``ivm serve DATABASE [--host 127.0.0.1] [--port 5433] …``: argument parsing and start-up."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from ..errors import IVMError

log = logging.getLogger("ivm_layer.serve")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ivm serve",
        description="Serve incremental views over the PostgreSQL wire protocol (psql, JDBC, psycopg, "
                    "asyncpg, node-postgres, SQLAlchemy … connect to it like to PostgreSQL).",
        epilog="Examples: ivm serve shop.duckdb;  ivm serve postgresql://app@db/shop --port 6543;  "
               "IVM_SERVE_PASSWORD=… ivm serve shop.duckdb --host 0.0.0.0 --auth scram-sha-256")
    p.add_argument("database", nargs="?", default=None,
                   help="a DuckDB file (path or duckdb:///path; embedded), a postgresql:// URL or conninfo "
                        "(proxy mode); none: an in-memory DuckDB for trying it out")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5433, help="port to listen on (default 5433; 0: any free port)")
    p.add_argument("--auth", default="trust", choices=["trust", "scram-sha-256"],
                   help="trust (loopback only, the default) or scram-sha-256")
    p.add_argument("--users", help="users file for scram-sha-256: name:password or name:SCRAM-SHA-256$… per line "
                                   "(or set IVM_SERVE_PASSWORD [and IVM_SERVE_USER])")
    p.add_argument("--tls-cert", help="TLS certificate (PEM) for sslmode=require")
    p.add_argument("--tls-key", help="TLS private key (PEM)")
    p.add_argument("--max-connections", type=int, default=100, help="clients at once (default 100)")
    p.add_argument("--statement-timeout", type=float, default=0.0,
                   help="default statement timeout in seconds (0: none; clients may SET statement_timeout)")
    p.add_argument("--max-buffered-rows", type=int, default=100_000,
                   help="rows of a result held in memory for a slow or suspended reader before they go to a "
                        "temporary file (default 100000)")
    p.add_argument("--subscriber-backlog", type=int, default=100_000,
                   help="rows of changes a SUBSCRIBE client may fall behind before it is dropped (default 100000)")
    p.add_argument("--subscribe-log", type=int, default=100_000,
                   help="rows of changes kept per subscribed view for RESUME FROM (default 100000)")
    p.add_argument("--socket-send-buffer", type=int, default=256 * 1024,
                   help="kernel send buffer per client socket in bytes (default 262144): with the server's own "
                        "buffers it bounds what a client that stops reading holds")
    p.add_argument("--lock-timeout", type=float, default=60.0,
                   help="seconds a statement waits for the views (a running commit) before failing (default 60)")
    p.add_argument("--shutdown-grace", type=float, default=10.0,
                   help="seconds running statements get to finish on SIGTERM before they are cancelled (default 10)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (/metrics)")
    p.add_argument("--session", default="serve",
                   help="proxy mode: the session name its views are kept under (default serve)")
    p.add_argument("--state-dir", help="proxy mode: where view checkpoints live (default: the session's)")
    p.add_argument("--set-replica-identity", action="store_true",
                   help="proxy mode: set REPLICA IDENTITY FULL on the tables views read (needed for their "
                        "UPDATEs and DELETEs to reach the views)")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING")
    return p


def open_backend(args: argparse.Namespace):
    from ..io.postgres.conninfo import is_postgres_target

    if is_postgres_target(args.database):
        from .proxy import ProxyBackend

        return ProxyBackend(args.database, session=args.session, state_dir=args.state_dir,
                            set_replica_identity=args.set_replica_identity,
                            lock_timeout=args.lock_timeout, spool_rows=args.max_buffered_rows,
                            log_rows=args.subscribe_log, max_backlog=args.subscriber_backlog)
    from .embedded import EmbeddedBackend

    return EmbeddedBackend(args.database, lock_timeout=args.lock_timeout, spool_rows=args.max_buffered_rows,
                           log_rows=args.subscribe_log, max_backlog=args.subscriber_backlog)


async def _serve(args: argparse.Namespace, ready=None) -> int:
    from .auth import Users
    from .server import Server

    users = Users.load(args.users) if args.auth == "scram-sha-256" else None
    metrics = None
    if args.metrics_port is not None:
        from .metrics import Metrics

        metrics = Metrics(args.metrics_port, args.host)
    backend = await asyncio.get_running_loop().run_in_executor(None, open_backend, args)
    try:
        server = Server(backend, args.host, args.port, auth_method=args.auth, users=users,
                        tls_cert=args.tls_cert, tls_key=args.tls_key, max_connections=args.max_connections,
                        statement_timeout=args.statement_timeout, metrics=metrics,
                        shutdown_grace=args.shutdown_grace, send_buffer=args.socket_send_buffer)
        await server.start()
    except BaseException:
        backend.close()
        raise
    server.install_signals()
    where = "in-memory DuckDB" if args.database is None else backend.describe()
    print(f"ivm serve: {where} on {args.host}:{server.port} ({args.auth}"
          f"{', TLS' if server.ssl_context else ''}); stop with Ctrl-C or SIGTERM", flush=True)
    if ready is not None:
        ready(server)
    await server.serve_forever()
    print("ivm serve: stopped; views are checkpointed", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return asyncio.run(_serve(args))
    except IVMError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
