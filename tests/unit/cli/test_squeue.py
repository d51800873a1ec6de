"""squeue output against what Slurm 22.05 prints for the same queue (reference captures 60-65, 77, 81)."""

from __future__ import annotations

import calendar
import os
import subprocess
import sys

import pytest

from cli import fmt, squeue
from shoal.v1 import jobs_pb2

NOW = calendar.timegm((2026, 11, 29, 21, 40, 1, 0, 0, 0))


pytestmark = pytest.mark.usefixtures("utc")  # the captures print UTC times


def job(
    job_id: int,
    name: str,
    user: str,
    *,
    state: int = jobs_pb2.PENDING,
    reason: str = "",
    partition: str = "batch",
    nodes: int = 1,
    cpus: int = 1,
    priority: int = 1000,
    nodelist: str = "",
    gres: str = "",
    limit: int = -2,
    start: int = 0,
    array: tuple[int, int] | None = None,
) -> jobs_pb2.JobInfo:
    info = jobs_pb2.JobInfo(
        job_id=job_id,
        user_name=user,
        user_id={"alice": 1001, "bob": 1002}[user],
        account={"alice": "research", "bob": "physics"}[user],
        state=state,  # type: ignore[arg-type]
        state_reason=reason or ("None" if state != jobs_pb2.PENDING else "Priority"),
        partition=partition,
        num_nodes=nodes,
        num_cpus=cpus,
        priority=priority,
        nodes=nodelist,
        tres_per_node=gres,
        time_limit_min=limit,
        start_time=start,
        qos="normal",
        array_task_id=-1,
    )
    info.spec.name = name
    if array:
        info.array_job_id, info.array_task_id = array
    return info


RUN_START = NOW - 3


def busy_queue() -> list[jobs_pb2.JobInfo]:
    """The busy cluster of the reference captures, in the controller's order (not squeue's)."""
    R = jobs_pb2.RUNNING
    return [
        job(20, "fill1", "alice", state=R, nodelist="node3", cpus=16, priority=900, gres="gres:gpu:8", start=RUN_START),
        job(21, "fill2", "alice", state=R, nodelist="node4", cpus=16, priority=890, gres="gres:gpu:8", start=RUN_START),
        job(22, "fill3", "bob", state=R, nodelist="node1", cpus=4, priority=920, gres="gres:gpu:8", start=RUN_START),
        job(23, "fill4", "bob", state=R, nodelist="node2", cpus=2, priority=910, gres="gres:gpu:8", start=RUN_START, limit=30),
        job(12, "wrap", "alice", reason="PartitionNodeLimit", nodes=10, cpus=10, priority=2000),
        job(14, "wrap", "alice", reason="PartitionTimeLimit", partition="debug", priority=3000, limit=120),
        job(24, "needgpu", "alice", priority=1400, gres="gres:gpu:4"),
        job(25, "needgpu2", "bob", nodes=2, cpus=2, priority=1800, gres="gres:gpu:2"),
        job(26, "later", "alice", reason="BeginTime", priority=1700,
            start=calendar.timegm((2026, 11, 29, 22, 39, 58, 0, 0, 0))),
        job(27, "dep", "alice", reason="Dependency", priority=1500),
        job(28, "held", "bob", reason="JobHeldUser", priority=1300),
        job(29, "big", "alice", reason="Resources", nodes=4, cpus=4, priority=1900),
        job(30, "arr", "alice", priority=1600, gres="gres:gpu:1", array=(30, 1)),
        job(31, "arr", "alice", priority=1600, gres="gres:gpu:1", array=(30, 2)),
        job(32, "arr", "alice", priority=1600, gres="gres:gpu:1", array=(30, 3)),
    ]  # fmt: skip


def run(
    fmt_str: str | None = None,
    *,
    long_format: str | None = None,
    flt: squeue.JobFilter | None = None,
    sort: str = squeue.DEFAULT_SORT,
    header: bool = True,
    jobs: list[jobs_pb2.JobInfo] | None = None,
    expand_arrays: bool = False,
) -> str:
    fields = squeue.build_fields(fmt_str, long_format)
    lines = squeue.render_queue(
        busy_queue() if jobs is None else jobs,
        NOW,
        flt or squeue.JobFilter(),
        fields,
        sort=sort,
        header=header,
        expand_arrays=expand_arrays,
    )
    return "\n".join(lines) + "\n"


REF_60 = """\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
                12     batch     wrap    alice PD       0:00     10 (PartitionNodeLimit)
                29     batch      big    alice PD       0:00      4 (Resources)
                25     batch needgpu2      bob PD       0:00      2 (Priority)
                26     batch    later    alice PD       0:00      1 (BeginTime)
          30_[1-3]     batch      arr    alice PD       0:00      1 (Priority)
                27     batch      dep    alice PD       0:00      1 (Dependency)
                24     batch  needgpu    alice PD       0:00      1 (Priority)
                28     batch     held      bob PD       0:00      1 (JobHeldUser)
                22     batch    fill3      bob  R       0:03      1 node1
                23     batch    fill4      bob  R       0:03      1 node2
                20     batch    fill1    alice  R       0:03      1 node3
                21     batch    fill2    alice  R       0:03      1 node4
                14     debug     wrap    alice PD       0:00      1 (PartitionTimeLimit)
"""


