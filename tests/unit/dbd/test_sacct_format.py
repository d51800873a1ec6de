"""sacct's rendering against Slurm 22.05's output (reference 90_*, 92_*)."""

from __future__ import annotations

import pytest

from cli.sacct import group_rows, parse_format, parse_job_ids, render
from shoal.acct_records import AcctEntry, JobRec, Record, StepRec
from shoal.v1 import accounting_pb2 as pb


def acct(
    job_id: int,
    name: str,
    state: str,
    code: int = 0,
    sig: int = 0,
    cancelled_by: int = -1,
    cpus: int = 1,
    nodes: str = "node1",
    steps: tuple[Record, ...] = (),
    **kw: object,
) -> AcctEntry:
    started = bool(nodes)
    fields: dict[str, object] = dict(
        job_id=job_id,
        name=name,
        state=state,
        exit_code=code,
        exit_signal=sig,
        partition="batch",
        account="research",
        alloc_cpus=cpus if started else 0,
        req_cpus=cpus,
        nodelist=nodes,
        cancelled_by=cancelled_by,
        array_task_id=-1,
        start_time=100 if started else 0,
        end_time=100,
    )
    fields.update(kw)
    return AcctEntry(JobRec(**fields), list(steps))


def batch(job_id: int, state: str, code: int = 0, sig: int = 0, cpus: int = 1) -> Record:
    return StepRec(
        job_id=job_id,
        step_id=-4,
        name="batch",
        state=state,
        exit_code=code,
        exit_signal=sig,
        num_cpus=cpus,
        nodelist="node1",
        start_time=100,
        end_time=100,
    )


JOBS = [
    acct(1, "wrap", "COMPLETED", steps=(batch(1, "COMPLETED"),)),
    acct(12, "wrap", "CANCELLED", cancelled_by=0, cpus=10, nodes=""),
    acct(20, "fill1", "CANCELLED", cancelled_by=1001, cpus=16, steps=(batch(20, "CANCELLED", 0, 15, 16),)),
    *[
        acct(30 + t, "arr", "CANCELLED", cancelled_by=0, nodes="", array_job_id=30, array_task_id=t)
        for t in (1, 2, 3)
    ],
    acct(33, "signalled", "FAILED", 0, 9, steps=(batch(33, "CANCELLED", 0, 9),)),
]

DEFAULT = """\
JobID           JobName  Partition    Account  AllocCPUS      State ExitCode
------------ ---------- ---------- ---------- ---------- ---------- --------
1                  wrap      batch   research          1  COMPLETED      0:0
1.batch           batch              research          1  COMPLETED      0:0
12                 wrap      batch   research         10 CANCELLED+      0:0
20                fill1      batch   research         16 CANCELLED+      0:0
20.batch          batch              research         16  CANCELLED     0:15
30_[1-3]            arr      batch   research          1 CANCELLED+      0:0
33            signalled      batch   research          1     FAILED      0:9
33.batch          batch              research          1  CANCELLED      0:9
"""

PARSABLE = """\
JobID|JobName|State|ExitCode|NodeList
1|wrap|COMPLETED|0:0|node1
1.batch|batch|COMPLETED|0:0|node1
12|wrap|CANCELLED by 0|0:0|None assigned
20|fill1|CANCELLED by 1001|0:0|node1
20.batch|batch|CANCELLED|0:15|node1
30_[1-3]|arr|CANCELLED by 0|0:0|None assigned
33|signalled|FAILED|0:9|node1
33.batch|batch|CANCELLED|0:9|node1
"""


def test_default_columns_as_slurm() -> None:
    fields = parse_format("JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode")
    lines = render(group_rows(JOBS, with_steps=True), fields, parsable="", header=True, now=200)
    assert all(line.endswith(" ") for line in lines)  # Slurm ends every column with a space
    assert [line.rstrip() for line in lines] == DEFAULT.splitlines()


@pytest.mark.parametrize("mode,end", [("P", ""), ("p", "|")], ids=["parsable2", "parsable"])
def test_parsable(mode: str, end: str) -> None:
    fields = parse_format("JobID,JobName,State,ExitCode,NodeList")
    lines = render(group_rows(JOBS, with_steps=True), fields, parsable=mode, header=True, now=200)
    assert lines == [line + end for line in PARSABLE.splitlines()]


