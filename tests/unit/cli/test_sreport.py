"""sreport's layout against what 22.05 prints (scenarios 170-173 and the running one on this machine)."""

from __future__ import annotations

import time

import pytest

from cli.sreport import build, period, render
from shoal.v1 import accounting_pb2 as pb

DAY = int(time.mktime((2020, 1, 1, 0, 0, 0, 0, 0, -1)))  # local midnight, as sreport prints local times
RULE = "-" * 80


def _resp(since: int, cpu_seconds: int = 0) -> pb.ReportResponse:
    resp = pb.ReportResponse(start=DAY, end=DAY + 86400, cluster_cpus=64, cluster_since=since)
    if cpu_seconds:
        resp.rows.add(
            fields={
                "cluster": "realslurm",
                "account": "physics",
                "user": "alice",
                "cpu_seconds": str(cpu_seconds),
            }
        )
    return resp


def _lines(
    report: str,
    resp: pb.ReportResponse,
    *,
    parsable: str = "",
    header: bool = True,
    unit: str = "minutes",
    tres: tuple[str, ...] = (),
) -> list[str]:
    names, rows = build(report, resp, unit, "realslurm", tres or ("cpu",), tres_column=bool(tres))
    return render(
        report,
        names,
        rows,
        start=resp.start,
        end=resp.end,
        unit=unit,
        tres=bool(tres),
        parsable=parsable,
        header=header,
    )


def test_utilization_of_a_period_before_the_cluster_existed() -> None:
    # 173: the title block, titles cut to 22.05's widths, and no row for a period with no recorded hour
    assert _lines("cluster_utilization", _resp(since=DAY + 5 * 86400)) == [
        RULE,
        "Cluster Utilization 2020-01-01T00:00:00 - 2020-01-01T23:59:59",
        "Usage reported in CPU Minutes",
        RULE,
        "  Cluster Allocate     Down PLND Dow     Idle  Planned Reported ",
        "--------- -------- -------- -------- -------- -------- -------- ",
    ]


@pytest.mark.parametrize(
    "report,title,columns",
    [
        (
            "cluster_utilization",
            "Cluster Utilization 2020-01-01T00:00:00 - 2020-01-01T23:59:59",
            "Cluster|Allocated|Down|PLND Down|Idle|Planned|Reported",
        ),
        (
            "user_topusage",
            "Top 10 Users 2020-01-01T00:00:00 - 2020-01-01T23:59:59 (86400 secs)",
            "Cluster|Login|Proper Name|Account|Used|Energy",
        ),
        (
            "account_utilization_by_user",
            "Cluster/Account/User Utilization 2020-01-01T00:00:00 - 2020-01-01T23:59:59 (86400 secs)",
            "Cluster|Account|Login|Proper Name|Used|Energy",
        ),
    ],
    ids=["170 utilization", "171 topusage", "172 account by user"],
)
def test_parsable_keeps_the_title_block_and_an_empty_period_has_no_rows(
    report: str, title: str, columns: str
) -> None:
    assert _lines(report, _resp(since=0), parsable="P") == [
        RULE,
        title,
        "Usage reported in CPU Minutes",
        RULE,
        columns,
    ]


def test_noheader_drops_title_block_and_column_titles() -> None:
    assert _lines("cluster_utilization", _resp(since=DAY - 3600, cpu_seconds=3600), header=False) == [
        "realslurm       60        0        0    92100        0    92160 "
    ]


def test_tres_column_takes_energys_place_and_percent_label() -> None:
    lines = _lines("user_topusage", _resp(since=0), tres=("gres/gpu",), parsable="p")
    assert lines[2:] == [
        "Usage reported in TRES Minutes",
        RULE,
        "Cluster|Login|Proper Name|Account|TRES Name|Used|",
    ]
    assert _lines("user_topusage", _resp(since=0), unit="percent")[2:] == [
        "Usage reported in Percentage of Total",
        RULE,
        "  Cluster     Login     Proper Name         Account     Used   Energy ",
        "--------- --------- --------------- --------------- -------- -------- ",
    ]


def test_a_cluster_registered_inside_the_period_reports_its_hours_only() -> None:
    resp = _resp(since=DAY + 12 * 3600 + 600)  # 12:10: the 12:00 hour on is recorded
    assert _lines("cluster_utilization", resp, parsable="P", header=False) == [
        "realslurm|0|0|0|46080|0|46080"
    ]


@pytest.mark.parametrize(
    "given,expected",
    [
        ((DAY + 300, DAY + 1200), (DAY, DAY + 3600)),  # within one hour: that hour
        ((DAY + 2 * 3600 + 300, DAY + 4 * 3600 + 1200), (DAY + 2 * 3600, DAY + 4 * 3600)),
        ((DAY, DAY + 86400), (DAY, DAY + 86400)),
    ],
    ids=["one hour", "rounded down", "whole day"],
)
def test_period_rounds_to_hours(given: tuple[int, int], expected: tuple[int, int]) -> None:
    assert period(*given) == expected