def test_default_format_matches_slurm_on_a_busy_cluster() -> None:
    assert run() == REF_60


def test_empty_queue_prints_only_the_header() -> None:
    assert run(jobs=[]) == REF_60.splitlines()[0] + "\n"


def test_long_format_columns() -> None:
    expected = """\
             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)
                12     batch     wrap    alice  PENDING       0:00 UNLIMITED     10 (PartitionNodeLimit)
                23     batch    fill4      bob  RUNNING       0:03     30:00      1 node2
                14     debug     wrap    alice  PENDING       0:00   2:00:00      1 (PartitionTimeLimit)
"""
    flt = squeue.JobFilter(job_ids=[(12, None), (23, None), (14, None)])
    assert run(squeue.LONG_FORMAT, flt=flt) == expected
    assert fmt.long_date(NOW) == "Sun Nov 29 21:40:01 2026"


def test_plain_specifiers_without_widths() -> None:
    out = run("%i %j %T %R").splitlines()
    assert out[0] == "JOBID NAME STATE NODELIST(REASON)"
    assert out[5] == "30_[1-3] arr PENDING (Priority)"
    assert out[9] == "22 fill3 RUNNING node1"


def test_parsable_style_format_without_header() -> None:
    out = run("%A|%u|%T|%r|%b|%D|%C", header=False).splitlines()
    assert out[:3] == [
        "12|alice|PENDING|PartitionNodeLimit|N/A|10|10",
        "29|alice|PENDING|Resources|N/A|4|4",
        "25|bob|PENDING|Priority|gres:gpu:2|2|2",
    ]
    assert out[4] == "30|alice|PENDING|Priority|gres:gpu:1|1|1"
    assert out[8] == "22|bob|RUNNING|None|gres:gpu:8|1|4"


def test_long_names_format() -> None:
    out = run(
        long_format="JobID,Name,UserName,Account,Partition,State,Reason,NumNodes,NumCPUs,tres-per-node,TimeLimit"
    )
    lines = out.splitlines()
    assert lines[0] == "".join(
        f"{h:<20}"
        for h in "JOBID NAME USER ACCOUNT PARTITION STATE REASON NODES CPUS TRES_PER_NODE TIME_LIMIT".split()
    )
    assert lines[5] == "".join(
        f"{v:<20}" for v in "30 arr alice research batch PENDING Priority 1 1 gres:gpu:1 UNLIMITED".split()
    )
    assert lines[10] == "".join(
        f"{v:<20}" for v in "23 fill4 bob physics batch RUNNING None 1 2 gres:gpu:8 30:00".split()
    )


def test_more_long_names_as_2205() -> None:
    """Scenario 250 (22.05): the GPU requests as TRES_PER_JOB/TASK and CPUS_PER_TRES, --time-min,
    --ntasks-per-node, and the fields of features shoal has not (HetJob, Origin, Profile ...) as 22.05
    prints them for a job without them; 22.05's headers (BATCH_FLAG, RESTART_COUNT)."""
    pending = job(40, "oG", "alice", state=jobs_pb2.PENDING)
    pending.spec.gpus, pending.spec.cpus_per_gpu, pending.spec.time_min_min = "4", 2, -1
    other = job(41, "oP", "alice", state=jobs_pb2.PENDING, nodes=2)
    other.spec.gpus_per_task, other.spec.ntasks_per_node, other.spec.time_min_min = "1", 2, 10
    other.spec.max_nodes = 2
    out = run(
        long_format="Name:4,MaxNodes:6,MinTime:8,NTPerNode:4,tres-per-job:14,tres-per-task:14,cpus-per-tres:14,"
        "Profile:8,Origin:4,Cores:4,HetJobID:5,BatchFlag:11,RestartCnt:14",
        jobs=[pending, other],
    )
    assert out.splitlines() == [
        "NAMEMAX_NOTIME_MINNTASTRES_PER_JOB  TRES_PER_TASK CPUS_PER_TRES PROFILE ORIGCOREHET_JBATCH_FLAG RESTART_COUNT ",
        "oG  1     0:00    0   gres:gpu:4    N/A           gres:gpu:2    NotSet  NA  *   N/A  0          0             ",
        "oP  2     10:00   2   N/A           gres:gpu:1    N/A           NotSet  NA  *   N/A  0          0             ",
    ]


def test_long_names_with_widths_and_right_alignment() -> None:
    flt = squeue.JobFilter(job_ids=[(22, None)])
    assert (
        run(long_format="jobid:5,name:.8,statecompact:3", flt=flt) == "JOBID    NAMEST \n22      fill3R  \n"
    )


def test_unknown_long_name_is_an_error() -> None:
    with pytest.raises(fmt.FormatError, match="Invalid job format specification: Bogus"):
        squeue.build_fields(None, "JobID,Bogus")


