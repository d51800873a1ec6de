"""scontrol's reservation words and the sinfo -T / show reservation layouts (against Slurm 22.05's)."""

from __future__ import annotations

import pytest

from cli.reservations import ReservationError, format_reservation, parse_request, sinfo_lines
from shoal.timefmt import NOT_SET, UNLIMITED
from shoal.v1 import controller_pb2

NOW = 1_800_000_000


def _req(*words: str, creating: bool = True) -> controller_pb2.ReservationRequest:
    return parse_request([tuple(w.split("=", 1)) for w in words], creating=creating, now=NOW)  # type: ignore[misc]


def test_create_words() -> None:
    req = _req(
        "ReservationName=R",
        "StartTime=now+1hour",
        "Duration=1-00:00:00",
        "Nodes=node[1-2]",
        "users=alice,bob",
        "Flags=maint,daily",
        "PartitionName=gpu",
    )
    assert (req.name, req.start_time, req.duration_min, req.nodes, req.partition) == (
        "R",
        NOW + 3600,
        1440,
        "node[1-2]",
        "gpu",
    )
    assert list(req.users.values) == ["alice", "bob"] and req.users.op == ""
    assert list(req.flags.values) == ["MAINT", "DAILY"]
    assert _req("StartTime=now", "Duration=UNLIMITED", "NodeCnt=2", "Accounts=a").duration_min == UNLIMITED
    assert _req("StartTime=now", "EndTime=now+2hours", "NodeCnt=2", "Accounts=a").duration_min == NOT_SET


def test_update_words_add_and_remove_users() -> None:
    added = _req("ReservationName=R", "Users+=carol", creating=False)
    assert (added.users.op, list(added.users.values)) == ("+", ["carol"])
    removed = _req("ReservationName=R", "Accounts-=x", creating=False)
    assert (removed.accounts.op, list(removed.accounts.values)) == ("-", ["x"])
    assert not removed.users.given


@pytest.mark.parametrize(
    ("words", "line"),
    [
        (
            ("StartTime=now", "Duration=5", "Nodes=n1", "Users=a", "Bogus=1"),
            "scontrol: error: Unknown parameter Bogus=1.  No reservation created.",
        ),
        (
            ("StartTime=now", "Duration=5", "NodeCnt=x", "Users=a"),
            "scontrol: error: Invalid node count NodeCnt=x.  No reservation created.",
        ),
        (
            ("StartTime=now", "EndTime=soon", "Nodes=n1", "Users=a"),
            "scontrol: error: Invalid end time EndTime=soon.  No reservation created.",
        ),
    ],
    ids=["unknown-key", "bad-count", "bad-end"],
)
def test_bad_words(words: tuple[str, ...], line: str) -> None:
    with pytest.raises(ReservationError) as err:
        _req(*words)
    assert err.value.lines[-1] == line


def _info(
    name: str, start: int, minutes: int, nodes: list[str], **kw: object
) -> controller_pb2.ReservationInfo:
    return controller_pb2.ReservationInfo(
        name=name, start_time=start, end_time=start + minutes * 60, nodes=nodes, **kw
    )  # type: ignore[arg-type]


def test_sinfo_T_name_column_grows_and_long_values_push_right() -> None:
    resp = controller_pb2.GetReservationsResponse(
        now=NOW,
        reservations=[
            _info("rvprobe1", NOW + 3600, 60, ["node3"]),
            _info("averyveryverylongname", NOW - 60, 365 * 1440, ["node1", "node2"]),
        ],
    )
    lines = sinfo_lines(resp, header=True)
    assert (
        lines[0]
        == "RESV_NAME                 STATE           START_TIME             END_TIME     DURATION  NODELIST"
    )
    assert lines[1].startswith("rvprobe1               INACTIVE  ") and lines[1].endswith(
        "     01:00:00  node3"
    )
    assert lines[2].startswith("averyveryverylongname    ACTIVE  ") and lines[2].endswith(
        "  365-00:00:00  node[1-2]"
    )
    short = sinfo_lines(
        controller_pb2.GetReservationsResponse(
            now=NOW, reservations=[_info("rvprobe1", NOW + 3600, 60, ["node3"])]
        ),
        header=True,
    )
    assert short[0] == "RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST"
    assert short[1].startswith("rvprobe1   INACTIVE  ") and short[1].endswith("     01:00:00  node3")


def test_show_reservation_layout() -> None:
    info = _info("R", NOW + 3600, 60, ["node3"], flags=["MAINT", "SPEC_NODES"], users=["alice"], core_cnt=16)
    text = format_reservation(info, NOW)
    lines = text.splitlines()
    assert lines[0].startswith("ReservationName=R StartTime=") and lines[0].endswith(" Duration=01:00:00")
    assert lines[1:] == [
        "   Nodes=node3 NodeCnt=1 CoreCnt=16 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES",
        "   TRES=cpu=16",
        "   Users=alice Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a",
        "   MaxStartDelay=(null)",
    ]
