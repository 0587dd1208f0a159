"""``ivm shell``: a psql-like shell over a session (DuckDB or PostgreSQL) with incremental views,
or a plain client of a server such as ``ivm serve``.

The modules, each holding one part:

- ``args``: the command-line arguments; ``main``: connecting (session or client), choosing
  between the REPL and a script run, psql's exit statuses; ``client``: the plain client.
- ``script``: psql's lexer — statements, meta-commands, the query buffer, ``:var``;
  ``variables``: ``\\set`` and the variables the shell sets.
- ``runner``: running inputs through the session (Ctrl-C cancels: ``interrupt``), results,
  errors with their positions; ``output``: ``\\o``/``\\g`` targets; ``notices``: WARNING/NOTICE
  lines.
- ``meta``: the backslash commands and their arguments; ``catalog``: ``\\d``, ``\\dt``, ``\\dn``,
  ``\\df``, ``\\l``, ``\\dv``; ``copyio``: ``\\copy``; ``watch``: both ``\\watch``.
- ``render``: aligned / expanded / CSV / JSON output, command tags, NULLs, terminal width.
- ``repl``: the prompt_toolkit loop; ``paste``: pasted blocks as one script; ``completion``:
  tab completion; ``history``: the history file (statements with credentials are kept out);
  ``redact``: masking passwords in output.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
