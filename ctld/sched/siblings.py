"""An array's pending tasks that ask alike: within one pass, the answer one got is the next one's.

shoal keeps each task of an array as its own record, where Slurm keeps an array's pending tasks as
one record until a task starts; Slurm's passes therefore see a pending array once, not once per task.
The passes here get the same effect by remembering, per array, the last task tried and the answer it
got together with a mark of the pass's state (what had started, been held, blocked, tested so far):
a later task of that array that asks for the same (all but its job and task ids) in a pass whose mark
has not moved gets the same answer without being tried again. The answer is a function of the ask and
that state, so this changes no decision, only how often it is computed (with `placement.SHORTCUTS`
off, for tests to compare, every task is tried).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import fields
from itertools import count
from operator import attrgetter
from typing import Generic, TypeVar

from ctld.sched import memo, placement
from ctld.sched.model import JobRequest

_IDENTITY = frozenset({"job_id", "array_task_id", "priority"})  # what tasks of one array differ by
_ask = attrgetter(*(f.name for f in fields(JobRequest) if f.name not in _IDENTITY))
_asks: dict[tuple[object, ...], int] = {}  # an ask -> its number (numbers are never reused)
_numbers = count(1)


@memo.by_identity
def ask_number(job: JobRequest) -> int:
    """A number per distinct ask: equal numbers, equal asks (a request is frozen, kept across cycles)."""
    ask = _ask(job)
    try:
        found = _asks.get(ask)
    except TypeError:  # a field built unhashable (a list for a tuple): alike to nothing
        return next(_numbers)
    if found is None:
        if len(_asks) >= memo.BOUND:
            _asks.clear()  # a later equal ask gets a new number: only a shortcut missed
        found = _asks[ask] = next(_numbers)
    return found


Answer = TypeVar("Answer")


def same_ask(a: JobRequest, b: JobRequest) -> bool:
    """Two tasks of one array that ask for the same resources, time, partitions, holds and limits
    (always False with the shortcuts off)."""
    return (
        placement.SHORTCUTS
        and a.array_job_id == b.array_job_id != 0
        and (a is b or ask_number(a) == ask_number(b))
    )


class Siblings(Generic[Answer]):
    """Per pass: each array's last answer and the mark it was given under."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[JobRequest, Hashable, Answer]] = {}

    def known(self, job: JobRequest, mark: Hashable) -> Answer | None:
        """The answer a task of the same array asking alike got under this same mark, or None."""
        if not job.array_job_id:
            return None
        kept = self._last.get(job.array_job_id)
        if kept is None or kept[1] != mark or not same_ask(kept[0], job):
            return None
        return kept[2]

    def remember(self, job: JobRequest, mark: Hashable, answer: Answer) -> None:
        """`job` got `answer`, leaving the pass at `mark` (only an answer that moved nothing is reused)."""
        if job.array_job_id:
            self._last[job.array_job_id] = (job, mark, answer)