def test_start_lists_pending_jobs_by_expected_start() -> None:
    flt = squeue.JobFilter(pending_only=True)
    assert (
        run(squeue.START_FORMAT, flt=flt, sort=squeue.START_SORT)
        == """\
             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)
                26     batch    later    alice PD 2026-11-29T22:39:58      1 (null)               (BeginTime)
                12     batch     wrap    alice PD                 N/A     10 (null)               (PartitionNodeLimit)
                14     debug     wrap    alice PD                 N/A      1 (null)               (PartitionTimeLimit)
                24     batch  needgpu    alice PD                 N/A      1 (null)               (Priority)
                25     batch needgpu2      bob PD                 N/A      2 (null)               (Priority)
                27     batch      dep    alice PD                 N/A      1 (null)               (Dependency)
                28     batch     held      bob PD                 N/A      1 (null)               (JobHeldUser)
                29     batch      big    alice PD                 N/A      4 (null)               (Resources)
          30_[1-3]     batch      arr    alice PD                 N/A      1 (null)               (Priority)
"""
    )


def test_start_order_after_a_backfill_pass_as_2205() -> None:
    """squeue --start on the real 22.05 after backfill planned the queue (2026-12-01): by expected start,
    a --begin job by its begin time, ties (backfill's one-year-ahead guess) by job id whatever their
    priority, jobs without a start (N/A) last by job id."""
    year = NOW + 365 * 86400
    queue = [
        job(12, "wrap", "alice", reason="PartitionNodeLimit", priority=3500),
        job(13, "wrap", "alice", reason="PartitionTimeLimit", partition="debug", priority=3132),
        job(21, "needgpu", "alice", start=year, priority=2632),
        job(22, "needgpu2", "bob", reason="Resources", start=year, priority=10765),
        job(23, "later", "alice", reason="BeginTime"),
        job(24, "dep", "alice", reason="Dependency"),
        job(26, "big", "alice", start=year, priority=3031),
        job(30, "p_n4g", "alice", start=NOW + 1785, priority=2656),
        job(41, "later2", "alice", reason="BeginTime"),
        job(42, "later3", "alice", reason="BeginTime"),
    ]
    for j, begin in ((queue[4], 3600), (queue[8], 7200), (queue[9], 1788)):
        j.spec.begin_time = NOW + begin
    out = run("%i", flt=squeue.JobFilter(pending_only=True), sort=squeue.START_SORT, jobs=queue, header=False)
    assert out.split() == "30 42 23 41 21 22 26 12 13 24".split()


def test_user_and_state_filters() -> None:
    flt = squeue.JobFilter(user_ids={1001}, states=frozenset({jobs_pb2.PENDING}))
    ids = [line.split()[0] for line in run(flt=flt).splitlines()[1:]]
    assert ids == ["12", "29", "26", "30_[1-3]", "27", "24", "14"]


@pytest.mark.parametrize(
    ("flt", "ids"),
    [
        (squeue.JobFilter(partitions={"debug"}), ["14"]),
        (squeue.JobFilter(names={"wrap", "dep"}), ["12", "27", "14"]),
        (squeue.JobFilter(accounts={"physics"}), ["25", "28", "22", "23"]),
        (squeue.JobFilter(nodes={"node1", "node4"}), ["22", "21"]),
        (squeue.JobFilter(job_ids=[(30, None)]), ["30_[1-3]"]),
        (squeue.JobFilter(job_ids=[(30, 2)]), ["30_2"]),
        (squeue.JobFilter(job_ids=[(20, None), (12, None)]), ["12", "20"]),
        (squeue.JobFilter(states=frozenset({jobs_pb2.RUNNING})), ["22", "23", "20", "21"]),
        (squeue.JobFilter(qos={"other"}), []),
    ],
    ids=["partition", "names", "account", "nodelist", "array-master", "array-task", "job-list", "running",
         "qos"],
)  # fmt: skip
def test_selectors(flt: squeue.JobFilter, ids: list[str]) -> None:
    assert [line.split()[0] for line in run(flt=flt).splitlines()[1:]] == ids


def test_finished_jobs_hidden_by_default_and_shown_with_all() -> None:
    done = job(20, "fill1", "alice", state=jobs_pb2.CANCELLED, nodelist="node3", start=RUN_START)
    done.end_time = NOW
    assert run(jobs=[done]).count("\n") == 1
    out = run(jobs=[done], flt=squeue.JobFilter(states=None, job_ids=[(20, None)]))
    assert out.splitlines()[1] == "                20     batch    fill1    alice CA       0:03      1 node3"


@pytest.mark.parametrize(
    ("state", "reason", "shown"),
    [
        (jobs_pb2.FAILED, "NonZeroExitCode", "(NonZeroExitCode)"),
        (jobs_pb2.TIMEOUT, "TimeLimit", "(TimeLimit)"),
        (jobs_pb2.COMPLETED, "None", "node1"),
        (jobs_pb2.COMPLETING, "None", "node1"),
    ],
    ids=["failed", "timeout", "completed", "completing"],
)
def test_reason_column_of_ended_jobs(state: int, reason: str, shown: str) -> None:
    info = job(5, "x", "bob", state=state, reason=reason, nodelist="node1", start=RUN_START)
    assert squeue.job_value(squeue.Row(info), "R", NOW) == shown


