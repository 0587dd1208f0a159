"""The interactive loop (prompt_toolkit): psql-style prompts (``db=>`` / ``db->``), Enter runs
the input once it ends with ``;`` or a meta-command and otherwise starts a new line,
Alt-Enter always inserts a newline, history with Ctrl-R search, Tab completion. Ctrl-C clears
the input (or cancels the running statement), Ctrl-D on an empty line leaves.

A statement left unfinished by an entry (``SELECT 1`` Enter ``\\dv`` Enter runs ``\\dv``
only) comes back at the next prompt, ready to be finished. Pasted blocks run as one script
(:mod:`.paste`).
"""

from __future__ import annotations

import shutil

from prompt_toolkit import PromptSession
from prompt_toolkit.filters import is_searching
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys

from . import paste
from .completion import SQLCompleter
from .history import history_path, open_history
from .interrupt import answer_ctrl_c
from .meta import QuitShell
from .runner import Runner
from .script import Scanner, is_complete


def _key_bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter", filter=~is_searching)
    def _enter(event) -> None:
        buf = event.current_buffer
        if buf.complete_state is not None and buf.complete_state.current_completion is not None:
            buf.complete_state = None  # Enter in the menu takes the completion
            return
        if is_complete(buf.text):
            buf.validate_and_handle()
        else:
            buf.insert_text("\n")

    @kb.add("escape", "enter")
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add(Keys.BracketedPaste)
    def _paste(event) -> None:
        buf = event.current_buffer
        data = paste.normalize(event.data)
        buf.insert_text(data)
        if data.endswith("\n") and is_complete(buf.text):
            buf.text = buf.text[:-1]          # whole lines pasted: run them now, as psql would
            buf.validate_and_handle()

    return kb


def refresh_completion(runner: Runner, completer: SQLCompleter) -> None:
    """Reload the completer's names from the database; a failure (e.g. inside an aborted
    PostgreSQL transaction) keeps the previous names."""
    try:
        completer.update(runner.session.tables(), runner.session.views)
    except runner.db_errors:
        pass


def _starts(text: str) -> set[int]:
    scanner = Scanner(text)
    return {item.line for item in scanner.items()} | {1}


def run_repl(runner: Runner, db_name: str) -> int:
    """Read, run and print until ``\\q`` or Ctrl-D; returns the exit status (0)."""
    answer_ctrl_c()
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
        key_bindings=_key_bindings(),
        prompt_continuation=lambda width, line_no, wrap: continuation.rjust(width),
        enable_history_search=False,
    )
    fd = paste.stdin_fd()
    default = ""
    while True:
        runner.flush()
        try:
            text = session.prompt(prompt, default=default)
        except KeyboardInterrupt:
            default = ""
            continue
        except EOFError:
            runner.say("\\q\n")
            return 0
        default = ""
        runner.display.width = shutil.get_terminal_size().columns
        try:
            more = paste.typeahead_text(session.input)
            if fd is not None and (more or paste.waiting(fd)):
                default = _run_pasted(runner, fd, text, more, prompt, continuation)
            elif text.strip():
                runner.run_source(text, None)
                default = runner.pending
        except QuitShell:
            return 0
        except KeyboardInterrupt:  # between two statements of the input: drop the rest
            runner.err.write("Cancelled.\n")
        except Exception as e:  # noqa: BLE001 - a bug in the shell must not end the user's session
            runner.error(f"internal error in ivm shell ({type(e).__name__}: {e}); please report it",
                         "ivm shell: ")


def _run_pasted(runner: Runner, fd: int, first: str, more: str, prompt: str, continuation: str) -> str:
    """Run an entry whose next lines were already waiting (a paste) as one script; returns the
    unfinished last line (with any unfinished statement) for the next prompt."""
    with paste.quiet_terminal(fd):
        data = first + "\n" + more + paste.read_pending(fd)
        shown = first.count("\n") + 1         # the prompt has shown the first entry already
        offset = 0
        while True:
            block, _, partial = data.rpartition("\n")
            if block:
                lines = block.split("\n")
                echo = "\n".join(lines[shown:])
                if echo:
                    starts = {n - shown for n in _starts(block) if n > shown}
                    runner.say(paste.echo_lines(echo, prompt, continuation, starts))
                pending = runner.pending
                text = (pending + "\n" + block) if pending else block
                runner.run_source(text, None, first_line=offset + 1 - (pending.count("\n") + 1 if pending else 0))
                offset += len(lines)
            shown = 0
            more = paste.read_pending(fd)
            if not more:
                break
            data = partial + more
    rest = runner.pending
    runner.pending = ""
    return (rest + "\n" + partial) if rest and partial else (rest or partial)
