"""What backslash commands and ``\\watch`` need from the shell that runs them (the
:class:`~ivm_layer.shell.runner.Runner` provides it): typed here so that they do not import
the runner, which imports them."""

from __future__ import annotations

from typing import Any, Protocol

from .render import Display


class ShellContext(Protocol):
    """The session, the display settings and variables, the outputs, statement and file
    execution, and the query buffer of the input being run."""

    session: Any
    display: Display
    variables: Any
    notices: Any
    db_errors: tuple[type[BaseException], ...]
    mode: str                   # how the shell works with the database (for \conninfo)
    database: str               # the database's name
    last_query: str | None

    def write(self, text: str) -> None: ...          # query output (\o may redirect it)

    def say(self, text: str) -> None: ...            # messages: always the screen

    def flush(self) -> None: ...

    def execute(self, sql: str) -> Any: ...

    def run_query(self, sql: str, target: str | None = None) -> None: ...

    def run_file(self, path: str) -> bool: ...

    def resolve_path(self, path: str, relative: bool) -> str: ...

    def set_output(self, spec: str | None) -> None: ...

    def scanner_pending(self) -> str: ...

    def scanner_take(self) -> str: ...

    def read_data_lines(self) -> list[str] | None: ...