def test_array_throttle_and_gaps_in_the_task_string() -> None:
    tasks = [job(40 + t, "a", "bob", array=(40, t)) for t in (1, 2, 3, 7)]
    for t in tasks:
        t.array_max_tasks = 2
    running = job(50, "a", "bob", state=jobs_pb2.RUNNING, nodelist="node2", array=(40, 0), start=RUN_START)
    out = run("%i %K %F", jobs=[*tasks, running], header=False)
    assert out == "40_[1-3,7%2] 1-3,7%2 40\n40_0 0 40\n"


def test_percent_A_is_the_id_of_the_record_that_holds_the_task() -> None:
    """22.05 (probed here, and scenario 245): a running task's %A is its own job id, a task still in
    its array's pending record the array's id, a task split off it (held on its own) its own again."""
    pending = [job(60 + t, "a", "bob", array=(60, t)) for t in (2, 3)]
    pending[1].array_split, pending[1].state_reason = True, "JobHeldUser"
    running = job(61, "a", "bob", state=jobs_pb2.RUNNING, nodelist="node2", array=(60, 1), start=RUN_START)
    out = run("%i %A %F", jobs=[*pending, running], header=False, expand_arrays=True, sort="K")
    assert out == "60_1 61 60\n60_2 60 60\n60_3 63 60\n"


def test_oversubscribe_column_as_2205() -> None:
    """Scenario 254 (22.05): -s is YES, a pending job without --exclusive OK, --exclusive NO (with -s
    too); a started job shows what it got."""
    jobs = [job(50 + i, f"os{i}", "alice") for i in range(1, 5)]
    jobs[0].spec.oversubscribe = True
    jobs[2].spec.exclusive = True
    jobs[3].spec.exclusive = jobs[3].spec.oversubscribe = True
    running = job(55, "os5", "alice", state=jobs_pb2.RUNNING, nodelist="node1", start=RUN_START)
    running.oversubscribe = False  # it holds its node alone
    out = run("%j %h", jobs=[*jobs, running], header=False, sort="j")
    assert out == "os1 YES\nos2 OK\nos3 NO\nos4 NO\nos5 NO\n"


def test_array_flag_prints_one_line_per_task() -> None:
    out = run("%i", jobs=busy_queue(), flt=squeue.JobFilter(job_ids=[(30, None)]), expand_arrays=True)
    assert out == "JOBID\n30_1\n30_2\n30_3\n"


def test_array_meta_record_from_the_controller() -> None:
    meta = job(30, "arr", "alice", array=(30, -1))
    meta.array_task_str = "1-3"
    assert run("%i", jobs=[meta], header=False) == "30_[1-3]\n"
    assert run("%i", jobs=[meta], header=False, expand_arrays=True) == "30_1\n30_2\n30_3\n"


@pytest.mark.parametrize(
    ("sort", "ids"),
    [
        ("i", ["12", "14", "20", "21", "22", "23", "24"]),
        ("-i", ["30_[1-3]", "29", "28", "27", "26", "25", "24"]),
        ("-t,i", ["20", "21", "22", "23", "12", "14", "24"]),
        ("-C,i", ["20", "21", "12", "22", "29", "23", "25"]),
        ("u,-D", ["12", "29", "20", "21", "14", "24", "26"]),
    ],
    ids=["id", "id-desc", "state-desc", "cpus-desc", "user-then-nodes"],
)
def test_sort_orders(sort: str, ids: list[str]) -> None:
    assert [line.split()[0] for line in run(sort=sort).splitlines()[1:8]] == ids


def test_bad_sort_key() -> None:
    with pytest.raises(ValueError, match="Invalid sort specification"):
        squeue.parse_sort("i,%")


