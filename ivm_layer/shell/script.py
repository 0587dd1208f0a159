"""Cut shell input into SQL statements and meta-commands the way psql's lexer does.

A :class:`Scanner` reads one input (a REPL entry, a ``-c`` string, a file) and yields
:class:`Item` s in order, lazily, so that a meta-command runs before the text after it is
read (``\\set x 1`` then ``SELECT :x;`` in the same file). Like psql:

- SQL accumulates in the **query buffer** until a top-level ``;`` (outside quotes, comments,
  parentheses and a ``CREATE FUNCTION … BEGIN ATOMIC … END`` body); leading blanks and
  ``--`` comments are dropped, so a statement starts at its first real character.
- A backslash outside quotes and comments starts a **meta-command**, which ends at the end of
  the line or at the next unquoted backslash (``\\\\`` ends it and goes back to SQL). The
  query buffer is left as it is: ``CREATE TABLE t (a INT)`` Enter ``\\dv`` runs ``\\dv`` only;
  ``\\g``, ``\\watch``, ``\\p`` and ``\\r`` use or clear it (:meth:`Scanner.pending`,
  :meth:`Scanner.take`). ``\\copy`` and ``\\!`` take the rest of the line as it is.
- ``:name``, ``:'name'`` and ``:"name"`` in SQL (outside quotes and comments) are replaced by
  the variable's value, as a literal or an identifier for the quoted forms; an undefined
  variable is left as written; ``::`` is a cast.

Cost: one regular-expression step per token, O(input); nothing is parsed.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..errors import IVMError


@dataclass(frozen=True)
class Item:
    """One statement or meta-command of an input and its position in that input."""

    kind: str        # "sql" or "meta"
    text: str        # the statement without its ';' (variables substituted) / the meta-command line
    line: int        # 1-based line of its first character
    column: int      # 1-based column of its first character
    number: int      # 1-based position among the input's items


# identifiers: a letter or '_' then letters, digits, '_' (and '$' after the first), Unicode too
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<line_comment>--[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<estring>[Ee]')
  | (?P<string>(?:[BbXxNn]|[Uu]&)?')
  | (?P<ident>(?:[Uu]&)?")
  | (?P<dollar>\$(?:[^\W\d]\w*)?\$)
  | (?P<word>[^\W\d][\w$]*)
  | (?P<cast>::)
  | (?P<var>:(?:'\w+'|"\w+"|\w+))
  | (?P<semi>;)
  | (?P<open>\()
  | (?P<close>\))
  | (?P<backslash>\\)
  | (?P<other>[0-9][0-9.eE]*|[^\s\w'"$:;()\\/-]+|.)
""", re.VERBOSE)
_FAST = re.compile(r"""[^'"$:;()\\/-]+""")
_IDENT_CHAR = re.compile(r"[\w$]")
_FUNCTION_HEAD = re.compile(r"(?i)create\s+(?:or\s+replace\s+)?(?:function|procedure)\b")
_STRING_END = re.compile(r"(?:[^']|'')*'(?!')")
_ESTRING_END = re.compile(r"(?:[^'\\]|\\.|'')*'(?!')", re.DOTALL)
_IDENT_END = re.compile(r'(?:[^"]|"")*"(?!")')
_COMMENT_PART = re.compile(r"/\*|\*/")
_META_NAME = re.compile(r"[^\s\\]*")
_META_ARGS = re.compile(r"""(?:'(?:[^'\\\n]|\\.|'')*'?|"(?:[^"\n]|"")*"?|`[^`\n]*`?|[^\\\n'"`])*""")
_WHOLE_LINE = {"copy", "!"}                  # psql takes their line as it is (OT_WHOLE_LINE)
_SPECIAL = re.compile(r"""[;'"$:\\()\n]|--|/\*""")   # a value holding these is scanned as SQL


class ScanError(IVMError):
    """The input cannot be cut into statements (a variable that expands forever)."""


def quote_literal(value: str) -> str:
    """``'value'`` with quotes doubled (``:'name'``)."""
    return "'" + value.replace("'", "''") + "'"


def quote_ident(value: str) -> str:
    """``"value"`` with double quotes doubled (``:"name"``)."""
    return '"' + value.replace('"', '""') + '"'


