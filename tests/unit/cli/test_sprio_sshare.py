"""sprio and sshare render Slurm 22.05's columns (compared with the reference outputs)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cli import sprio, sshare
from shoal.v1 import controller_pb2 as pb

REF = Path("/work/shared/reference/slurm-22.05")
if not REF.is_dir():
    REF = Path(__file__).resolve().parents[4] / "shared" / "reference" / "slurm-22.05"


def _stdout(name: str) -> list[str]:
    text = (REF / name).read_text()
    return text.split("--- stdout ---\n", 1)[1].split("--- stderr ---", 1)[0].splitlines()


# job, partition, user, priority, age, fairshare, jobsize, partition factor (weighted)
JOBS = [
    (12, "batch", "alice", 11500, 10000, 1000, 500),
    (14, "debug", "alice", 11132, 10000, 133, 1000),
    (24, "batch", "alice", 10632, 10000, 133, 500),
    (25, "batch", "bob", 10765, 10000, 266, 500),
    (29, "batch", "alice", 11031, 10000, 531, 500),
    (30, "batch", "alice", 10632, 10000, 133, 500),
]
WEIGHTS = pb.PriorityFactors(age=1000, fairshare=10000, job_size=1000, partition=1000)


def _jobs() -> list[pb.JobPriority | None]:
    return [
        pb.JobPriority(
            job_id=j,
            partition=p,
            user_name=u,
            priority=prio,
            weighted=pb.PriorityFactors(fairshare=fs, job_size=js + 0.33, partition=part),
        )
        for j, p, u, prio, fs, js, part in JOBS
    ]


@pytest.mark.skipif(not REF.is_dir(), reason="reference outputs not present")
@pytest.mark.parametrize(
    ("ref", "fmt"),
    [("73_sprio.txt", sprio._drop_unweighted(sprio.DEFAULT, WEIGHTS)), ("74_sprio_l.txt", sprio.LONG)],
    ids=["default", "long"],
)
def test_sprio_matches_reference(ref: str, fmt: str) -> None:
    assert sprio.render(fmt, _jobs(), WEIGHTS, normalized=False) == _stdout(ref)


def test_sprio_normalized_and_weights() -> None:
    job = pb.JobPriority(
        job_id=7,
        partition="batch",
        priority=2147483648,
        normalized=pb.PriorityFactors(fairshare=0.5, job_size=0.25),
    )
    lines = sprio.render("%.15i %.10y %.10f %.10j", [job], WEIGHTS, normalized=True)
    assert lines == [
        "          JOBID   PRIORITY  FAIRSHARE    JOBSIZE",
        "              7  0.5000000  0.5000000  0.2500000",
    ]
    assert sprio.render("%.15i %.10Y %.10F", [None], WEIGHTS, normalized=False, header=False) == [
        "        Weights                 10000"
    ]


def test_sprio_site_column_shows_the_operators_value() -> None:
    job = pb.JobPriority(
        job_id=70,
        partition="batch",
        priority=1,
        weighted=pb.PriorityFactors(fairshare=10000, site=-2147483645),
    )
    assert sprio.render("%.15i %.10Y %.10S %.10F", [job], WEIGHTS, normalized=False) == [
        "          JOBID   PRIORITY       SITE  FAIRSHARE",
        "             70          1 -214748364      10000",
    ]


def test_sprio_normalized_default_has_no_site_column() -> None:
    """As 22.05's `sprio -n`: left-aligned factors, unweighted ones dropped, no SITE."""
    job = pb.JobPriority(
        job_id=72,
        partition="batch",
        priority=11332,
        normalized=pb.PriorityFactors(fairshare=1.0, job_size=0.1328125, partition=0.5),
        weighted=pb.PriorityFactors(fairshare=10000),
    )
    fmt = sprio._drop_unweighted(sprio.NORM_DEFAULT, WEIGHTS)
    lines = sprio.render(fmt, [job], WEIGHTS, normalized=True)
    assert lines[0] == "          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  JOBSIZE    PARTITION "
    cells = lines[1].split()  # (22.05 prints PRIORITY with more digits, 0.00000263: not matched yet)
    assert cells[:2] == ["72", "batch"] and cells[3:] == ["0.0000000", "1.0000000", "0.1328125", "0.5000000"]


