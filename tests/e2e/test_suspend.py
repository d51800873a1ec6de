"""scontrol suspend/resume end to end: real daemons, the job's real cgroup freezer.

What 22.05 does here (measured on the real one): an operator's `scontrol suspend J` turns the job
SUSPENDED (squeue ST S, JobState=SUSPENDED, sacct SUSPENDED) and stops its processes; RunTime stops;
`scontrol resume J` continues them and moves EndTime by the time suspended; a user, even the job's
owner, is refused with "Access/permission denied for job J" (exit 1); scancel ends a suspended job.
With PreemptType=preempt/partition_prio and PreemptMode=SUSPEND,GANG a job of a higher PriorityTier
partition suspends the one holding its CPUs and starts at once; once it ends, the suspended job resumes
(JobState=SUSPENDED Reason=None PreemptTime=None meanwhile; its steps RUNNING in squeue -s and scontrol
show step with TIME stopped, SUSPENDED in sacct).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until
from tests.e2e.test_faults import cgroup_procs, job_cgroups, marked, scontrol_field

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.geteuid() != 0
        or not Path("/sys/fs/cgroup/freezer").is_dir()
        or not Path("/sys/fs/cgroup/memory").is_dir(),
        reason="needs root and the cgroup v1 freezer (shoal up enforces cgroups then)",
    ),
]


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = start_cluster(
        tmp_path_factory.mktemp("suspend"),
        nodes=2,
        accounting=True,
        extra=(  # batch (tier 1, the default) and urgent (tier 10) share the nodes
            "PreemptType=preempt/partition_prio",
            "PreemptMode=SUSPEND,GANG",
            "PartitionName=urgent Nodes=ALL PriorityTier=10 MaxTime=INFINITE",
        ),
    )
    yield cluster
    stop_cluster(cluster)


def counting_job(c: Cluster, tmp_path: Path, token: str) -> tuple[int, Path]:
    """A job (as nobody) printing a counter every 0.2 s into its output file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    tmp_path.chmod(0o777)
    out = tmp_path / "count.out"
    script = "#!/bin/sh\ni=0\nwhile true; do i=$((i+1)); echo $i; sleep 0.2; done\n"
    job = c.submit("-t", "5", "-o", str(out), f"--export=ALL,FAULTS_MARK={token}", input=script, user=NOBODY)
    c.wait_state(job, {"RUNNING"})
    wait_until("the counter", lambda: out.exists() and len(out.read_text().split()) >= 3)
    return job, out


def last(out: Path) -> int:
    lines = out.read_text().split()
    return int(lines[-1]) if lines else 0


def frozen(c: Cluster, node: str, job: int) -> bool:
    states = [
        (d / "freezer.state").read_text().strip() for d in job_cgroups(c, node, job) if "freezer" in d.parts
    ]
    return states == ["FROZEN"]


def sacct_state(c: Cluster, job: int) -> str:
    return c.ok("sacct", "-X", "-n", "-P", "-o", "State", "-j", str(job)).strip()


def sacct_times(c: Cluster, job: int) -> tuple[int, int]:
    """sacct's Elapsed (raw seconds) and Suspended (seconds) of the job."""
    raw, suspended = (
        c.ok("sacct", "-X", "-n", "-P", "-o", "ElapsedRaw,Suspended", "-j", str(job)).strip().split("|")
    )
    h, m, sec = (int(x) for x in suspended.split(":"))
    return int(raw), h * 3600 + m * 60 + sec


