"""The interactive loop (prompt_toolkit): psql-style prompts (``db=>`` / ``db->``), Enter runs
the input once it ends with ``;`` (or is a meta-command) and otherwise starts a new line,
Alt-Enter always inserts a newline, history with Ctrl-R search, Tab completion. Ctrl-C clears
the input (or cancels the running statement), Ctrl-D on an empty line leaves."""

from __future__ import annotations

import shutil

from prompt_toolkit import PromptSession
from prompt_toolkit.filters import is_searching
from prompt_toolkit.key_binding import KeyBindings

from .completion import SQLCompleter
from .history import history_path, open_history
from .meta import QuitShell
from .runner import Runner
from .script import is_complete


def _key_bindings(dialect: str) -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter", filter=~is_searching)
    def _enter(event) -> None:
        buf = event.current_buffer
        if buf.complete_state is not None and buf.complete_state.current_completion is not None:
            buf.complete_state = None  # Enter in the menu takes the completion
            return
        if is_complete(buf.text, dialect):
            buf.validate_and_handle()
        else:
            buf.insert_text("\n")

    @kb.add("escape", "enter")
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    return kb


def refresh_completion(runner: Runner, completer: SQLCompleter) -> None:
    """Reload the completer's names from the database; a failure (e.g. inside an aborted
    PostgreSQL transaction) keeps the previous names."""
    try:
        completer.update(runner.session.tables(), runner.session.views)
    except runner.db_errors:
        pass


def run_repl(runner: Runner, db_name: str) -> int:
    """Read, run and print until ``\\q`` or Ctrl-D; returns the exit status (0)."""
    completer = SQLCompleter()
    refresh_completion(runner, completer)
    runner.on_schema_change = lambda: refresh_completion(runner, completer)
    prompt = f"{db_name}=> "
    continuation = f"{db_name}-> "
    session = PromptSession(
        history=open_history(history_path()),
        completer=completer,
        complete_while_typing=False,
        multiline=True,
        key_bindings=_key_bindings(runner.session.dialect),
        prompt_continuation=lambda width, line_no, wrap: continuation.rjust(width),
        enable_history_search=False,
    )
    while True:
        try:
            text = session.prompt(prompt)
        except KeyboardInterrupt:
            continue
        except EOFError:
            runner.write("\\q\n")
            return 0
        if not text.strip():
            continue
        runner.display.width = shutil.get_terminal_size().columns
        try:
            runner.run_source(text, None)
        except QuitShell:
            return 0
        except KeyboardInterrupt:  # between two statements of the input: drop the rest
            runner.err.write("Cancelled.\n")
        except Exception as e:  # noqa: BLE001 - a bug in the shell must not end the user's session
            runner.error(f"internal error in ivm shell ({type(e).__name__}: {e}); please report it",
                         "ivm shell: ")
