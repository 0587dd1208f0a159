"""What backslash commands and ``\\watch`` need from the shell that runs them (the
:class:`~ivm_layer.shell.runner.Runner` provides it): typed here so that they do not import
the runner, which imports them."""

from __future__ import annotations

from typing import Any, Protocol

from .render import Display


class ShellContext(Protocol):
    """The session, the display settings, the output, and statement/file execution."""

    session: Any
    display: Display

    def write(self, text: str) -> None: ...

    def execute(self, sql: str) -> Any: ...

    def run_file(self, path: str) -> bool: ...