def test_a_suspended_job_stops_and_goes_on_after_resume_with_its_end_time_moved(
    c: Cluster, tmp_path: Path
) -> None:
    job, out = counting_job(c, tmp_path, "suspend-counter")
    node = c.job_field(job, "%N")
    end_before = scontrol_field(c, "job", job, "EndTime")
    assert scontrol_field(c, "job", job, "SuspendTime") == "None"

    assert c.run("scontrol", "suspend", str(job)).returncode == 0
    assert (c.job_field(job, "%t"), scontrol_field(c, "job", job, "JobState")) == ("S", "SUSPENDED")
    assert scontrol_field(c, "job", job, "SuspendTime") != "None"
    wait_until("the job's cgroup frozen", lambda: frozen(c, node, job))
    wait_until("sacct SUSPENDED", lambda: sacct_state(c, job) == "SUSPENDED")
    seen, run_time, elapsed = last(out), scontrol_field(c, "job", job, "RunTime"), sacct_times(c, job)[0]
    time.sleep(1.5)  # seven lines' worth: a running job would have printed on
    assert last(out) == seen
    assert scontrol_field(c, "job", job, "RunTime") == run_time
    assert sacct_times(c, job)[0] == elapsed  # Elapsed stops; Suspended grows

    assert c.run("scontrol", "resume", str(job)).returncode == 0
    assert c.state(job) == "RUNNING"
    wait_until("the counter going on", lambda: last(out) > seen)
    assert scontrol_field(c, "job", job, "EndTime") > end_before  # by the time suspended (ISO times sort)
    wait_until("sacct RUNNING", lambda: sacct_state(c, job) == "RUNNING")
    assert sacct_times(c, job)[1] >= 1
    c.ok("scancel", str(job))
    c.wait_state(job, {"CANCELLED"})


def test_a_user_is_refused_even_for_their_own_job(c: Cluster, tmp_path: Path) -> None:
    job, out = counting_job(c, tmp_path, "suspend-user")
    for action in ("suspend", "resume"):
        res = c.run("scontrol", action, str(job), user=NOBODY)
        assert (res.returncode, res.stderr) == (1, f"Access/permission denied for job {job}\n")
    assert c.state(job) == "RUNNING"
    res = c.run("scontrol", "resume", str(job))
    assert (res.returncode, res.stderr) == (1, f"Job is not suspended for job {job}\n")
    c.ok("scancel", str(job))
    c.wait_state(job, {"CANCELLED"})


def test_scancel_of_a_suspended_job_leaves_no_process_or_cgroup(c: Cluster, tmp_path: Path) -> None:
    job, _ = counting_job(c, tmp_path, "suspend-cancel")
    node = c.job_field(job, "%N")
    c.ok("scontrol", "suspend", str(job))
    wait_until("the job's cgroup frozen", lambda: frozen(c, node, job))
    assert cgroup_procs(job_cgroups(c, node, job))
    c.ok("scancel", str(job))
    c.wait_state(job, {"CANCELLED"})
    wait_until("no process of the job", lambda: not marked("suspend-cancel"))
    wait_until("no cgroup of the job", lambda: not job_cgroups(c, node, job))


def test_without_cgroups_the_job_is_stopped_with_signals(tmp_path: Path) -> None:
    bare = start_cluster(tmp_path / "bare", nodes=1, up_args=("--no-cgroups",))
    try:
        job, out = counting_job(bare, tmp_path / "job", "suspend-signals")
        bare.ok("scontrol", "suspend", str(job))
        wait_until("noded stopping it with SIGSTOP", lambda: "SIGSTOP" in bare.log("noded"))
        seen = last(out)
        time.sleep(1.5)
        assert last(out) == seen
        bare.ok("scontrol", "resume", str(job))
        wait_until("the counter going on", lambda: last(out) > seen)
        bare.ok("scontrol", "suspend", str(job))
        bare.ok("scancel", str(job))
        bare.wait_state(job, {"CANCELLED"})
        wait_until("no process of the job", lambda: not marked("suspend-signals"))
    finally:
        stop_cluster(bare)