def _share_rows() -> list[pb.ShareRow]:
    nan = float("nan")
    spec = [
        ("root", "", 0, 0, 0.0, 1.0, nan),
        ("root", "root", 1, 1, 0.009901, 0.0, 1.0),
        ("physics", "", 1, 40, 0.396040, 0.0, nan),
        ("physics", "alice", 2, 1, 0.5, 0.0, 1.0),
        ("physics", "bob", 2, 1, 0.5, 0.0, 1.0),
        ("research", "", 1, 60, 0.594059, 0.0, nan),
        ("research", "alice", 2, 1, 0.5, 0.0, 1.0),
        ("research", "root", 2, 1, 0.5, 0.0, 1.0),
    ]
    return [
        pb.ShareRow(account=a, user=u, depth=d, raw_shares=s, norm_shares=n, effective_usage=e, fairshare=f)
        for a, u, d, s, n, e, f in spec
    ]


@pytest.mark.skipif(not REF.is_dir(), reason="reference outputs not present")
def test_sshare_all_matches_reference() -> None:
    assert sshare.render(_share_rows(), sshare.DEFAULT) == _stdout("75_sshare_a.txt")


@pytest.mark.parametrize(
    ("all_users", "users", "accounts", "expected"),
    [
        (True, set(), set(), 8),
        (False, {"bob"}, set(), 4),  # every account row and bob's
        (True, set(), {"research"}, 4),  # root, research and its users
    ],
    ids=["all", "one-user", "one-account"],
)
def test_sshare_selection(all_users: bool, users: set[str], accounts: set[str], expected: int) -> None:
    assert len(sshare.select(_share_rows(), all_users, users, accounts)) == expected


# `sshare -a -P` on the real 22.05 (2026-12-01): accounts indented by depth in parsable output too
SSHARE_A_P = """\
Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare
root|||0.000000|209|1.000000|
 root|root|1|0.009901|0|0.000000|1.000000
 physics||40|0.396040|0|0.000000|
  physics|alice|1|0.500000|0|0.000000|1.000000
  physics|bob|1|0.500000|0|0.000000|1.000000
 research||60|0.594059|209|1.000000|
  research|alice|1|0.500000|179|0.856612|0.200000
  research|root|1|0.500000|29|0.143388|0.400000
"""


def _captured_rows() -> list[pb.ShareRow]:
    """The association rows behind SSHARE_A_P."""
    rows = []
    for line in SSHARE_A_P.splitlines()[1:]:
        account, user, shares, norm, usage, effective, fairshare = line.split("|")
        rows.append(
            pb.ShareRow(
                account=account.strip(),
                user=user,
                depth=len(account) - len(account.lstrip()),
                raw_shares=int(shares or 0),
                norm_shares=float(norm),
                raw_usage=float(usage),
                effective_usage=float(effective),
                fairshare=float(fairshare) if fairshare else math.nan,
            )
        )
    return rows


@pytest.mark.parametrize(
    ("parsable", "header", "users_only", "expected"),
    [
        ("P", True, False, SSHARE_A_P.splitlines()),
        ("|", True, False, [line + "|" for line in SSHARE_A_P.splitlines()]),  # sshare -a -p
        ("P", False, False, SSHARE_A_P.splitlines()[1:]),  # sshare -a -n -P
        # sshare -a -P -U: the user rows alone, flat
        (
            "P",
            True,
            True,
            [SSHARE_A_P.splitlines()[0]]
            + [line.lstrip() for line in SSHARE_A_P.splitlines()[1:] if line.split("|")[1]],
        ),
    ],
    ids=["P", "p", "noheader", "users-only"],
)
def test_sshare_parsable_matches_22_05(
    parsable: str, header: bool, users_only: bool, expected: list[str]
) -> None:
    rows = [r for r in _captured_rows() if r.user or not users_only]
    assert sshare.render(rows, sshare.DEFAULT, header, parsable, indent=not users_only) == expected


