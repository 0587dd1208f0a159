"""psql-style variables: ``\\set``, ``\\unset``, ``-v NAME=VALUE``, ``:name`` interpolation.

A few names mean something to the shell, as in psql: ``ON_ERROR_STOP`` (a script stops at
its first error, exit status 3) and ``QUIET`` are booleans (``on``/``off``, ``true``/``false``,
``yes``/``no``, ``1``/``0``; ``\\set NAME`` alone is ``on``); after each statement the shell
sets ``ERROR`` (``true``/``false``), ``ROW_COUNT``, ``SQLSTATE`` and ``LAST_ERROR_MESSAGE``;
``DBNAME``, ``USER``, ``HOST``, ``PORT`` and ``IVM_VERSION`` describe the connection.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import IVMError

_NAME = re.compile(r"[A-Za-z0-9_]+")
_TRUE = ("on", "true", "yes", "1")
_FALSE = ("off", "false", "no", "0")
BOOLEANS = ("ON_ERROR_STOP", "QUIET")


class VariableError(IVMError):
    """A variable name or value the shell cannot take."""


def parse_bool(value: str, name: str) -> bool:
    """psql's boolean spelling: a unique prefix of on/off/true/false/yes/no, or 1/0."""
    v = value.strip().lower()
    if v and v not in ("o",):
        for word in _TRUE:
            if word.startswith(v):
                return True
        for word in _FALSE:
            if word.startswith(v):
                return False
    raise VariableError(f"unrecognized value \"{value}\" for \"{name}\": Boolean expected")


class Variables:
    """The shell's variables; ``on_change(name, value)`` is called after a special one changes."""

    def __init__(self, on_change: Callable[[str, str | None], None] | None = None):
        self._values: dict[str, str] = {"ON_ERROR_STOP": "off", "QUIET": "off"}
        self.on_change = on_change

    def get(self, name: str) -> str | None:
        return self._values.get(name)

    def flag(self, name: str) -> bool:
        value = self._values.get(name)
        return value is not None and parse_bool(value, name)

    def set(self, name: str, value: str) -> None:
        if not _NAME.fullmatch(name):
            raise VariableError(f"invalid variable name: \"{name}\"")
        if name in BOOLEANS:
            value = "on" if value == "" else value
            parse_bool(value, name)
        self._values[name] = value
        if self.on_change is not None and name in BOOLEANS:
            self.on_change(name, value)

    def unset(self, name: str) -> None:
        if name in BOOLEANS:  # psql: \unset of a boolean setting turns it off
            self.set(name, "off")
            return
        self._values.pop(name, None)

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._values.items())

    def quiet_set(self, name: str, value: str | None) -> None:
        """Set (or, with None, remove) a variable the shell maintains itself."""
        if value is None:
            self._values.pop(name, None)
        else:
            self._values[name] = value