def step_times(c: Cluster, job: int) -> dict[str, str]:
    """squeue -s: each step of the job and its state -> its TIME (22.05's -o has no state letter for
    steps; -O StepState is its name)."""
    out = c.ok("squeue", "-h", "-s", "-O", "StepId,StepState,TimeUsed")
    rows = [line.split() for line in out.splitlines()]
    return {f"{i} {state}": used for i, state, used in rows if i.startswith(f"{job}.")}


def test_a_higher_tier_job_suspends_the_low_one_which_resumes_and_completes_when_it_ends(
    c: Cluster, tmp_path: Path
) -> None:
    assert "PreemptMode=GANG,SUSPEND" in c.ok("scontrol", "show", "partition", "urgent")  # as 22.05 prints it
    assert "PreemptMode             = GANG,SUSPEND" in c.ok("scontrol", "show", "config")
    out = tmp_path / "count.out"
    # about 6 s of work in a step, stopped in between: it must complete, suspended time not counted
    script = "#!/bin/sh\nsrun sh -c 'i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo $i; sleep 0.2; done'\n"
    low = c.submit("-c", "4", "--mem=100", "-t", "1", "-o", str(out), input=script)
    c.wait_state(low, {"RUNNING"})
    wait_until("the counter", lambda: out.exists() and last(out) >= 3)
    node = c.job_field(low, "%N")
    high = c.submit(
        "-p", "urgent", "-w", node, "-c", "4", "--mem=100", "-o", "/dev/null", "--wrap", "sleep 8"
    )

    c.wait_state(high, {"RUNNING"}, timeout=30)  # on the CPUs the low job lent it
    assert c.state(low) == "SUSPENDED"
    wait_until("the low job's cgroup frozen", lambda: frozen(c, node, low))
    shown = c.ok("scontrol", "show", "job", str(low))
    assert "JobState=SUSPENDED Reason=None" in shown and "PreemptTime=None" in shown
    seen, step_time = last(out), step_times(c, low)
    time.sleep(1.5)
    assert last(out) == seen  # really stopped
    assert step_times(c, low) == step_time  # TIME stops (22.05), STATE stays RUNNING
    assert sorted(step_time) == [f"{low}.0 RUNNING", f"{low}.batch RUNNING"]
    assert "State=RUNNING" in c.ok("scontrol", "show", "step", f"{low}.0")  # as 22.05 shows it
    wait_until(  # the srun step's and the script's (22.05: .batch SUSPENDED too)
        "sacct's step rows SUSPENDED",
        lambda: (
            {f"{low}.0|SUSPENDED", f"{low}.batch|SUSPENDED"}
            <= set(c.ok("sacct", "-n", "-P", "-o", "JobID,State", "-j", str(low)).split())
        ),
    )

    assert c.wait_state(high, {"COMPLETED"}) == "COMPLETED"
    assert c.wait_state(low, {"COMPLETED"}, timeout=40) == "COMPLETED"  # resumed, and ran to its end
    assert out.read_text().split() == [str(i) for i in range(1, 31)]

    def accounted() -> bool:
        return sacct_state(c, low) == "COMPLETED"

    wait_until("sacct COMPLETED", accounted)
    row = c.ok("sacct", "-X", "-n", "-P", "-o", "ElapsedRaw,Suspended,Start,End", "-j", str(low)).strip()
    elapsed, suspended, start, end = row.split("|")
    h, m, sec = (int(x) for x in suspended.split(":"))
    wall = time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S")) - time.mktime(
        time.strptime(start, "%Y-%m-%dT%H:%M:%S")
    )
    assert h * 3600 + m * 60 + sec >= 5  # the preemptor's 8 s, less what the machine's clock rounds
    assert int(elapsed) == wall - (h * 3600 + m * 60 + sec)  # Elapsed leaves the suspension out
    steps = dict(
        row.split("|") for row in c.ok("sacct", "-n", "-P", "-o", "JobID,ElapsedRaw", "-j", str(low)).split()
    )
    assert int(steps[f"{low}.0"]) <= int(elapsed)  # so does the step's (not its wall time)