def test_sshare_users_only_is_flat() -> None:
    """`sshare -a -U` on 22.05: the user rows alone, accounts not indented."""
    rows = [r for r in _share_rows() if r.user]
    assert sshare.render(rows, sshare.DEFAULT, indent=False)[2:4] == [
        "root                       root          1    0.009901           0      0.000000   1.000000 ",
        "physics                   alice          1    0.500000           0      0.000000   1.000000 ",
    ]


def test_sshare_format_option_as_22_05() -> None:
    """`sshare -a -o Account%8,user,RawShares%4` and `-o acc`, captured from the real 22.05: a typed
    width right-aligns its column; a name may be a prefix in any case; an unknown one is refused."""
    columns, widths = sshare.parse_format("Account%8,user,RawShares%4")
    assert sshare.render(_share_rows()[:2], columns, widths=widths) == [
        " Account       User RawS ",
        "-------- ---------- ---- ",
        "    root                 ",
        "    root       root    1 ",
    ]
    assert sshare.parse_format("acc") == (["account"], {})
    with pytest.raises(sshare.CommandError, match='Invalid field requested: "foo"'):
        sshare.parse_format("Foo")


IDLE_RUN_MINS = "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0"


def test_sshare_long_has_22_05_s_tres_columns() -> None:
    """`sshare -l`, `-P` and `-o TRESRunMins%20,GrpTRESMins%8` on the idle real 22.05 (2026-12-01,
    scenario 210): GrpTRESMins and TRESRunMins are 30 wide, right-aligned, and a TRES list too long for
    its column ends in "+"; a header is cut plainly."""
    rows = [
        pb.ShareRow(account=r.account, user=r.user, depth=r.depth, tres_run_mins=IDLE_RUN_MINS)
        for r in _share_rows()
    ]
    lines = sshare.render(rows, sshare.LONG)
    assert lines[0].endswith("    LevelFS                    GrpTRESMins                    TRESRunMins ")
    assert lines[1].endswith(" ---------- " + "-" * 30 + " " + "-" * 30 + " ")
    assert lines[2].endswith(" " * 30 + " cpu=0,mem=0,energy=0,node=0,b+ ")
    parsable = sshare.render(rows[:2], sshare.LONG, parsable="P")
    assert parsable[0].endswith("|LevelFS|GrpTRESMins|TRESRunMins")
    assert parsable[2].endswith(f"||{IDLE_RUN_MINS}")
    columns, widths = sshare.parse_format("TRESRunMins%20,GrpTRESMins%8")
    assert sshare.render(rows[:1], columns, widths=widths) == [
        "         TRESRunMins GrpTRESM ",
        "-------------------- -------- ",
        "cpu=0,mem=0,energy=+          ",
    ]


@pytest.mark.parametrize(
    ("prog", "argv", "line"),
    [
        ("sprio", ["--bogus"], "sprio: unrecognized option '--bogus'"),
        ("sprio", ["-l", "-Z"], "sprio: invalid option -- 'Z'"),
        ("sshare", ["--bogus"], "sshare: unrecognized option '--bogus'"),
        ("sshare", ["-Z"], "sshare: invalid option -- 'Z'"),
        ("sshare", ["-A"], "sshare: option requires an argument -- 'A'"),
    ],
    ids=["sprio long", "sprio short", "sshare long", "sshare short", "sshare missing value"],
)
def test_option_refusals_in_getopts_words(
    prog: str, argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """22.05 (captured 2026-12-01): getopt's words and the hint, exit 1 (not a usage line)."""
    assert {"sprio": sprio, "sshare": sshare}[prog]._run(argv) == 1
    assert capsys.readouterr() == ("", f'{line}\nTry "{prog} --help" for more information\n')
