"""The CPUs free in a partition over time, by count: a step function backfill plans against.

Counting ignores the nodes' shapes, so it is an upper bound of what a placement can find: a job
asking for more CPUs than the profile shows at some moment of its run cannot be placed then. The
backfill pass uses it to skip moments before trying a placement; shoal_wait_target (wait_target.py)
plans with it alone.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from ctld.sched.limits import FOREVER


class FreeProfile:
    """free[k] CPUs from times[k] until times[k + 1]; the last step lasts for ever. A job may begin
    only at a step that is a candidate moment (`begins[k]`): the exact end of a hold splits a step
    without being one, as backfill tries moments on its bf_resolution grid."""

    __slots__ = ("nodes", "times", "free", "begins")

    def __init__(self, nodes: frozenset[str], times: list[int], free: list[int]) -> None:
        self.nodes = nodes
        self.times = times
        self.free = free
        self.begins = [True] * len(times)

    def copy(self) -> FreeProfile:
        found = FreeProfile(self.nodes, list(self.times), list(self.free))
        found.begins = list(self.begins)
        return found

    def add_moment(self, moment: int) -> None:
        """Make `moment` a candidate begin."""
        self.begins[self._step_at(moment)] = True

    def first_fit(
        self, cpus: int, end_of: Callable[[int], int], earliest: int = 0, until: int = FOREVER
    ) -> int:
        """The first step time, from `earliest` and not after `until`, from which `cpus` stay free
        until end_of(that time) (FOREVER: none)."""
        times, free, begins, n = self.times, self.free, self.begins, len(self.times)
        k = bisect.bisect_left(times, earliest)
        while k < n and times[k] <= until:
            if free[k] < cpus or not begins[k]:
                k += 1
                continue
            end = end_of(times[k])
            j = k + 1
            while j < n and times[j] < end and free[j] >= cpus:
                j += 1
            if j == n or times[j] >= end:
                return times[k]
            k = j + 1  # step j has too few: no begin up to it lasts through it
        return FOREVER

    def least(self, begin: int, end: int) -> int:
        """The fewest CPUs free at any moment of [begin, end)."""
        k = max(0, bisect.bisect_right(self.times, begin) - 1)
        j = bisect.bisect_left(self.times, end, lo=k + 1)
        return min(self.free[k:j]) if j > k else self.free[k]

    def take(self, begin: int, end: int, cpus: int) -> None:
        """`cpus` in use over [begin, end) (FOREVER: for ever)."""
        first = self._step_at(begin)
        last = self._step_at(end) if end < FOREVER else len(self.times)
        free = self.free
        for k in range(first, last):
            free[k] -= cpus

    def _step_at(self, moment: int) -> int:
        """The index of the step starting at `moment`, splitting the one that covers it."""
        at = bisect.bisect_left(self.times, moment)
        if at < len(self.times) and self.times[at] == moment:
            return at
        self.times.insert(at, moment)
        self.free.insert(at, self.free[at - 1] if at > 0 else 0)
        self.begins.insert(at, False)
        return at