def test_allocations_only_and_widths() -> None:
    fields = parse_format("JobID%5,State%4")
    lines = render(group_rows(JOBS[:1], with_steps=False), fields, parsable="", header=False, now=200)
    assert lines == ["    1 COM+ "]  # a width given right-aligns JobID too (22.05: `sacct -o jobid%5`)


# What 22.05 printed for `sacct -X -j J -o FIELD` and `-o FIELD%N` (captures 152, 154 and the running one):
# without a width JobID, JobIDRaw and DBIndex are left-aligned, every other field right-aligned; a typed
# width right-aligns every field.
@pytest.mark.parametrize(
    "fmt,expected",
    [
        (
            "JobID,State,ExitCode,DerivedExitCode",
            [
                "JobID             State ExitCode DerivedExitCode ",
                "------------ ---------- -------- --------------- ",
                "33               FAILED      0:9             0:0 ",
            ],
        ),
        (
            "JobID%20,JobName%15,State%12",
            [
                "               JobID         JobName        State ",
                "-------------------- --------------- ------------ ",
                "                  33       signalled       FAILED ",
            ],
        ),
        (
            "JobIDRaw,NodeList,User%6",
            [
                "JobIDRaw            NodeList   User ",
                "------------ --------------- ------ ",
                "33                     node1      u ",
            ],
        ),
        (
            "JobIDRaw%8,NodeList%6,Reason",
            [
                "JobIDRaw NodeLi                 Reason ",
                "-------- ------ ---------------------- ",
                "      33  node1                   None ",
            ],
        ),
    ],
    ids=["derived exit code 15 wide", "widths given", "defaults", "given and default"],
)
def test_column_widths_and_alignment(fmt: str, expected: list[str]) -> None:
    rows = group_rows([acct(33, "signalled", "FAILED", 0, 9, user="u", reason="None")], with_steps=False)
    assert render(rows, parse_format(fmt), parsable="", header=True, now=200) == expected


@pytest.mark.parametrize(
    "given,ids,steps",
    [
        (["12"], ["12"], {}),
        (["12,13", "14"], ["12", "13", "14"], {}),
        (["30_2"], ["30_2"], {}),
        (["30_[0-4%2]"], ["30_0", "30_1", "30_2", "30_3", "30_4"], {}),
        (["7.batch"], ["7"], {"7": {"batch"}}),
        (["7,7.batch"], ["7", "7"], {}),  # 22.05: the job named whole too shows its line and every step
    ],
    ids=["one", "lists", "task", "task range", "step", "job and step"],
)
def test_job_id_forms(given: list[str], ids: list[str], steps: dict[str, set[str]]) -> None:
    assert parse_job_ids(given) == (ids, steps)


def _usage(*rows: tuple[str, str, int]) -> pb.ReportResponse:
    resp = pb.ReportResponse(start=0, end=3600, cluster_cpus=4, cluster_since=1)
    for account, user, seconds in rows:
        resp.rows.add(fields={"cluster": "c", "account": account, "user": user, "cpu_seconds": str(seconds)})
    return resp


@pytest.mark.parametrize(
    "report,unit,expected",
    [
        ("cluster_utilization", "minutes", [["c", "60", "0", "0", "180", "0", "240"]]),
        ("cluster_utilization", "percent", [["c", "25.00%", "0.00%", "0.00%", "75.00%", "0.00%", "100.00%"]]),
        (
            "user_topusage",
            "minutes",
            [["c", "bob", "bob", "research", "40", "0"], ["c", "alice", "alice", "physics", "20", "0"]],
        ),
        (
            "account_utilization_by_user",
            "hours",
            [
                ["c", "root", "", "", "1", "0"],
                ["c", "physics", "", "", "0", "0"],
                ["c", "physics", "alice", "alice", "0", "0"],
                ["c", "research", "", "", "1", "0"],
                ["c", "research", "bob", "bob", "1", "0"],
            ],
        ),
    ],
    ids=["utilization minutes", "utilization percent", "topusage", "account by user"],
)
def test_sreport(report: str, unit: str, expected: list[list[str]]) -> None:
    from cli.sreport import build

    _, rows = build(report, _usage(("physics", "alice", 1200), ("research", "bob", 2400)), unit, "c")
    assert rows == expected


