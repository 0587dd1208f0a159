"""Where query results go: the screen, a file (``\\o FILE``, ``\\g FILE``) or a command's
standard input (``\\o |COMMAND``, ``\\g |COMMAND``), as in psql."""

from __future__ import annotations

import os
import subprocess
from typing import IO

from .meta import ShellError


class Target:
    """An open output: ``stream`` to write to, :meth:`close` when done (waits for a pipe's
    command to finish)."""

    def __init__(self, spec: str):
        self.spec = spec.strip()
        self._proc: subprocess.Popen | None = None
        if self.spec.startswith("|"):
            command = self.spec[1:].strip()
            if not command:
                raise ShellError("\\o |COMMAND: the command is missing")
            self._proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, text=True)
            assert self._proc.stdin is not None
            self.stream: IO[str] = self._proc.stdin
            return
        path = os.path.expanduser(self.spec)
        try:
            self.stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as e:
            raise ShellError(f"{self.spec}: {e.strerror or e}") from None

    def close(self) -> None:
        try:
            self.stream.close()
        except OSError:
            pass  # a pipe whose command has already exited
        if self._proc is not None:
            self._proc.wait()
