"""Identifier rules of the backends: the key the layer files a table, view, column or parameter
under, and how a key is written back into SQL. O(length of the name) per call.

The two backends differ:

* **DuckDB** compares identifiers case-insensitively *in ASCII only*, quoted or not, and keeps
  the case given (``"TÀB"`` is found as ``tÀb`` or ``"TÀb"``, never as ``tàb``).
* **PostgreSQL** folds an *unquoted* identifier to lower case (ASCII only in UTF8: ``TÀB`` is
  ``tÀb``) and keeps a *quoted* one exactly (``"MixedCase"`` is not ``mixedcase``).

So the key is the name with ASCII letters lower-cased, except a quoted name on PostgreSQL,
which is its own key. Python's ``str.lower()`` is never the rule: it also folds ``À``, ``É``
and ``Ü``, which neither backend does.

Every parsed tree goes through :func:`normalize_tree` once, where it enters the layer; from
there on its identifiers *are* keys and are compared as they are. Plain strings that name a
table or view from outside a parse (the Python API, a catalog row, a replication message) are
matched with :func:`resolve`: the exact key if one is filed under it, else its ASCII fold.

>>> fold("TÀB", quoted=True, dialect="duckdb")
'tÀb'
>>> fold("MixedCase", quoted=True, dialect="postgres"), fold("MixedCase", dialect="postgres")
('MixedCase', 'mixedcase')
>>> quote('a"b')
'"a""b"'
>>> resolve("MixedCase", {"MixedCase", "mixedcase"}), resolve("R", {"r"}), resolve("Ünï", {"Ünï"})
('MixedCase', 'r', 'Ünï')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlglot import exp

#: a regular expression for one identifier in SQL text: quoted (doubled quotes inside), or
#: unquoted (a letter, any script, or ``_``, then letters, digits, ``_``, ``$``)
IDENT = r'(?:"(?:[^"]|"")+"|[^\W\d][\w$]*)'

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(name: str) -> str:
    """``name`` with its ASCII letters lower-cased and every other character kept.

    >>> ascii_lower("ÜnÏ_AB"), "ÜnÏ_AB".lower()
    ('ÜnÏ_ab', 'ünï_ab')
    """
    return name.translate(_ASCII_LOWER)


def fold(name: str, quoted: bool = False, dialect: str = "duckdb") -> str:
    """The key of an identifier as the backend ``dialect`` resolves it (see the module text)."""
    if quoted and dialect == "postgres":
        return name
    return ascii_lower(name)


def catalog_key(name: str, dialect: str = "duckdb") -> str:
    """The key of a name read from the backend's own catalog (``information_schema``,
    ``pg_class``): PostgreSQL's catalog holds the exact name, DuckDB's the case it was given.

    >>> catalog_key("MixedCase", "postgres"), catalog_key("MixÉd", "duckdb")
    ('MixedCase', 'mixÉd')
    """
    return name if dialect == "postgres" else ascii_lower(name)


def sql_fold(expr: str) -> str:
    """SQL (DuckDB and PostgreSQL) for :func:`ascii_lower` of the SQL expression ``expr``: to match
    catalog rows by key (SQL's ``lower()`` folds every letter, as ``str.lower()`` does).

    >>> sql_fold("table_name")
    "translate(table_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
    """
    return f"translate({expr}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"


def needs_quotes(key: str) -> bool:
    """True when ``key`` would not read back as itself unquoted (upper case or non-ASCII letters,
    anything but letters, digits and ``_``, a leading digit).

    >>> needs_quotes("r_1"), needs_quotes("MixedCase"), needs_quotes("ünï"), needs_quotes("1a")
    (False, True, True, True)
    """
    return not key or not key.isascii() or not (key.replace("_", "a").isalnum() and key == key.lower()) \
        or key[0].isdigit()


def quote(key: str) -> str:
    """``key`` as a quoted SQL identifier, which both backends read back as exactly ``key``."""
    return '"' + key.replace('"', '""') + '"'


def identifier_key(node: exp.Expression | str | None, dialect: str = "duckdb") -> str:
    """The key of a parsed :class:`~sqlglot.exp.Identifier` (or a plain string: its ASCII fold)."""
    from sqlglot import exp

    if node is None:
        return ""
    if isinstance(node, exp.Identifier):
        return fold(node.this, bool(node.args.get("quoted")), dialect)
    if isinstance(node, str):
        return ascii_lower(node)
    return ascii_lower(node.name)


def normalize_tree(tree: exp.Expression, dialect: str = "duckdb") -> exp.Expression:
    """Rewrite every identifier of ``tree`` (in place) to its key; a key that would not read
    back unquoted is quoted, so the tree still means the same to the backend when it is written
    out again, and sqlglot's own normalization (``qualify``) leaves it alone."""
    from sqlglot import exp

    for ident in tree.find_all(exp.Identifier):
        quoted = bool(ident.args.get("quoted"))
        key = fold(ident.this, quoted, dialect)
        ident.set("this", key)
        if not quoted and needs_quotes(key) and key.lower() != key:
            ident.set("quoted", True)
    return tree


def resolve(name: str, known) -> str:
    """The key a plain string names among ``known`` keys: itself when filed so (a quoted
    PostgreSQL name, or a key already), else its ASCII fold (how DuckDB and PostgreSQL's unquoted
    names resolve). Nothing is looked up beyond ``known``."""
    name = str(name)
    if name in known:
        return name
    return ascii_lower(name)