class Scanner:
    """psql's lexer over one input; see the module docstring. ``lookup(name)`` gives a
    variable's value (None: undefined). After :meth:`items` is exhausted, :meth:`pending`
    is what is left in the query buffer and :attr:`complete` says whether the input ended
    at a point where psql would run it (not inside a quote, comment or statement)."""

    def __init__(self, text: str, lookup: Callable[[str], str | None] | None = None, first_line: int = 1):
        self.text = text
        self.first_line = first_line
        self.lookup = lookup or (lambda name: None)
        self.pos = 0
        self._lines: list[int] | None = None
        self._buf: list[str] = []
        self._start: int | None = None        # offset of the buffered statement's first character
        self._paren = 0
        self._begin = 0
        self._function = False                # a CREATE FUNCTION/PROCEDURE (BEGIN ATOMIC tracking)
        self._dirty = False                   # SQL typed since the last meta-command
        self._open: str | None = None         # unterminated quote/comment at the end, if any
        self.count = 0
        self._expansions = 0

    # -- the query buffer -----------------------------------------------------------------
    def pending(self) -> str:
        """The query buffer: SQL read but not yet ended by ``;``."""
        return "".join(self._buf).strip()

    def pending_start(self) -> int:
        """The offset in the input where the query buffer's statement starts."""
        return self._start if self._start is not None else self.pos

    def take(self) -> str:
        """Empty the query buffer (``\\g``, ``\\watch``, ``\\r``) and return what it held."""
        text = self.pending()
        self._buf, self._start, self._paren, self._begin, self._function = [], None, 0, 0, False
        return text

    @property
    def complete(self) -> bool:
        """True when the input ended outside any quote or comment and nothing was typed after
        the last ``;`` or meta-command: Enter runs it (psql's prompt would be ``=>``)."""
        return self._open is None and not self._dirty

    def read_data_lines(self) -> list[str]:
        """The lines after the current one up to ``\\.`` (data of ``\\copy … FROM STDIN``
        inside a script); they are consumed."""
        text = self.text
        nl = text.find("\n", self.pos)
        pos = len(text) if nl < 0 else nl + 1
        lines = []
        while pos < len(text):
            nl = text.find("\n", pos)
            end = len(text) if nl < 0 else nl
            line = text[pos:end].rstrip("\r")
            pos = end + 1
            if line == "\\.":
                break
            lines.append(line)
        self.pos = min(pos, len(text))
        return lines

    # -- scanning --------------------------------------------------------------------------
    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of ``offset`` in the input (lines counted from ``first_line``)."""
        if self._lines is None:
            self._lines = [0] + [m.end() for m in re.finditer("\n", self.text)]
        i = bisect.bisect_right(self._lines, offset) - 1
        return i + self.first_line, offset - self._lines[i] + 1

    def _item(self, kind: str, text: str, offset: int) -> Item:
        self.count += 1
        line, col = self.position(offset)
        return Item(kind, text, line, col, self.count)

    def _add(self, piece: str, at: int) -> None:
        if self._start is None:
            self._start = at
        self._buf.append(piece)
        self._dirty = True

    def items(self) -> Iterator[Item]:
        """The statements and meta-commands, in order (lazily: see the module docstring)."""
        text = self.text
        n = len(text)
        while self.pos < n:
            if self._start is not None and not self._function:
                fast = _FAST.match(text, self.pos)     # a run of characters that never matter
                if fast is not None:
                    self._buf.append(fast.group())
                    if not fast.group().isspace():
                        self._dirty = True
                    self.pos = fast.end()
                    continue
            m = _TOKEN.match(text, self.pos)
            kind, start, end = m.lastgroup, m.start(), m.end()
            self.pos = end
            if kind in ("space", "line_comment"):
                if self._start is not None:   # blanks before a statement are dropped (psql)
                    self._buf.append(m.group())
                continue
            if kind == "semi" and self._paren == 0 and self._begin == 0:
                at = self._start
                stmt = self.take()
                self._dirty = False
                if stmt:
                    yield self._item("sql", stmt, at)
                continue
            if kind == "backslash":
                yield self._meta(start)
                continue
            if kind == "var":
                self._variable(m.group(), start)
                text, n = self.text, len(self.text)   # a value scanned as SQL is spliced in
                continue
            if kind == "dollar" and start and _IDENT_CHAR.match(text, start - 1):
                kind, self.pos = "other", start + 1   # "a$b$": a '$' inside an identifier
            if kind == "string" and m.group() == "'" and start and text[start - 1] in "Ee" and \
                    not (start > 1 and _IDENT_CHAR.match(text, start - 2)):
                kind = "estring"                      # the E was read with the text before it
            if kind in ("string", "estring", "ident", "dollar", "block_comment"):
                end = self._quoted(kind, m, start)
                self._add(text[start:end], start)
                self.pos = end
                continue
            if kind == "open":
                self._paren += 1
            elif kind == "close":
                self._paren = max(self._paren - 1, 0)
            elif kind == "word":
                if self._start is None and _FUNCTION_HEAD.match(text, start):
                    self._function = True
                if self._function:
                    self._track_begin(m.group().lower())
            self._add(text[start:self.pos], start)

    def _quoted(self, kind: str, m: re.Match, start: int) -> int:
        """The end of the quoted string, identifier or comment opened by ``m``; the input's end
        (and :attr:`_open` set) when it is not closed."""
        text, pos = self.text, m.end()
        self._open = None
        if kind == "block_comment":
            depth = 1
            for c in _COMMENT_PART.finditer(text, pos):
                depth += 1 if c.group() == "/*" else -1
                if depth == 0:
                    return c.end()
        elif kind == "dollar":
            close = text.find(m.group(), pos)
            if close >= 0:
                return close + len(m.group())
        else:
            pattern = {"string": _STRING_END, "estring": _ESTRING_END, "ident": _IDENT_END}[kind]
            end = pattern.match(text, pos)
            if end is not None:
                return end.end()
        self._open = kind
        return len(text)

    def _variable(self, token: str, start: int) -> None:
        body = token[1:]
        if body[0] in "'\"":
            value = self.lookup(body[1:-1])
            if value is not None:
                self._add(quote_literal(value) if body[0] == "'" else quote_ident(value), start)
                return
        else:
            value = self.lookup(body)
            if value is not None and not _SPECIAL.search(value):
                self._add(value, start)
                return
            if value is not None:
                # psql scans a variable's value as SQL text: it may hold several statements.
                # (Positions of later items on this line shift by the difference in length.)
                self._expansions += 1
                if self._expansions > 1000:
                    raise ScanError(f"variable {body!r} expands without end (it refers to itself)")
                self.text = self.text[:start] + value + self.text[start + len(token):]
                self._lines = None
                self.pos = start
                return
        self._add(token, start)

    def _track_begin(self, word: str) -> None:
        """psql's heuristic: inside ``CREATE [OR REPLACE] FUNCTION|PROCEDURE`` a ``BEGIN`` …
        ``END`` block (and a ``CASE`` … ``END`` within it) holds semicolons."""
        if self._paren:
            return
        if word == "begin" or word == "case" and self._begin:
            self._begin += 1
        elif word == "end" and self._begin:
            self._begin -= 1

    def _meta(self, start: int) -> Item:
        """The meta-command starting at the backslash at ``start``."""
        text = self.text
        name = _META_NAME.match(text, start + 1).group()
        pos = start + 1 + len(name)
        if name.lower() in _WHOLE_LINE:
            nl = text.find("\n", pos)
            end = len(text) if nl < 0 else nl
            resume = end
        else:
            end = _META_ARGS.match(text, pos).end()
            resume = end
            if text.startswith("\\\\", end):      # "\\": back to SQL on the same line
                resume = end + 2
        self.pos = resume
        self._dirty = False
        return self._item("meta", text[start:end].rstrip(), start)


def parse_script(text: str) -> list[Item]:
    """Every item of ``text`` without variables; a statement left without ``;`` at the end
    is the last item (psql runs it at the end of a file)."""
    scanner = Scanner(text)
    items = list(scanner.items())
    if scanner.pending():
        line, col = scanner.position(scanner.pending_start())
        items.append(Item("sql", scanner.pending(), line, col, len(items) + 1))
    return items


def is_complete(text: str) -> bool:
    """Whether Enter should run ``text``: see :attr:`Scanner.complete`."""
    scanner = Scanner(text)
    for _ in scanner.items():
        pass
    return scanner.complete
