"""Helpers of the ``ivm serve`` tests: a real ``ivm serve`` child process on a free port
(:class:`ServeProcess`) and the real psql (:func:`psql`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """``python -m ivm_layer serve DATABASE --port N …`` as a child process."""

    def __init__(self, database: str | None, *args: str, env: dict | None = None, log: Path | None = None,
                 host: str = "127.0.0.1"):
        self.database = database
        self.args = list(args)
        self.env = dict(os.environ, **(env or {}))
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.port = free_port()
        self.host = host
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.banner = ""

    def start(self, timeout: float = 60.0) -> ServeProcess:
        cmd = [sys.executable, "-m", "ivm_layer", "serve"]
        if self.database is not None:
            cmd.append(self.database)
        cmd += ["--host", self.host, "--port", str(self.port), *self.args]
        err = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=err)
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"ivm serve:"):
                self.banner = line.decode()
                return self
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError(f"ivm serve did not start (exit {self.proc.poll()}): {line!r} "
                           f"{self.log.read_text()[-3000:] if self.log and self.log.exists() else ''}")

    def url(self, user: str = "ivm", db: str = "shop", password: str | None = None, **opts) -> str:
        auth = f"{user}:{password}@" if password is not None else f"{user}@"
        q = "&".join(f"{k}={v}" for k, v in opts.items())
        return f"postgresql://{auth}{self.host}:{self.port}/{db}" + (f"?{q}" if q else "")

    def dsn(self, user: str = "ivm", db: str = "shop") -> dict:
        return {"host": self.host, "port": self.port, "user": user, "dbname": db}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()



def psql(server: ServeProcess, *args: str, input: str | None = None, check: bool = True,
         timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run the real psql against ``server`` (no .psqlrc, no pager)."""
    env = dict(os.environ, PGHOST=server.host, PGPORT=str(server.port), PGUSER="ivm", PGDATABASE="shop",
               PAGER="cat", PSQL_PAGER="cat", PGCONNECT_TIMEOUT="10")
    env.pop("PGPASSWORD", None)
    res = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", *args], input=input, capture_output=True,
                         text=True, env=env, timeout=timeout, check=False)
    if check and res.returncode != 0:
        raise AssertionError(f"psql {args} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res
