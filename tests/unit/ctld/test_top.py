"""scontrol top: the listed jobs take the group's highest priorities by trading nice values."""

from __future__ import annotations

import pytest

from ctld.top import Queued, top_nice

CASES = [
    # (targets, peers, new nice by job id)
    ("already-first", [Queued(1, 100, 0)], [Queued(2, 90, 0)], {1: 0, 2: 0}),
    ("swap-two", [Queued(2, 90, 0)], [Queued(1, 100, 0)], {2: -10, 1: 10}),
    (
        "over-three-keeps-peer-order",
        [Queued(3, 80, 0)],
        [Queued(1, 100, 0), Queued(2, 90, 5)],
        {3: -20, 1: 10, 2: 15},
    ),
    ("listed-order", [Queued(3, 80, 0), Queued(2, 90, 0)], [Queued(1, 100, 0)], {3: -20, 2: 0, 1: 20}),
]


@pytest.mark.parametrize(("targets", "peers", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_top_nice(targets: list[Queued], peers: list[Queued], expected: dict[int, int]) -> None:
    got = top_nice(targets, peers)
    assert got == expected
    before = sum(q.nice for q in targets + peers)
    assert sum(got.values()) == before  # the group's nice total is unchanged
