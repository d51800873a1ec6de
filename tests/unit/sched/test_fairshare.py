"""Fair-share factors, usage decay and billing on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from ctld.sched.fairshare import ShareAssoc, billing, decayed, factors, last_reset, reset_due, share_rows

# root -> acct(1) -> u1(1), u2(1)
SIBLINGS = [
    ShareAssoc(1, 0, "root"),
    ShareAssoc(2, 1, "acct", shares=1),
    ShareAssoc(3, 2, "acct", "u1", 1),
    ShareAssoc(4, 2, "acct", "u2", 1),
]
# root -> physics(40) -> alice, bob; research(60) -> carol, dave
DEEP = [
    ShareAssoc(1, 0, "root"),
    ShareAssoc(10, 1, "physics", shares=40),
    ShareAssoc(11, 10, "physics", "alice", 1),
    ShareAssoc(12, 10, "physics", "bob", 1),
    ShareAssoc(20, 1, "research", shares=60),
    ShareAssoc(21, 20, "research", "carol", 1),
    ShareAssoc(22, 20, "research", "dave", 1),
]


@pytest.mark.parametrize(
    ("tree", "usage", "fair_tree", "expected"),
    [
        # u2 has no usage: LevelFS inf ranks first (2/2), u1 LevelFS 0.5/1 second (1/2)
        (SIBLINGS, {3: 100.0}, True, {3: 0.5, 4: 1.0}),
        # classic: u1 EffectvUsage 1.0, NormShares 0.5 -> 2^-2; u2 0 + (1-0)*0.5 -> 2^-1
        (SIBLINGS, {3: 100.0}, False, {3: 0.25, 4: 0.5}),
        # no usage at all: everyone ties at the top
        (SIBLINGS, {}, True, {3: 1.0, 4: 1.0}),
        (SIBLINGS, {}, False, {3: 1.0, 4: 1.0}),
        # research (S .6, U 20/60) LevelFS 1.8 before physics (S .4, U 40/60) 0.6;
        # in research dave (inf) before carol; in physics bob (0.5/0.25) before alice (0.5/0.75)
        (DEEP, {11: 30.0, 12: 10.0, 21: 20.0}, True, {22: 1.0, 21: 0.75, 12: 0.5, 11: 0.25}),
        # physics and research tie (LevelFS 1.0): their users are ranked together
        (DEEP, {11: 30.0, 12: 10.0, 21: 60.0}, True, {22: 1.0, 12: 0.75, 11: 0.5, 21: 0.25}),
    ],
    ids=[
        "tree-siblings",
        "classic-siblings",
        "tree-idle",
        "classic-idle",
        "tree-deep",
        "tree-deep-tied-accounts",
    ],
)
def test_factors(
    tree: list[ShareAssoc], usage: dict[int, float], fair_tree: bool, expected: dict[int, float]
) -> None:
    got = factors(tree, usage, fair_tree)
    assert got == pytest.approx(expected)


def test_rows_match_sshare_reference_shares() -> None:
    tree = [
        ShareAssoc(1, 0, "root"),
        ShareAssoc(2, 1, "root", "root", 1),
        ShareAssoc(3, 1, "physics", shares=40),
        ShareAssoc(4, 3, "physics", "alice", 1),
        ShareAssoc(5, 3, "physics", "bob", 1),
        ShareAssoc(6, 1, "research", shares=60),
    ]
    rows = share_rows(tree, {})
    got = [(r.account, r.user, r.depth, round(r.norm_shares, 6), r.effective_usage) for r in rows]
    assert got == [
        ("root", "", 0, 0.0, 1.0),
        ("root", "root", 1, 0.009901, 0.0),
        ("physics", "", 1, 0.39604, 0.0),
        ("physics", "alice", 2, 0.5, 0.0),
        ("physics", "bob", 2, 0.5, 0.0),
        ("research", "", 1, 0.594059, 0.0),
    ]
    assert math.isnan(rows[0].fairshare) and rows[1].fairshare == 1.0


@pytest.mark.parametrize(
    ("usage", "elapsed", "half_life", "expected"),
    [
        (100.0, 3600, 3600, 50.0),
        (100.0, 7200, 3600, 25.0),
        (100.0, 1800, 3600, 100 / math.sqrt(2)),
        (100.0, 9999, 0, 100.0),
    ],
    ids=["one-half-life", "two-half-lives", "half-a-half-life", "no-decay"],
)
def test_decay(usage: float, elapsed: int, half_life: int, expected: float) -> None:
    assert decayed(usage, elapsed, half_life) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("weights", "max_tres", "expected"),
    [
        ((), False, 4.0),
        ((("cpu", 1.0), ("gres/gpu", 2.0)), False, 8.0),
        ((("cpu", 1.0), ("gres/gpu", 2.0)), True, 4.0),
    ],
    ids=["cpus-by-default", "weighted-sum", "max-tres"],
)
def test_billing(weights: tuple[tuple[str, float], ...], max_tres: bool, expected: float) -> None:
    assert billing({"cpu": 4, "mem": 8192, "gres/gpu": 2}, weights, max_tres) == expected


@pytest.mark.parametrize(
    ("last", "now", "period", "expected"),
    [
        (86400 * 10 + 5, 86400 * 10 + 500, "DAILY", False),
        (86400 * 10 + 5, 86400 * 11 + 5, "DAILY", True),
        (86400 * 10, 86400 * 400, "NONE", False),
        (0, 5, "NOW", True),
        (1_700_000_000, 1_700_000_000 + 40 * 86400, "MONTHLY", True),
    ],
    ids=["same-day", "next-day", "none", "now", "next-month"],
)
def test_reset(last: int, now: int, period: str, expected: bool) -> None:
    assert reset_due(last, now, period) is expected


NOW = 1_764_500_000  # 2025-11-30 10:53:20 UTC, a Sunday


@pytest.mark.parametrize(
    "period,expected",
    [
        ("NONE", 0),
        ("", 0),
        ("NOW", NOW),
        ("DAILY", 1_764_460_800),
        ("WEEKLY", NOW // 604_800 * 604_800),
        ("MONTHLY", 1_761_955_200),
        ("QUARTERLY", 1_759_276_800),
        ("YEARLY", 1_735_689_600),
    ],
    ids=["none", "empty", "now", "daily", "weekly", "monthly", "quarterly", "yearly"],
)
def test_last_reset_boundary(period: str, expected: int) -> None:
    assert last_reset(NOW, period) == expected
    if expected and period != "NOW":  # the boundary is one reset_due sees crossed
        assert reset_due(expected - 1, NOW, period) and not reset_due(expected, NOW, period)
