"""Slurm hostlist expressions ("node[1-4,7]") through python-hostlist, with a user-facing error."""

from __future__ import annotations

from collections.abc import Iterable

import hostlist as _hostlist


class HostlistError(ValueError):
    """A hostlist expression that cannot be expanded; str() is the message for the user."""


def expand(expr: str) -> list[str]:
    """'node[1-3],gpu01' -> ['node1', 'node2', 'node3', 'gpu01'] (order kept, no duplicates)."""
    expr = expr.strip()
    if not expr:
        return []
    try:
        names: list[str] = _hostlist.expand_hostlist(expr)
    except _hostlist.BadHostlist as exc:
        raise HostlistError(f"Invalid hostlist: {expr}") from exc
    return names


def collect(names: Iterable[str]) -> str:
    """['node1', 'node2', 'node3'] -> 'node[1-3]' (Slurm's compressed form, sorted)."""
    names = [n for n in names if n]
    if not names:
        return ""
    return str(_hostlist.collect_hostlist(names))