def _full_job() -> AcctEntry:
    """A job and a step with every field set to something visible."""
    job = JobRec(
        job_id=7,
        cluster="c",
        submit_time=100,
        array_job_id=5,
        array_task_id=2,
        name="n",
        uid=1,
        gid=2,
        user="u",
        account="a",
        partition="p",
        qos="q",
        tres_req="cpu=2",
        tres_alloc="cpu=2",
        nodelist="node1",
        alloc_cpus=2,
        alloc_nodes=1,
        req_cpus=3,
        req_nodes=1,
        req_mem_mb=2048,
        eligible_time=110,
        start_time=120,
        end_time=200,
        time_limit_min=5,
        state="CANCELLED",
        exit_code=1,
        exit_signal=9,
        derived_exit_code=2,
        derived_exit_signal=3,
        work_dir="/w",
        reason="r",
        cancelled_by=0,
        priority=9,
    )
    step = StepRec(
        job_id=7,
        step_id=0,
        submit_time=100,
        name="s",
        nodelist="node1",
        num_tasks=2,
        num_cpus=2,
        num_nodes=1,
        start_time=130,
        end_time=190,
        state="FAILED",
        exit_code=4,
        exit_signal=0,
        cpu_time_s=50,
        max_rss_kb=1000,
        tres_alloc="cpu=2",
    )
    return AcctEntry(job, [step])


def _only(record: Record, keep: set[str]) -> Record:
    """`record` with every field outside `keep` at its default, as dbd sends it."""
    return type(record)(**{k: v for k, v in record._asdict().items() if k in keep})


def test_every_column_needs_only_the_fields_sacct_asks_for() -> None:
    # dbd sends only needed_fields(); a column reading anything else would print a wrong value.
    from cli.sacct import LONG_FIELDS, _job_columns, _step_columns, needed_fields

    names = sorted(
        {*_job_columns(0, "").keys(), *_step_columns(0, "").keys(), *LONG_FIELDS.lower().split(",")}
    )
    full = _full_job()
    for name in names:
        fields = parse_format(name)
        keep = set(needed_fields(fields)) | {"job_id", "cluster", "submit_time", "step_id"}
        stripped = AcctEntry(_only(full.job, keep), [_only(step, keep) for step in full.steps])
        expected = render(group_rows([full], with_steps=True), fields, parsable="P", header=False, now=1000)
        got = render(group_rows([stripped], with_steps=True), fields, parsable="P", header=False, now=1000)
        assert got == expected, name


def test_sreport_utilization_with_down_planned_and_tres() -> None:
    from cli.sreport import build

    resp = _usage(("physics", "alice", 1200))
    resp.cluster_gpus = 2
    resp.rows[0].fields["gpu_seconds"] = "600"
    resp.totals.update(
        {
            "down_cpu": 1200,
            "plnd_down_cpu": 0,
            "planned_cpu": 600,
            "down_gpu": 0,
            "plnd_down_gpu": 600,
            "planned_gpu": 9999,
        }
    )
    header, rows = build("cluster_utilization", resp, "minutes", "c", ("cpu", "gres/gpu"), tres_column=True)
    assert header == ["Cluster", "TRES Name", "Allocated", "Down", "PLND Down", "Idle", "Planned", "Reported"]
    assert rows == [
        ["c", "cpu", "20", "20", "0", "190", "10", "240"],
        ["c", "gres/gpu", "10", "0", "10", "0", "100", "120"],
    ]  # planned capped by the idle time


@pytest.mark.parametrize(
    "words,values",
    [
        ("modify user bob set qos+=high", {"qos+": "high"}),
        ("modify user bob set QOS-=normal", {"qos-": "normal"}),
        ("modify user bob set maxjobs+=2", {"maxjobs": "2"}),  # not a list: plain set, as before
    ],
    ids=["qos add", "qos remove", "not a list"],
)
def test_sacctmgr_list_operators(words: str, values: dict[str, str]) -> None:
    from cli.sacctmgr import parse_args

    assert parse_args(words.split())[4] == values


# `sacctmgr show qos` of 22.05 (the real one on this machine) for the stock "normal" QOS
QOS_HEADER = (
    "      Name   Priority  GraceTime    Preempt   PreemptExemptTime PreemptMode                         "
    "           Flags UsageThres UsageFactor       GrpTRES   GrpTRESMins GrpTRESRunMin GrpJobs GrpSubmit  "
    "   GrpWall       MaxTRES MaxTRESPerNode   MaxTRESMins     MaxWall     MaxTRESPU MaxJobsPU MaxSubmitPU  "
    "   MaxTRESPA MaxJobsPA MaxSubmitPA       MinTRES "
)
QOS_PARSABLE = (
    "Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags|UsageThres|UsageFactor|GrpTRES|"
    "GrpTRESMins|GrpTRESRunMins|GrpJobs|GrpSubmit|GrpWall|MaxTRES|MaxTRESPerNode|MaxTRESMins|MaxWall|"
    "MaxTRESPU|MaxJobsPU|MaxSubmitPU|MaxTRESPA|MaxJobsPA|MaxSubmitPA|MinTRES"
)
NORMAL = {
    "name": "normal",
    "priority": "0",
    "gracetime": "00:00:00",
    "preemptmode": "cluster",
    "usagefactor": "1.000000",
}


