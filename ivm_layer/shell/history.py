"""The REPL's history file: ``$IVM_HISTFILE`` or ``~/.ivm_history`` (mode 0600).

Entries that may carry a credential (:func:`redact.is_sensitive`: a password or secret, a URL
with a password) are never written to the file nor kept for recall in the session, the way
psql users keep such lines out with HISTCONTROL. ``IVM_HISTFILE=`` (empty) disables the file.
"""

from __future__ import annotations

import os

from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from .redact import is_sensitive


def history_path() -> str | None:
    """Where the history file is, or None when it is disabled."""
    path = os.environ.get("IVM_HISTFILE")
    if path is None:
        return os.path.join(os.path.expanduser("~"), ".ivm_history")
    return os.path.expanduser(path) if path.strip() else None


class RedactingFileHistory(FileHistory):
    """A :class:`FileHistory` that drops entries carrying credentials."""

    def append_string(self, string: str) -> None:
        if is_sensitive(string):
            return
        super().append_string(string)


class RedactingMemoryHistory(InMemoryHistory):
    """An in-memory history (no file) that drops entries carrying credentials."""

    def append_string(self, string: str) -> None:
        if is_sensitive(string):
            return
        super().append_string(string)


def open_history(path: str | None) -> History:
    """The history for ``path`` (created with mode 0600), in memory when ``path`` is None or
    cannot be opened."""
    if path is None:
        return RedactingMemoryHistory()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.close(fd)
    except OSError as e:
        import sys

        print(f"ivm shell: history file {path}: {e.strerror}; history is kept in memory only",
              file=sys.stderr)
        return RedactingMemoryHistory()
    return RedactingFileHistory(path)
