"""``ivm shell``: a psql-like shell over a session (DuckDB or PostgreSQL) with incremental views.

The modules, each holding one part:

- ``args``: the command-line arguments; ``main``: connecting, choosing between the REPL and a
  script run, exit statuses.
- ``script``: cutting input into SQL statements and meta-commands, with their positions.
- ``runner``: running statements through the session (cancellable with Ctrl-C), reporting
  errors with their positions; ``meta``: the backslash commands; ``watch``: ``\\watch``.
- ``render``: aligned / expanded / CSV / JSON output, command tags, NULLs, terminal width.
- ``repl``: the prompt_toolkit loop; ``completion``: tab completion; ``history``: the history
  file (statements with credentials are kept out); ``redact``: masking passwords in output.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