def test_sacctmgr_show_qos_default_layout_as_slurm() -> None:
    from cli.sacctmgr import FORMATS, parse_format
    from cli.sacctmgr import render as render_table

    fields = parse_format(FORMATS["qos"])
    assert render_table([NORMAL], fields, parsable="", header=True)[0] == QOS_HEADER
    assert render_table([NORMAL], fields, parsable="P", header=True) == [
        QOS_PARSABLE,
        "normal|0|00:00:00|||cluster|||1.000000|||||||||||||||||",
    ]
    # a format= without widths takes each column's usual width (Flags 20 there)
    assert render_table([NORMAL], parse_format("Name,Flags,GrpTRESRunMins"), parsable="", header=True)[0] == (
        "      Name                Flags GrpTRESRunMin "
    )


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("jobid,stat,exit,jobn", ["JobID", "State", "ExitCode", "JobName"]),  # 22.05: a prefix names a field
        ("st", ["Start"]),  # the first field it begins, in sacct --helpformat order
        ("JobIdRaw,State", ["JobIDRaw", "State"]),  # Snakemake's plugin
        ("MaxVMSize,Comment", ["MaxVMSize", "Comment"]),  # Slurm's, blank here
    ],
)
def test_format_names_are_slurms(text: str, names: list[str]) -> None:
    assert [c.name for c in parse_format(text)] == names


def test_an_unknown_format_field_is_refused() -> None:
    from cli.common import CommandError

    with pytest.raises(CommandError) as err:
        parse_format("JobID,Foo")
    assert err.value.message == 'Invalid field requested: "Foo"'


def test_tres_columns_are_sorted_by_name_as_22_05() -> None:
    """ctld keeps scontrol's order (cpu,mem,node,billing,gres/gpu); sacct lists by name, so %40 cuts alike."""
    job = acct(
        450,
        "wrap",
        "COMPLETED",
        tres_req="cpu=1,mem=1000M,node=1,billing=1,gres/gpu=2",
        tres_alloc="cpu=1,mem=1000M,node=1,billing=1,gres/gpu=2",
        steps=(
            StepRec(
                job_id=450,
                step_id=-4,
                name="batch",
                state="COMPLETED",
                num_cpus=1,
                tres_alloc="cpu=1,mem=1000M,node=1,gres/gpu=2",
            ),
        ),
    )
    lines = render(
        group_rows([job], with_steps=True),
        parse_format("JobID,ReqTRES,AllocTRES"),
        parsable="P",
        header=False,
        now=200,
    )
    assert lines == [
        "450|billing=1,cpu=1,gres/gpu=2,mem=1000M,node=1|billing=1,cpu=1,gres/gpu=2,mem=1000M,node=1",
        "450.batch||cpu=1,gres/gpu=2,mem=1000M,node=1",
    ]


@pytest.mark.parametrize(
    "argv,said",
    [
        (["-Z"], ["sacct: invalid option -- 'Z'"]),
        (["--bogus"], ["sacct: unrecognized option '--bogus'"]),
        (["-j"], ["sacct: option requires an argument -- 'j'"]),
        (["-n", "stray"], ["sacct: error: Unknown arguments:", "sacct: error:  stray"]),
        # Snakemake's slurm plugin, without a shell: `sacct -nu alice -o Account%256 | tail -1`
        (["-nu", "alice", "-o", "Account%256", "|", "tail", "-1"], ["sacct: invalid option -- '1'"]),
    ],
    ids=["short", "long", "missing value", "stray word", "pipe as arguments"],
)
def test_a_bad_command_line_in_slurms_words(
    argv: list[str], said: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """As 22.05: one getopt-style line (or the stray words), exit 1, no usage dump."""
    from cli import sacct

    with pytest.raises(SystemExit) as exc:
        sacct.main(argv)
    assert exc.value.code == 1
    assert capsys.readouterr().err.splitlines() == said
