"""Small checks on a meta-command's arguments, shared by the command modules (meta, catalog,
copyio, watch) without importing the dispatcher."""

from __future__ import annotations

from ..errors import ShellError


def plain_name(name: str) -> tuple[str, bool]:
    """``name`` without surrounding double quotes, and whether it was quoted."""
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"'), True
    return name, False


def require(args: list[str], n_min: int, n_max: int, usage: str) -> None:
    if not n_min <= len(args) <= n_max:
        raise ShellError(f"usage: {usage}")