JOB = job(22, "fill3", "bob", state=jobs_pb2.RUNNING, nodelist="node1", cpus=4, priority=920,
          gres="gres:gpu:8", start=RUN_START, limit=90)  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ("%a", "physics"), ("%A", "22"), ("%b", "gres:gpu:8"), ("%C", "4"), ("%D", "1"), ("%F", "22"),
        ("%i", "22"), ("%j", "fill3"), ("%K", "N/A"), ("%l", "1:30:00"), ("%L", "1:29:57"), ("%M", "0:03"),
        ("%N", "node1"), ("%P", "batch"), ("%q", "normal"), ("%Q", "920"), ("%r", "None"), ("%R", "node1"),
        ("%S", "2026-11-29T21:39:58"), ("%e", "N/A"), ("%t", "R"), ("%T", "RUNNING"), ("%u", "bob"),
        ("%U", "1002"), ("%E", "(null)"), ("%Y", "(null)"), ("%z", "*:*:*"), ("%y", "0"), ("%o", "(null)"),
        ("%.6j|", " fill3|"), ("%-7j|", "fill3  |"), ("%7j|", "fill3  |"), ("%3j", "fil"), ("x%%y", "x%y"),
        ("%5", "%5"),
        ("%m", "0"),
    ],
    ids=lambda v: str(v),
)  # fmt: skip
def test_specifiers(spec: str, value: str) -> None:
    fields = squeue.build_fields(spec, None)
    assert squeue.format_rows([squeue.Row(JOB)], fields, NOW, header=False) == [value]


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("12", [(12, None)]),
        ("12,30_2", [(12, None), (30, 2)]),
        ("30_[1-3]", [(30, 1), (30, 2), (30, 3)]),
        ("30_[1,4],5", [(30, 1), (30, 4), (5, None)]),
    ],
    ids=["one", "list", "task-range", "range-and-job"],
)
def test_parse_job_ids(text: str, parsed: list[tuple[int, int | None]]) -> None:
    assert squeue.parse_job_ids(text) == parsed


@pytest.mark.parametrize("text", ["x", "12_", "0", "12_[a]"], ids=["word", "empty-task", "zero", "bad-range"])
def test_parse_job_ids_rejects(text: str) -> None:
    with pytest.raises(ValueError) as err:
        squeue.parse_job_ids(text)
    assert str(err.value) == f"Invalid job id: {text}"


def _squeue(*args: str, socket: str = "/nonexistent/shoal-agent.sock") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SHOAL_AGENT_SOCKET": socket}
    return subprocess.run(
        [sys.executable, "-m", "cli.squeue", *args], capture_output=True, text=True, env=env, timeout=30
    )


def test_dead_controller_message_and_exit_code() -> None:
    proc = _squeue()
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-t", "xyz"], "squeue: error: Invalid job state specified: xyz\n"),
        (["-j", "x"], "squeue: error: Invalid job id: x\n"),
        (["-u", "no_such_user_zz"], "squeue: error: Invalid user: no_such_user_zz\n"),
        (["-S", "%"], "squeue: error: Invalid sort specification: %\n"),
        (["-s", "4700"], "squeue: error: Invalid job_step id: 4700.??\n"),  # 22.05 wants JOB.STEP
        (["-s", "x.0"], "squeue: error: Invalid job_step id: x.0\n"),
        (["-s", "-j", "x"], "squeue: error: Invalid job id: x\n"),
        (["-j", "-s", ".0"], "squeue: error: Invalid job id: .0\n"),  # the operand is -j's
        (["-s", "-j"], "squeue: error: Incompatible options --jobs and --steps\n"),
        (["-s4700.0", "-j"], "squeue: error: Incompatible options --jobs and --steps\n"),
    ],
    ids=[
        "state",
        "job-id",
        "user",
        "sort",
        "step-without-step",
        "step-job",
        "steps-job-id",
        "operand-to-jobs",
        "steps-of-no-jobs",
        "step-list-no-jobs",
    ],
)
def test_option_errors(args: list[str], message: str) -> None:
    proc = _squeue(*args)
    assert (proc.returncode, proc.stderr) == (1, message)


# 22.05 (2026-12-01, running 3004.0 and 3005.0): getopt gives -j and -s a list only when attached; the
# first operand is -j's list, else -s's; another one is refused with 22.05's usage on stdout
@pytest.mark.parametrize(
    ("argv", "stray"),
    [
        (["-s", "4700.0", "-j", "4701"], "4701"),
        (["-j", "4701", "-s", "4700.0"], "4700.0"),
        (["4701"], "4701"),
        (["-j", "4701", "4700"], "4700"),
        (["-s", "4700.0", "4701.0"], "4701.0"),
        (["-u", "alice", "4701"], "4701"),
    ],
    ids=["steps-then-jobs", "jobs-then-steps", "bare", "two-jobs", "two-steps", "after-user"],
)
def test_a_stray_operand_is_refused_as_22_05(argv: list[str], stray: str) -> None:
    proc = _squeue(*argv)
    assert (proc.returncode, proc.stderr) == (1, f"squeue: error: Unrecognized option: {stray}\n")
    assert proc.stdout == squeue.USAGE
    assert proc.stdout.endswith("\n\t      [-ahjlrsv]\n")


