"""FreeProfile: the CPUs free by count over time that backfill skips moments by and
shoal_wait_target plans with."""

from __future__ import annotations

import pytest

from ctld.sched.free_profile import FreeProfile
from ctld.sched.limits import FOREVER


def _profile() -> FreeProfile:
    """2 CPUs free now (t=0), 6 from t=600, 8 from t=3600."""
    return FreeProfile(frozenset({"n1", "n2"}), [0, 600, 3600], [2, 6, 8])


@pytest.mark.parametrize(
    ("cpus", "run_s", "earliest", "until", "begin"),
    [
        (2, 10_000, 0, FOREVER, 0),
        (3, 60, 0, FOREVER, 600),
        (7, 60, 0, FOREVER, 3600),
        (9, 60, 0, FOREVER, FOREVER),  # never that many
        (2, 60, 1, FOREVER, 600),  # not before `earliest`
        (7, 60, 0, 3599, FOREVER),  # not after `until`
    ],
)
def test_first_fit(cpus: int, run_s: int, earliest: int, until: int, begin: int) -> None:
    assert _profile().first_fit(cpus, lambda t: t + run_s, earliest, until) == begin


def test_a_hold_splits_steps_and_its_exact_end_is_no_begin() -> None:
    """6 CPUs held over [600, 1000): free by count drops there; t=1000 splits a step, but a job
    may not begin there (backfill's moments are releases and rounded ends, added with add_moment)."""
    profile = _profile()
    profile.take(600, 1000, 6)
    assert (profile.times, profile.free) == ([0, 600, 1000, 3600], [2, 0, 6, 8])
    assert profile.least(0, 700) == 0
    assert profile.least(1000, 4000) == 6
    assert profile.first_fit(3, lambda t: t + 60) == 3600  # 1000 is not a candidate moment
    profile.add_moment(1020)
    assert profile.first_fit(3, lambda t: t + 60) == 1020


def test_a_copy_is_independent() -> None:
    profile = _profile()
    copy = profile.copy()
    copy.take(0, FOREVER, 2)
    assert profile.free == [2, 6, 8]
    assert copy.free == [0, 4, 6]
