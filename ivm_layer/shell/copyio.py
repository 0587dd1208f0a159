"""``\\copy``: psql's client-side COPY, through the session (so rows copied in reach the views).

    \\copy TABLE [(COLUMNS)] FROM {'FILE' | STDIN | PSTDIN | PROGRAM 'COMMAND'} [[WITH] OPTIONS]
    \\copy {TABLE [(COLUMNS)] | (QUERY)} TO {'FILE' | STDOUT | PSTDOUT | PROGRAM 'COMMAND'} [[WITH] OPTIONS]

``STDIN`` is the input the command came from (the lines after it up to ``\\.`` in a script or
a paste; typed lines at the prompt), ``PSTDIN``/``PSTDOUT`` the shell's own standard input and
output, ``STDOUT`` where query results go (``\\o``). Options are COPY's, in either spelling
(``WITH (FORMAT csv, HEADER)`` or psql's older ``WITH CSV HEADER``); without a format the
data is psql's text format (tab-separated, ``\\N`` for NULL).

On PostgreSQL (a session or a plain client) it runs ``COPY … FROM STDIN`` / ``TO STDOUT``
and streams the file through the connection. DuckDB runs in the shell's own process and
reads and writes files itself, so there it runs ``COPY … FROM 'FILE'`` / ``TO 'FILE'`` (a
temporary file stands for STDIN/STDOUT); the text format is DuckDB's CSV reader with a tab
delimiter and ``\\N`` as NULL (backslash escapes other than ``\\N`` are not decoded).
Prints ``COPY n`` like psql.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from ..errors import ShellError

if TYPE_CHECKING:
    from .context import ShellContext

_USAGE = ("usage: \\copy TABLE [(COLUMNS)] FROM 'FILE'|STDIN|PSTDIN [WITH (OPTIONS)]  or  "
          "\\copy TABLE|(QUERY) TO 'FILE'|STDOUT|PSTDOUT [WITH (OPTIONS)]")
_OLD_OPTION = re.compile(
    r"\s*(?:(binary|csv|text|header)\b|(delimiter|null|quote|escape|encoding)\s+(?:as\s+)?('(?:[^']|'')*')"
    r"|(force\s+quote|force\s+not\s+null|force\s+null)\s+(\*|[\w\", ]+?)(?=\s+\w+\b|\s*$))",
    re.IGNORECASE)
_TEXT_FORMAT_DUCKDB = "FORMAT csv, DELIMITER '\t', NULL '\\N', QUOTE '', ESCAPE '', HEADER false"


def _balanced(text: str, i: int) -> int:
    """The index after the parenthesis closing the one at ``text[i]`` (quotes respected)."""
    depth, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            end = text.find(c, i + 1)
            while end >= 0 and text.startswith(c * 2, end):
                end = text.find(c, end + 2)
            if end < 0:
                break
            i = end + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ShellError(f"\\copy: unbalanced parentheses; {_USAGE}")


def parse(line: str) -> tuple[str, str, str, str, str]:
    """``(head, direction, target kind, target, options)``: head is the table (with columns)
    or ``(query)``; direction ``from``/``to``; kind ``file``, ``stdin``, ``stdout``,
    ``pstdin``, ``pstdout`` or ``program``."""
    text = line.strip()
    if not text:
        raise ShellError(_USAGE)
    if text.startswith("("):
        end = _balanced(text, 0)
    else:
        m = re.match(r'(?:"(?:[^"]|"")*"|[^\s(]+)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[^\s(]+))*', text)
        end = m.end() if m else 0
        rest = text[end:]
        if rest.lstrip().startswith("("):
            end = _balanced(text, end + len(rest) - len(rest.lstrip()))
    head = text[:end].strip()
    m = re.match(r"\s*(from|to)\s+", text[end:], re.IGNORECASE)
    if not head or not m:
        raise ShellError(_USAGE)
    direction = m.group(1).lower()
    rest = text[end + m.end():]
    if rest[:1] == "'":
        close = _balanced_quote(rest)
        kind, target, rest = "file", rest[1:close].replace("''", "'"), rest[close + 1:]
    else:
        word = re.match(r"\S+", rest).group()
        low = word.lower()
        if low in ("stdin", "stdout", "pstdin", "pstdout"):
            kind, target, rest = low, "", rest[len(word):]
        elif low == "program":
            arg = rest[len(word):].lstrip()
            if not arg.startswith("'"):
                raise ShellError("\\copy … PROGRAM needs the command in single quotes")
            close = _balanced_quote(arg)
            kind, target, rest = "program", arg[1:close].replace("''", "'"), arg[close + 1:]
        else:
            kind, target, rest = "file", word, rest[len(word):]
    wanted = {"from": ("stdin", "pstdin", "file", "program"), "to": ("stdout", "pstdout", "file", "program")}
    if kind not in wanted[direction]:
        raise ShellError(f"\\copy … {direction.upper()} {kind.upper()}: {_USAGE}")
    return head, direction, kind, target, rest.strip()


def _balanced_quote(text: str) -> int:
    i = 1
    while True:
        j = text.find("'", i)
        if j < 0:
            raise ShellError("\\copy: unterminated quoted file name")
        if text.startswith("''", j):
            i = j + 2
            continue
        return j


def options(text: str) -> str:
    """The options in COPY's parenthesized form (psql's older ``WITH CSV HEADER`` converted)."""
    text = text.strip()
    if re.match(r"(?i)with\b", text):
        text = text[4:].strip()
    if not text or text.startswith("("):
        return text[1:_balanced(text, 0) - 1].strip() if text else ""
    where = re.search(r"(?i)\bwhere\b", text)
    if where:
        raise ShellError("\\copy … WHERE is not supported; copy from (SELECT … WHERE …) instead")
    out, pos = [], 0
    while pos < len(text):
        m = _OLD_OPTION.match(text, pos)
        if not m or m.end() == pos:
            raise ShellError(f"\\copy: cannot read the options {text[pos:].strip()!r}")
        if m.group(1):
            word = m.group(1).lower()
            out.append("HEADER" if word == "header" else f"FORMAT {word}")
        elif m.group(2):
            out.append(f"{m.group(2).upper()} {m.group(3)}")
        else:
            out.append(f"{' '.join(m.group(4).upper().split()).replace(' ', '_')} ({m.group(5).strip()})")
        pos = m.end()
    return ", ".join(out)


def command(runner: ShellContext, line: str) -> None:
    head, direction, kind, target, rest = parse(line)
    opts = options(rest)
    if runner.session.dialect == "duckdb":
        n = _duckdb(runner, head, direction, kind, target, opts)
    else:
        n = _postgres(runner, head, direction, kind, target, opts)
    if not runner.display.quiet and runner.display.format == "aligned":
        runner.write(f"COPY {n}\n")


def _data_lines(runner: ShellContext) -> list[str]:
    lines = runner.read_data_lines()
    if lines is not None:
        return lines
    runner.say("Enter data to be copied followed by a newline.\n"
               "End with a backslash and a period on a line by itself, or an EOF signal.\n")
    runner.flush()
    lines = []
    while True:
        try:
            line = input(">> ")
        except EOFError:
            break
        if line == "\\.":
            break
        lines.append(line)
    return lines


def _duckdb(runner: ShellContext, head: str, direction: str, kind: str, target: str, opts: str) -> int:
    has_format = re.search(r"(?i)\bformat\b", opts) is not None
    if not has_format:
        opts = _TEXT_FORMAT_DUCKDB + (", " + opts if opts else "")
    elif re.search(r"(?i)\bformat\s+'?text'?", opts):
        opts = re.sub(r"(?i)\bformat\s+'?text'?", _TEXT_FORMAT_DUCKDB, opts)
    tmp = None
    try:
        if kind == "file":
            path = os.path.abspath(os.path.expanduser(target))
        else:
            fd, tmp = tempfile.mkstemp(prefix="ivm-copy-", suffix=".txt")
            os.close(fd)
            path = tmp
            if direction == "from":
                with open(tmp, "w", encoding="utf-8") as f:
                    if kind == "stdin":
                        f.writelines(ln + "\n" for ln in _data_lines(runner))
                    elif kind == "pstdin":
                        f.write(sys.stdin.read())
                    else:
                        f.write(_program_output(target))
        sql = f"COPY {head} {direction.upper()} '{path.replace(chr(39), chr(39) * 2)}' ({opts})"
        res = runner.execute(sql)
        n = int(res.rows[0][0]) if res.rows and res.rows[0] and res.rows[0][0] is not None else max(res.rowcount, 0)
        if direction == "to" and kind != "file":
            with open(tmp, encoding="utf-8") as f:
                data = f.read()
            _deliver(runner, kind, target, data)
        return n
    finally:
        if tmp is not None:
            os.unlink(tmp)


def _postgres(runner: ShellContext, head: str, direction: str, kind: str, target: str, opts: str) -> int:
    with_opts = f" ({opts})" if opts else ""
    session = runner.session
    if direction == "from":
        sql = f"COPY {head} FROM STDIN{with_opts}"
        if kind == "file":
            try:
                f = open(os.path.expanduser(target), "rb")  # noqa: SIM115 - closed below
            except OSError as e:
                raise ShellError(f"{target}: {e.strerror or e}") from None
            with f, session.copy(sql) as cp:
                while chunk := f.read(1 << 16):
                    cp.write(chunk)
        else:
            data = ("".join(ln + "\n" for ln in _data_lines(runner)) if kind == "stdin" else
                    sys.stdin.read() if kind == "pstdin" else _program_output(target))
            with session.copy(sql) as cp:
                cp.write(data.encode())
        return max(cp.cursor.rowcount, 0)
    sql = f"COPY {head} TO STDOUT{with_opts}"
    if kind == "file":
        try:
            f = open(os.path.expanduser(target), "wb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise ShellError(f"{target}: {e.strerror or e}") from None
        with f, session.copy(sql) as cp:
            for chunk in cp:
                f.write(chunk)
        return max(cp.cursor.rowcount, 0)
    with session.copy(sql) as cp:
        data = b"".join(bytes(chunk) for chunk in cp)
    _deliver(runner, kind, target, data.decode())
    return max(cp.cursor.rowcount, 0)


def _deliver(runner: ShellContext, kind: str, target: str, data: str) -> None:
    if kind == "stdout":
        runner.write(data)
    elif kind == "pstdout":
        runner.flush()
        sys.stdout.write(data)
        sys.stdout.flush()
    else:
        runner.flush()      # the program writes to the same screen: what is held comes first
        subprocess.run(target, shell=True, input=data, text=True, check=False)


def _program_output(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ShellError(f"\\copy … PROGRAM {command!r} failed with exit status {done.returncode}: "
                         f"{done.stderr.strip()}")
    return done.stdout