# None: no list (a bare -j/-s, or none given); "": an empty one (`--jobs=`, `-j ''`), which 22.05 tells
# apart (scenario 224)
@pytest.mark.parametrize(
    ("argv", "jobs", "steps"),
    [
        (["-s", "4700.0"], None, "4700.0"),
        (["-s4700.0", "-j4701"], "4701", "4700.0"),  # both apply: no row
        (["--steps=4700.0", "--jobs=4701"], "4701", "4700.0"),
        (["--steps", "4700.0", "--jobs=4701"], "4700.0", None),  # the operand replaces -j's list
        (["-j4701", "-s", "4700.0"], "4700.0", None),
        (["-j", "-s", "4700.0"], "4700.0", None),
        (["-s", "-j", "4701"], "4701", None),
        (["-hs", "5.0", "-j"], "5.0", None),
        (["-o", "%i", "-j", "4701"], "4701", None),  # an option's value is no operand
        (["-j", "--", "5"], "5", None),
        (["--jobs="], "", None),
        (["-j", ""], "", None),
        (["-s4700.0", "--jobs="], "", "4700.0"),
        (["--steps="], None, ""),
        (["-j4701", "--jobs="], "", None),  # the last list wins
        (["--jobs=", "-j4701"], "4701", None),
        (["-j4701", "-j"], "4701", None),  # a bare -j keeps the list
        (["-s", "--jobs=", "-j"], "", None),
    ],
    ids=[
        "steps",
        "both-attached",
        "both-long",
        "operand-wins",
        "operand-wins-short",
        "jobs-first",
        "steps-first",
        "cluster",
        "format-value",
        "double-dash",
        "empty-jobs",
        "empty-operand",
        "step-empty-jobs",
        "empty-steps",
        "last-list-empty",
        "last-list",
        "bare-keeps",
        "bare-after-empty",
    ],
)
def test_operands_read_as_22_05(argv: list[str], jobs: str | None, steps: str | None) -> None:
    args, stray = squeue.parse_command_line(argv)
    assert (args.jobs, args.steps, stray) == (jobs, steps, [])
    assert args.jobs_flag == any(w.startswith(("-j", "--jobs")) for w in argv)


def test_a_step_id_given_as_job_is_its_job() -> None:
    assert squeue.parse_job_ids("3004.0") == [(3004, None)]  # 22.05: `-j -s 3004.0` lists 3004's steps


# 22.05 (captured 2026-12-01): getopt's words, then the hint; exit 1
GETOPT_REFUSALS = [
    (["--bogus"], "squeue: unrecognized option '--bogus'"),
    (["-Z"], "squeue: invalid option -- 'Z'"),
    (["-p"], "squeue: option requires an argument -- 'p'"),
    (["-j", "12", "-Z"], "squeue: invalid option -- 'Z'"),
]


@pytest.mark.parametrize(("argv", "line"), GETOPT_REFUSALS, ids=[" ".join(a) for a, _ in GETOPT_REFUSALS])
def test_option_refusals_in_getopts_words(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        squeue.parse_command_line(argv)
    assert info.value.code == 1
    assert capsys.readouterr() == ("", f'{line}\nTry "squeue --help" for more information\n')


def test_unknown_option_is_reported_without_traceback() -> None:
    proc = _squeue("--bogus")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert 'Try "squeue --help"' in proc.stderr


# The running steps on the real 22.05 (2026-12-01): 4699 `sbatch --wrap 'sleep 90'` (alice), 4700
# `sbatch -n2 --wrap 'srun sleep 90'` (alice), 4701 the same as bob.
# alice and bob as uids 1001 and 1002 (the test machine need not have them)
RUNNING_STEPS = [(4699, -4, 1001), (4700, 0, 1001), (4700, -4, 1001), (4701, 0, 1002), (4701, -4, 1002)]


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["-s"], ["4699.batch", "4700.0", "4700.batch", "4701.0", "4701.batch"]),
        (["-s", "-j", "4700"], ["4700.0", "4700.batch"]),
        (["-s", "-j", "4700,4701"], ["4700.0", "4700.batch", "4701.0", "4701.batch"]),
        (["-s", "-j", "4699"], ["4699.batch"]),
        (["-s", "-j", "99999"], []),
        (["-s", "-u", "1002"], ["4701.0", "4701.batch"]),
        (["-s", "-j", "4700", "-u", "1002"], []),
    ],
    ids=["all", "one-job", "two-jobs", "batch-only", "no-such-job", "user", "job-and-user"],
)
def test_steps_are_filtered_by_job_and_user_as_22_05(argv: list[str], shown: list[str]) -> None:
    from cli.stepshow import step_id_text

    flt = squeue.build_filter(squeue.parse_command_line(argv)[0])
    steps = [jobs_pb2.JobStep(job_id=j, step_id=s, user_id=u) for j, s, u in RUNNING_STEPS]
    assert [step_id_text(s) for s in steps if squeue.step_selected(s, flt)] == shown


def test_steps_are_listed_in_22_05_s_order() -> None:
    from cli.stepshow import squeue_order, step_id_text

    pairs = [(4701, -4), (4700, -5), (4700, -4), (4700, 1), (4700, 0)]
    steps = [jobs_pb2.JobStep(job_id=j, step_id=s) for j, s in pairs]
    assert [step_id_text(s) for s in sorted(steps, key=squeue_order)] == [
        "4700.0",
        "4700.1",
        "4700.batch",
        "4700.extern",  # PrologFlags=Contain's, after .batch as Slurm orders step ids
        "4701.batch",
    ]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("4700.0", ["4700.0"]),
        ("4700.0,4701.0", ["4700.0", "4701.0"]),
        ("4700.batch", ["4700.0"]),  # 22.05 lists 4700.0 for it
        ("4700.x", ["4700.0"]),
        ("99999.0", ["99999.0"]),  # no such step: the header alone, exit 0
    ],
)
def test_step_ids_read_as_22_05(text: str, ids: list[str]) -> None:
    assert squeue.parse_step_ids(text) == ids


