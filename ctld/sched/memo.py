"""Remembered answers to pure questions about immutable requests, for the scheduler's hot paths.

A cycle asks the same things of each pending job many times (its CPUs, whether a partition takes
it), and the simulator hands the same request objects to cycle after cycle. Requests, partitions
and snapshots are frozen, so an answer stays true for the very objects it was computed for. The
cache keeps those objects (so their ids are not reused while cached) and is emptied when it grows
past its bound; it is never shared between processes and holds nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

R = TypeVar("R")
BOUND = 20_000


def by_identity(compute: Callable[..., R]) -> Callable[..., R]:
    """`compute(a)` or `compute(a, b)` remembered per the identity of its arguments (immutable
    objects)."""
    arity = compute.__code__.co_argcount
    if arity == 1:
        one: dict[int, tuple[Any, R]] = {}

        @wraps(compute)
        def remembered_one(a: Any) -> R:
            hit = one.get(id(a))
            if hit is not None and hit[0] is a:
                return hit[1]
            answer = compute(a)
            if len(one) >= BOUND:
                one.clear()
            one[id(a)] = (a, answer)
            return answer

        return remembered_one
    if arity != 2:
        raise TypeError(f"by_identity remembers functions of one or two arguments, not {arity}")
    two: dict[tuple[int, int], tuple[Any, Any, R]] = {}

    @wraps(compute)
    def remembered_two(a: Any, b: Any) -> R:
        hit = two.get((id(a), id(b)))
        if hit is not None and hit[0] is a and hit[1] is b:
            return hit[2]
        answer = compute(a, b)
        if len(two) >= BOUND:
            two.clear()
        two[(id(a), id(b))] = (a, b, answer)
        return answer

    return remembered_two
