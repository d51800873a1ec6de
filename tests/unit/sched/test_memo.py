"""memo.by_identity: answers remembered per the very objects asked about, never per equal ones."""

from __future__ import annotations

import pytest

from ctld.sched import memo
from ctld.sched.resources import job_cpus
from tests.unit.sched.builders import job


def test_an_answer_is_remembered_for_the_same_objects_only() -> None:
    calls: list[tuple[object, object]] = []

    @memo.by_identity
    def pair(a: object, b: object) -> int:
        calls.append((a, b))
        return len(calls)

    first, second = [1, 2], [1, 2]  # equal, distinct objects
    assert first is not second
    assert pair(first, "x") == 1
    assert pair(first, "x") == 1  # remembered
    assert pair(second, "x") == 2  # equal is not the same: computed afresh
    assert len(calls) == 2


def test_job_cpus_answers_each_request_for_itself() -> None:
    """Two requests that differ only in their CPUs get their own answers (no stale cache hit)."""
    small, big = job(1).tasks(2).obj(), job(1).tasks(8).obj()
    assert (job_cpus(small), job_cpus(big), job_cpus(small)) == (2, 8, 2)


def test_only_one_or_two_arguments() -> None:
    with pytest.raises(TypeError, match="one or two arguments"):
        memo.by_identity(lambda a, b, c: 0)