def test_help_and_version_need_no_controller() -> None:
    assert "--states" in _squeue("--help").stdout
    assert _squeue("-V").stdout.startswith("slurm 22.05")
    # steps come from the controller (GetSteps): without one, the header and Slurm's error
    steps = _squeue("-s")
    assert (steps.returncode, steps.stdout) == (
        1,
        "         STEPID     NAME PARTITION     USER      TIME NODELIST\n",
    )
    assert "slurm_load_job_steps error: Unable to contact slurm controller" in steps.stderr


def test_help_imports_no_grpc() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.squeue", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    imported = {
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }
    assert proc.returncode == 0
    assert not {m for m in imported if m.split(".")[0] in {"grpc", "sqlalchemy", "ctld", "noded", "dbd"}}


def test_a_task_cancelled_out_of_a_pending_array_is_not_listed() -> None:
    # 22.05 (scenario 133): `scancel 30_2` of a pending array, then `squeue -t all -r`: 30_1 and 30_3 only
    tasks = [job(30 + t - 1, "arr", "alice", array=(30, t)) for t in (1, 2, 3)]
    tasks[1].state = jobs_pb2.CANCELLED
    every = squeue.JobFilter(states=None)  # -t all
    assert (
        run("%i %T", jobs=tasks, flt=every, header=False, expand_arrays=True)
        == "30_1 PENDING\n30_3 PENDING\n"
    )
    # once no task of it waits, the cancelled ones are listed as any ended job is
    for t in tasks:
        t.state = jobs_pb2.CANCELLED
    assert run("%i %T", jobs=tasks, flt=every, header=False, expand_arrays=True) == (
        "30_1 CANCELLED\n30_2 CANCELLED\n30_3 CANCELLED\n"
    )


def test_one_parser_reads_one_command_line_after_another() -> None:
    """The parser is built once per process (the runner's forks share it): a command line leaves
    nothing behind for the next one."""
    first = squeue.PARSER.parse_args(["-t", "all", "-u", "1002", "-l", "-o", "%i", "-S", "u", "-i", "5"])
    second = squeue.PARSER.parse_args([])
    assert (first.states, first.user, first.long, first.format) == ("all", "1002", True, "%i")
    assert vars(second) == vars(squeue._parser().parse_args([]))


def test_braces_and_percent_signs_in_a_format_print_as_given() -> None:
    out = run("{%.5i} %% {x}%j", header=False).splitlines()
    assert out[0] == "{   12} % {x}wrap"
    assert out[4] == "{30_[1} % {x}arr"  # a value wider than its column is cut, as Slurm does


# squeue -s's own reading of -o, measured on the real 22.05 (2026-12-01, scenario 223): step 3935.0 of
# alice (uid 1001) on node1, batch partition, no time limit
@pytest.mark.parametrize(
    ("text", "header", "row", "unknown"),
    [
        ("%i %T", "STEPID %T", "3935.0 %T", ["T"]),
        ("%.8T|%t%i%%|%-9u|x%", "%.8T|%tSTEPID%|%-9u|x", "%.8T|%t3935.0%|%-9u|x", ["T", "t", "|", "-"]),
        ("%.20T|%i", "%.20T|STEPID", "%.20T|3935.0", ["T"]),
        ("ab%5|%i", "ab%5|STEPID", "ab%5|3935.0", ["|"]),
        ("x%", "x", "x", []),
        (
            "%b|%U|%A|%l|%.5i|%P|%N|%j",
            "TRES_PER_JOB|UID|TASKS|TIME_LIMIT|STEPI|PARTITION|NODELIST|NAME",
            "(null)|1001|1|UNLIMITED|3935.|batch|node1|sleep",
            [],
        ),
    ],
    ids=["state", "mixed", "width-kept", "width-no-letter", "trailing-percent", "step-letters"],
)
def test_step_format_as_22_05(text: str, header: str, row: str, unknown: list[str]) -> None:
    from cli.stepshow import squeue_value

    step = jobs_pb2.JobStep(
        job_id=3935, step_id=0, name="sleep", user_id=1001, user_name="alice", partition="batch",
        nodes="node1", num_tasks=1, time_limit_min=-2, start_time=NOW, state=jobs_pb2.RUNNING,
    )  # fmt: skip
    fields, bad = squeue.parse_step_format(text)
    assert bad == unknown
    assert fmt.render(fields, lambda key: squeue.STEP_HEADERS[key]) == header
    assert fmt.render(fields, squeue_value(step, NOW)) == row


def test_a_bad_step_letter_is_an_error_line_and_squeue_goes_on() -> None:
    proc = _squeue("-s4700.0", "--jobs=", "-o", "%i %T")  # no step on an empty job list: no controller
    assert (proc.returncode, proc.stdout) == (0, "STEPID %T\n")
    assert proc.stderr == "squeue: error: Invalid job step format specification: T\n"


