"""A throwaway PostgreSQL cluster for the tests: ``wal_level=logical``, loopback only, a free port.

The test suite starts one cluster per pytest run (session fixture ``pg_cluster`` in
``conftest.py``) and stops it afterwards; nothing has to be installed or started by hand.
``initdb`` refuses to run as root, so when the tests run as root every server command runs as
the ``postgres`` OS user (``runuser -u postgres --``) on a data and socket directory it owns.

By hand::

    python ivm_layer/bench/pg_cluster.py          # start one, print its URL, stop it on Enter
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "wal_level": "logical",
    "max_replication_slots": "64",
    "max_wal_senders": "64",
    "max_connections": "200",
    "fsync": "off",                 # throwaway data: durability of the server itself is not tested
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "64MB",
    "wal_sender_timeout": "60s",
    "log_min_messages": "warning",
}


def find_bindir() -> Path:
    """PostgreSQL's server binaries: ``$PG_BINDIR``, Debian's PostgreSQL 15, or ``pg_config``."""
    cands = [os.environ.get("PG_BINDIR"), "/usr/lib/postgresql/15/bin"]
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        cands.append(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                    check=True).stdout.strip())
    for c in cands:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    raise RuntimeError("PostgreSQL server binaries not found: install postgresql-15 "
                       "(Debian: apt-get install postgresql-15) or set PG_BINDIR")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One PostgreSQL cluster in a temporary directory. ``url(db)`` gives libpq URLs."""

    def __init__(self, base: str | None = None):
        self.bindir = find_bindir()
        self.root = Path(base or tempfile.mkdtemp(prefix="ivm-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.user = "postgres"
        self._as_postgres = os.geteuid() == 0
        self.started = False

    # -- lifecycle --------------------------------------------------------------------------
    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd="/")
        if check and res.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({res.returncode}): {res.stderr.strip()}\n{tail}")
        return res

    def start(self) -> Cluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            for p in (self.root, self.sock):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        opts = " ".join(f"-c {k}={v}" for k, v in SERVER_SETTINGS.items())
        opts += f" -p {self.port} -k {self.sock}"
        for attempt in range(3):
            res = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", opts,
                            "-w", "-t", "60", "start", check=False)
            if res.returncode == 0:
                break
            # another process may have taken the port between free_port() and the bind
            self.port = free_port()
            opts = opts.rsplit(" -p ", 1)[0] + f" -p {self.port} -k {self.sock}"
        else:
            raise RuntimeError(f"pg_ctl start failed: {res.stderr}\n{self.log.read_text()[-2000:]}")
        self.started = True
        return self

    def stop(self) -> None:
        if self.started:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self, mode: str = "fast", timeout: int = 60) -> subprocess.CompletedProcess:
        """``pg_ctl restart -m mode`` (the same options; waits up to ``timeout`` s); the
        completed process, whatever its exit code (a test asserts it)."""
        return self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", mode, "-w",
                         "-t", str(timeout), "restart", check=False)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- use --------------------------------------------------------------------------------
    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, prefix: str = "t") -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


if __name__ == "__main__":
    with Cluster() as c:
        c.wait_ready()
        print(c.url())
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            input("PostgreSQL is running; press Enter to stop it. ")
