"""Pasted input at psql's speed: a block of lines runs as one script, not one prompt per line.

A paste reaches the REPL in one of two ways:

- **bracketed paste** (the terminal wraps it in ``ESC[200~ … ESC[201~`` because the prompt
  asked for it): the REPL's key binding inserts it at once and, when it ends with a newline
  after complete statements, runs it (:func:`repl.run_repl`);
- **typed-ahead lines** (a terminal without bracketed paste, a program writing to the pty):
  the first line ends the prompt with the rest already waiting. :func:`read_pending` then takes
  what prompt_toolkit has read ahead and everything waiting on the terminal, with echo off,
  until the input has been quiet for a moment, and the REPL runs the complete lines as one
  script (statements in order, errors with their line in the paste), prints the pasted lines
  once, and puts an unfinished last line back at the prompt.

Cost: one read per burst of input and one scan of the block; nothing is re-drawn per line.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Iterator

QUIET_SECONDS = 0.03          # a paste is over when nothing more arrives for this long
MAX_BYTES = 64 << 20
_MARKERS = ("\x1b[200~", "\x1b[201~")


def typeahead_text(input_obj) -> str:
    """The text prompt_toolkit has read ahead and not used (Enter as a newline)."""
    from prompt_toolkit.input.typeahead import get_typeahead
    from prompt_toolkit.keys import Keys

    parts = []
    for kp in get_typeahead(input_obj):
        if kp.key == Keys.BracketedPaste:
            parts.append(kp.data)
        elif kp.key in (Keys.ControlM, Keys.ControlJ):
            parts.append("\n")
        elif kp.data and not kp.data.startswith("\x1b"):
            parts.append(kp.data)
    return "".join(parts)


def waiting(fd: int) -> bool:
    """Whether input is already waiting on ``fd``."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def quiet_terminal(fd: int) -> Iterator[None]:
    """Echo and line buffering off (Ctrl-C still interrupts) while a paste is taken in."""
    try:
        import termios

        old = termios.tcgetattr(fd)
    except (ImportError, OSError, ValueError):
        yield
        return
    new = list(old)
    new[3] &= ~(termios.ECHO | termios.ICANON)
    new[6] = list(new[6])
    new[6][termios.VMIN], new[6][termios.VTIME] = 1, 0
    termios.tcsetattr(fd, termios.TCSANOW, new)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, old)


def read_pending(fd: int, quiet: float = QUIET_SECONDS) -> str:
    """Everything arriving on ``fd`` until it has been quiet for ``quiet`` seconds (``fd``
    must be in :func:`quiet_terminal`); line ends as ``\\n``."""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_BYTES:
        try:
            ready = select.select([fd], [], [], quiet)[0]
        except InterruptedError:
            continue
        if not ready:
            break
        data = os.read(fd, 1 << 16)
        if not data:
            break
        chunks.append(data)
        size += len(data)
    return normalize(b"".join(chunks).decode("utf-8", errors="replace"))


def normalize(text: str) -> str:
    """Line ends as ``\\n``, bracketed-paste markers and a Ctrl-C'd part removed."""
    for m in _MARKERS:
        text = text.replace(m, "")
    if "\x03" in text:  # Ctrl-C typed into the paste: drop what came before it
        text = text.rsplit("\x03", 1)[1]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def stdin_fd() -> int | None:
    try:
        return sys.stdin.fileno()
    except (OSError, ValueError):
        return None


def echo_lines(text: str, prompt: str, continuation: str, starts: set[int]) -> str:
    """The pasted lines as the prompt would have shown them (``starts``: lines that begin a
    statement or a meta-command get the first prompt)."""
    return "".join((prompt if i in starts else continuation) + line + "\n"
                   for i, line in enumerate(text.split("\n"), 1))