STEPS_HEADER = "         STEPID     NAME PARTITION     USER      TIME NODELIST\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["-s4700.0", "--jobs="],
        ["--jobs=", "-s"],
        ["--steps="],
        ["-s4700.0", "--steps="],
        ["-s", "--jobs=", "-j"],
    ],
    ids=["step-empty-jobs", "steps-empty-jobs", "empty-steps", "empty-steps-last", "bare-after-empty"],
)
def test_an_empty_list_lists_no_step(argv: list[str]) -> None:
    proc = _squeue(*argv)  # 22.05: the header alone, exit 0 (scenario 224)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, STEPS_HEADER, "")


def test_an_empty_job_list_lists_no_job() -> None:
    flt = squeue.build_filter(squeue.parse_command_line(["--jobs="])[0])
    jobs = [job(12, "a", "alice", state=jobs_pb2.RUNNING), job(13, "b", "bob")]
    assert squeue.render_queue(jobs, NOW, flt, squeue.build_fields(None, None)) == [
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    ]
    bare = squeue.build_filter(squeue.parse_command_line(["-j"])[0])
    assert len(squeue.render_queue(jobs, NOW, bare, squeue.build_fields(None, None))) == 3


def _answer(partitions_private: bool, job_ids: list[int]) -> object:
    from shoal.v1 import controller_pb2

    jobs = [job(j, "pd1", "alice", state=jobs_pb2.RUNNING) for j in job_ids]
    return controller_pb2.GetJobsResponse(jobs=jobs, now=NOW, partitions_private=partitions_private)


# 22.05 under PrivateData=partitions, alice's squeue (2026-12-01, slurm.conf changed and put back at
# once): its jobs on stdout, `slurm_load_partitions: Access/permission denied` on stderr, exit 0 (-a, -p,
# -j, -l, --start, -O, -h alike, once per -i pass); not for an id that is not there (only slurm_load_jobs'
# error, exit 1), not for -s, not for root
@pytest.mark.parametrize(
    ("private", "argv", "ids", "out", "err", "rc"),
    [
        (True, ["-h", "-o", "%i"], [3928], "3928\n", "slurm_load_partitions: Access/permission denied\n", 0),
        (True, ["-h", "-o", "%i", "-j", "99999,3928"], [3928], "3928\n", "slurm_load_partitions: "
         "Access/permission denied\n", 0),
        (True, ["-h", "-j", "99999"], [], "", "slurm_load_jobs error: Invalid job id specified\n", 1),
        (False, ["-h", "-o", "%i"], [3928], "3928\n", "", 0),
    ],
    ids=["listed", "one-of-two-missing", "missing", "operator"],
)  # fmt: skip
def test_private_partitions_warn_and_list_as_22_05(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    private: bool,
    argv: list[str],
    ids: list[int],
    out: str,
    err: str,
    rc: int,
) -> None:
    import cli.common

    monkeypatch.setattr(cli.common, "ctld", lambda method, request, kind, **kw: _answer(private, ids))
    assert squeue._run(argv) == rc
    assert capsys.readouterr() == (out, err)


def test_step_long_names_as_22_05() -> None:
    """22.05's squeue -s -O (2026-12-01, scenario 225): step 3948.0 of `sbatch -n2 -t 10 --wrap 'srun
    -t 3 sleep 120'` and its batch step; State and Name are job names: an error each, no column."""
    from cli.stepshow import squeue_value

    steps = [
        jobs_pb2.JobStep(
            job_id=3948,
            step_id=step_id,
            name=name,
            user_id=1001,
            user_name="alice",
            partition="batch",
            nodes="node1",
            num_tasks=tasks,
            num_cpus=2,
            time_limit_min=limit,
            state=jobs_pb2.RUNNING,
        )  # fmt: skip
        for step_id, name, tasks, limit in ((0, "sleep", 2, 3), (-4, "batch", 1, -2))
    ]
    spec = (
        "StepId,StepName:8,StepState,State,TimeLimit:.10,NumTasks:6,NumCpus:6,Name,Nodes:8,UserId:6,"
        "UserName:8,Partition:8,tres-per-step:8,Network"
    )
    fields, unknown = squeue.parse_step_long_format(spec)
    assert unknown == ["State", "Name"]
    lines = [fmt.render(fields, lambda key: squeue.STEP_LONG_HEADERS[key])]
    lines += [fmt.render(fields, squeue_value(step, NOW)) for step in steps]
    assert lines == [
        "STEPID              NAME    STATE               TIME_LIMITTASKS NUM_CPNODELISTUID   USER    PARTITIO"
        "TRES_PERNETWORK             ",
        "3948.0              sleep   RUNNING                   3:002     2     node1   1001  alice   batch   "
        "(null)  (null)              ",
        "3948.batch          batch   RUNNING              UNLIMITED1     0     node1   1001  alice   batch   "
        "(null)  (null)              ",
    ]
