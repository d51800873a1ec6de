"""srun, salloc and job steps against a real 2-node cluster (4 CPUs each)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.compat.layouts import LAYOUTS, read
from tests.e2e.conftest import Cluster

pytestmark = pytest.mark.e2e

ENV_CMD = 'echo "$SLURMD_NODENAME $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_GTIDS"'


def lines(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line)


def test_labelled_lines_from_two_nodes(cluster: Cluster) -> None:
    out = cluster.ok("srun", "-N2", "-n4", "-l", "bash", "-c", "echo $SLURMD_NODENAME")
    real = read(LAYOUTS / "srun_N2_n4.txt").steps[0].tasks  # 22.05: 3+1 on 16-CPU nodes
    assert lines(out) == [f"{task}: {env['SLURMD_NODENAME']}" for task, env in sorted(real.items())]


@pytest.mark.parametrize(
    ("dist", "want"),
    [
        ("block", ["node1 0 0 0 0,1", "node1 1 1 0 0,1", "node2 2 0 1 2,3", "node2 3 1 1 2,3"]),
        ("cyclic", ["node1 0 0 0 0,2", "node1 2 1 0 0,2", "node2 1 0 1 1,3", "node2 3 1 1 1,3"]),
    ],
    ids=["block", "cyclic"],
)
def test_task_environment_follows_slurm(cluster: Cluster, dist: str, want: list[str]) -> None:
    out = cluster.ok("srun", "-N2", "-n4", "--ntasks-per-node=2", "-m", dist, "bash", "-c", ENV_CMD)
    assert lines(out) == want


def test_step_and_torch_variables(cluster: Cluster) -> None:
    out = cluster.ok(
        "srun",
        "-N2",
        "-n4",
        "-l",
        "bash",
        "-c",
        "echo $SLURM_STEP_ID $SLURM_STEP_NUM_TASKS $SLURM_STEP_TASKS_PER_NODE "
        "$WORLD_SIZE $RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $NODE_RANK $MASTER_PORT",
    )
    rows = dict(line.split(": ", 1) for line in out.splitlines())
    real = read(LAYOUTS / "srun_N2_n4.txt").steps[0].tasks[3]  # 22.05 runs task 3 alone on node2
    assert rows["3"].split()[1:8] == [
        "4",
        real["SLURM_STEP_TASKS_PER_NODE"],
        "4",
        "3",
        real["SLURM_LOCALID"],
        str(len(real["SLURM_GTIDS"].split(","))),
        real["SLURM_NODEID"],
    ]
    # the user's own values win
    out = cluster.ok("srun", "-n1", "bash", "-c", "echo $MASTER_ADDR $RANK", env={"MASTER_ADDR": "h0"})
    assert out.strip() == "h0 0"


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (("-n1", "bash", "-c", "exit 7"), 7, "srun: error: node1: task 0: Exited with exit code 7"),
        (("-n1", "bash", "-c", "kill -9 $$"), 137, "srun: error: node1: task 0: Killed"),
        (("-n1", "no-such-command-xyz"), 2, "srun: error: node1: task 0: Exited with exit code 2"),
        (
            ("-N2", "-n2", "bash", "-c", "exit $((SLURM_PROCID + 3))"),
            4,
            "srun: error: node2: task 1: Exited with exit code 4",
        ),
    ],
    ids=["exit-code", "signal", "no-such-command", "highest-wins"],
)
def test_exit_status_and_messages(cluster: Cluster, argv: tuple[str, ...], code: int, message: str) -> None:
    out = cluster.run("srun", *argv)
    assert out.returncode == code
    assert message in out.stderr.splitlines()
    if "no-such-command-xyz" in argv:
        assert "execve(): no-such-command-xyz: No such file or directory" in out.stderr


@pytest.mark.parametrize(
    ("sig", "what", "forced"),
    [("KILL", "Killed", True), ("TERM", "Terminated", True), ("USR1", "User defined signal 1", False)],
)
def test_a_task_killed_by_a_signal_force_terminates_the_step(
    cluster: Cluster, sig: str, what: str, forced: bool
) -> None:
    # 22.05 (scenario 125 and the running one): SIGKILL and SIGTERM add the step's Force Terminated line
    out = cluster.run("srun", "-n1", "bash", "-c", f"kill -{sig} $$")
    tail = r"srun: Force Terminated StepId=\d+\.0\n" if forced else ""
    assert out.returncode == 128 + getattr(signal, f"SIG{sig}")
    assert re.fullmatch(f"srun: error: node1: task 0: {what}\n{tail}", out.stderr), out.stderr


def test_kill_on_bad_exit_ends_the_other_tasks(cluster: Cluster) -> None:
    out = cluster.run(
        "srun",
        "-N2",
        "-n2",
        "-K",
        "bash",
        "-c",
        "if [ $SLURM_PROCID = 1 ]; then exit 3; fi; sleep 60; echo survived",
        timeout=40,
    )
    assert "survived" not in out.stdout
    assert "srun: error: node2: task 1: Exited with exit code 3" in out.stderr
    assert "srun: Terminating StepId=" in out.stderr
    assert out.returncode != 0


def test_stdin_goes_to_task_zero_and_output_files(cluster: Cluster, workdir: Path) -> None:
    out = cluster.run("srun", "-n2", "-l", "cat", input="hello\n")
    assert out.stdout == "0: hello\n"
    cluster.ok(
        "srun",
        "-N2",
        "-n2",
        "--output",
        str(workdir / "o-%j-%t.txt"),
        "--error",
        "none",
        "bash",
        "-c",
        "echo out$SLURM_PROCID; echo err >&2",
    )
    got = sorted(p.read_text() for p in workdir.glob("o-*-*.txt"))
    assert got == ["out0\n", "out1\n"]


def test_export_with_literal_quotes(cluster: Cluster) -> None:
    out = cluster.ok("srun", "-n1", '--export=ALL,DS_X="a b"', "bash", "-c", "echo [$DS_X]")
    assert out.strip() == "[a b]"


def test_step_larger_than_its_allocation_is_refused(cluster: Cluster, workdir: Path) -> None:
    script = workdir / "job.sh"
    script.write_text("#!/bin/bash\nsrun -n 99 true\necho rc=$?\nsrun -n1 echo still-usable\n")
    job = cluster.submit("-N1", "-n1", "-o", str(workdir / "job.out"), str(script))
    cluster.wait_state(job, {"COMPLETED", "FAILED"})
    text = (workdir / "job.out").read_text()
    assert (
        f"srun: error: Unable to create step for job {job}: More processors requested than permitted" in text
    )
    assert "rc=1" in text and "still-usable" in text


def test_step_memory_is_held_out_of_the_jobs(cluster: Cluster, workdir: Path) -> None:
    """Slurm 22.05 in `sbatch -n2 --mem=100M`: a step asking more than the job has is refused; one
    asking more than other steps leave waits; srun takes the job's SLURM_MEM_PER_NODE as its --mem."""
    script = workdir / "mem.sh"
    script.write_text(
        "#!/bin/bash\n"
        + "\n".join(
            [
                "srun -n1 --mem=200M true",
                "echo rc=$?",
                "srun -n1 --exact --mem=60M sleep 3 &",
                "sleep 1",
                "srun -n1 --exact --mem=40M echo fits-beside",
                "srun -n1 --exact --mem=60M echo after-wait",
                "wait",
                "srun -n1 --exact sleep 3 &",
                "sleep 1",  # holds the job's 100M through SLURM_MEM_PER_NODE
                "srun -n1 --exact --mem=10M echo after-the-whole-job-step",
                "wait",
            ]
        )
        + "\n"
    )
    job = cluster.submit("-N1", "-n2", "--mem=100M", "-o", str(workdir / "mem.out"), str(script))
    cluster.wait_state(job, {"COMPLETED", "FAILED"})
    out = (workdir / "mem.out").read_text().splitlines()
    assert out[:2] == [
        f"srun: error: Unable to create step for job {job}: Memory required by task is not available",
        "rc=1",
    ]
    busy = f"srun: Job {job} step creation temporarily disabled, retrying (Requested nodes are busy)"
    created = f"srun: Step created for job {job}"  # printed as the tasks start: either side of their output
    assert [line for line in out[2:] if line != created] == [
        "fits-beside",
        busy,
        "after-wait",
        busy,
        "after-the-whole-job-step",
    ]
    assert out.count(created) == 2


def test_srun_inside_a_batch_job_uses_the_job_shape(cluster: Cluster, workdir: Path) -> None:
    job = cluster.submit(
        "-N2",
        "--ntasks-per-node=2",
        "-o",
        str(workdir / "b.out"),
        "--wrap",
        "srun -l bash -c 'echo $SLURMD_NODENAME'",
    )
    cluster.wait_state(job, {"COMPLETED"})
    assert lines((workdir / "b.out").read_text()) == ["0: node1", "1: node1", "2: node2", "3: node2"]
    # 22.05 forgets a step once it ends, within MinJobAge too (compat scenario 218)
    gone = cluster.run("scontrol", "show", "step", f"{job}.0")
    assert (gone.returncode, gone.stdout) == (1, f"Job step {job}.0 not found\n")


def test_srun_c_in_an_exclusive_job_fills_its_cpus(cluster: Cluster, workdir: Path) -> None:
    """22.05 inside `sbatch -N1 --exclusive` (16 CPUs there; here 4): SLURM_TASKS_PER_NODE is the node's
    CPUs, `srun -c2` without -n runs CPUs/2 tasks, a plain srun one."""
    job = cluster.submit(
        "-N1",
        "--exclusive",
        "-o",
        str(workdir / "x.out"),
        "--wrap",
        "echo tpn=$SLURM_TASKS_PER_NODE; srun -c2 -l bash -c 'echo $SLURMD_NODENAME' | sort; srun hostname | wc -l",
    )
    cluster.wait_state(job, {"COMPLETED"})
    node = cluster.job_field(job, "%N")
    assert (workdir / "x.out").read_text().splitlines() == ["tpn=4", f"0: {node}", f"1: {node}", "1"]


def test_step_cpus_whole_unless_exact(cluster: Cluster, workdir: Path) -> None:
    """Slurm 22.05 inside `sbatch -N2 -n4 -c2` (here 4 CPUs on each node): a step gets all the job's
    CPUs on its nodes unless --exact (or -c); the job's -c is not inherited by srun; a whole-node
    step waits while an --exact one holds part of the node."""
    # scontrol from inside the step: 22.05 shows running steps only
    show = (
        "srun -n2 -l {} bash -c 'echo $SLURM_CPUS_ON_NODE; if [ $SLURM_PROCID = 0 ]; then"
        " scontrol show step $SLURM_JOB_ID.$SLURM_STEP_ID | grep -o CPUs=[0-9]*; fi' | sort"
    )
    script = workdir / "cpus.sh"
    script.write_text(
        "#!/bin/bash\n"
        + "\n".join(
            [
                show.format(""),
                show.format("--exact"),
                show.format("-c1"),
                "srun -n1 --exact sleep 3 &",
                "sleep 1",
                "srun -N1 -n1 -w node1 bash -c 'echo whole-after-exact $SLURM_CPUS_ON_NODE' 2>&1",
                "wait",
            ]
        )
        + "\n"
    )
    job = cluster.submit("-N2", "-n4", "-c2", "-o", str(workdir / "cpus.out"), str(script))
    cluster.wait_state(job, {"COMPLETED", "FAILED"})
    out = (workdir / "cpus.out").read_text().splitlines()
    assert out[:9] == ["0: 4", "0: CPUs=8", "1: 4", "0: 1", "0: CPUs=2", "1: 1", "0: 1", "0: CPUs=2", "1: 1"]
    assert f"srun: Job {job} step creation temporarily disabled, retrying (Requested nodes are busy)" in out
    assert "whole-after-exact 4" in out


def _srun_process(cluster: Cluster, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.srun", *argv],
        env=cluster.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_running_step(cluster: Cluster, name: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in cluster.ok("squeue", "-s", "-h", "-o", "%i %j").splitlines():
            step, step_name = line.split()
            if step_name == name:
                return step
        time.sleep(0.2)
    raise AssertionError(f"no running step named {name}")


def test_two_ctrl_c_cancel_the_step(cluster: Cluster) -> None:
    proc = _srun_process(cluster, "-N2", "-n2", "-J", "sleepy", "sleep", "60")
    step = _wait_running_step(cluster, "sleepy")
    job = step.split(".")[0]
    for argv in (("-j", job), (step,)):  # 22.05: the named job's steps, the named step
        assert cluster.ok("squeue", "-h", "-o", "%i", "-s", *argv).split() == [step]
    assert cluster.ok("squeue", "-h", "-s", "-j", str(int(job) + 1000)) == ""
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # srun answers the first Ctrl-C before we send the second
    assert first.strip() == "srun: interrupt (one more within 1 sec to abort)"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert f"srun: sending Ctrl-C to StepId={step}" in err
    assert proc.returncode != 0
    # 22.05 forgets a step once it ends (compat scenario 218): scontrol no longer shows it
    assert cluster.run("scontrol", "show", "step", step).stdout == f"Job step {step} not found\n"


def test_scancel_kills_every_step(cluster: Cluster) -> None:
    proc = _srun_process(cluster, "-N2", "-n2", "-J", "victim", "sleep", "60")
    step = _wait_running_step(cluster, "victim")
    cluster.ok("scancel", step.split(".")[0])
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "Force Terminated" not in err  # 22.05: a cancelled step is not force-terminated by srun
    assert cluster.state(step.split(".")[0]) == "CANCELLED"


@pytest.mark.parametrize("prog", ["srun", "salloc"])
def test_more_nodes_than_the_partition_pends_as_slurm(cluster: Cluster, prog: str) -> None:
    """Slurm 22.05 (EnforcePartLimits=NO) queues `srun -N 99` on a smaller partition with a note."""
    proc = subprocess.Popen(
        [sys.executable, "-m", f"cli.{prog}", "-N", "99", "true"],
        env=cluster.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline().strip()
    assert first == f"{prog}: Requested partition configuration not available now"
    queued = proc.stderr.readline().strip()
    if prog == "salloc":
        queued = proc.stderr.readline().strip()
    job = queued.split()[2]
    assert queued == f"{prog}: job {job} queued and waiting for resources"
    deadline = time.monotonic() + 10
    while cluster.job_field(job, "%r") != "PartitionNodeLimit" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cluster.job_field(job, "%r") == "PartitionNodeLimit"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert cluster.state(job) == "CANCELLED"


def test_salloc_runs_the_command_in_its_allocation(cluster: Cluster) -> None:
    out = cluster.run("salloc", "-N2", "bash", "-c", "srun -l bash -c 'echo $SLURM_JOB_ID'; exit 5")
    assert out.returncode == 5
    granted = [w for w in out.stderr.split() if w.isdigit()]
    assert f"salloc: Granted job allocation {granted[0]}" in out.stderr
    assert lines(out.stdout) == [f"0: {granted[0]}", f"1: {granted[0]}"]
    assert f"salloc: Relinquishing job allocation {granted[0]}" in out.stderr
    assert cluster.state(granted[0]) == "FAILED"


def test_immediate_gives_up_when_the_nodes_are_busy(cluster: Cluster) -> None:
    """As the real 22.05 does: no queueing line for a bare -I, the queueing line for -I<secs>,
    salloc also says the allocation is revoked; the job does not stay queued."""
    busy = cluster.submit("-N2", "--exclusive", "--wrap", "sleep 120")
    cluster.wait_state(busy, {"RUNNING"})
    now = cluster.run("srun", "--immediate", "-N1", "true")
    assert (now.returncode, now.stderr) == (
        1,
        "srun: error: Unable to allocate resources: Requested nodes are busy\n",
    )
    alloc = cluster.run("salloc", "-I", "-N1", "true")
    assert alloc.returncode == 1
    job = alloc.stderr.split()[-4]
    assert alloc.stderr == (
        "salloc: error: Unable to allocate resources: Requested nodes are busy\n"
        f"salloc: Job allocation {job} has been revoked.\n"
    )
    waited = cluster.run("srun", "-I2", "-N1", "true")
    job = waited.stderr.split()[2]
    assert waited.stderr == (
        f"srun: job {job} queued and waiting for resources\n"
        "srun: error: Unable to allocate resources: Requested nodes are busy\n"
    )
    assert cluster.state(job) == "CANCELLED"
    cluster.ok("scancel", str(busy))
    assert cluster.ok("srun", "--immediate=20", "-N1", "echo", "free").strip() == "free"


def test_an_aborted_step_that_does_not_end_is_waited_for_killwait_plus_two_seconds(cluster: Cluster) -> None:
    """Two Ctrl-C abort the step; if its node never confirms (here its supervisor is stopped) srun
    gives up after the time it announced (KillWait=2 in these clusters: 4 s), as Slurm does."""
    proc = _srun_process(cluster, "-N1", "-n1", "-J", "frozen", "sleep", "300")
    step = _wait_running_step(cluster, "frozen")
    job_id, step_id = step.split(".")
    pid_files = list((cluster.dir / "spool").glob(f"*/step{job_id}.{step_id}/stepd.pid"))
    assert len(pid_files) == 1
    supervisor = int(pid_files[0].read_text().split()[0])
    os.kill(supervisor, signal.SIGSTOP)
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        os.kill(supervisor, signal.SIGCONT)
    assert "srun: Job step aborted: Waiting up to 4 seconds for job step to finish." in err
    assert "srun: error: Timed out waiting for job step to complete" in err
    assert proc.returncode != 0


def _bind_below_ephemeral(sock: socket.socket, start: int) -> int:
    """Bind `sock` to the first port from `start` whose next one is free too (below the kernel's
    ephemeral range, 32768 on, so no outgoing connection of another test takes it meanwhile)."""
    for low in range(start, start + 200, 2):
        try:
            with socket.socket() as probe:
                probe.bind(("0.0.0.0", low + 1))
            sock.bind(("0.0.0.0", low))
            return low
        except OSError:
            continue
    raise AssertionError(f"no two free ports from {start}")


def test_srun_listens_for_step_io_only_inside_srun_port_range(cluster: Cluster, tmp_path: Path) -> None:
    """SrunPortRange in srun's slurm.conf: the tasks connect back to a port of that range (what a
    firewall opens); with every port of it taken srun refuses, saying so, instead of using another."""
    with socket.socket() as taken:
        low = _bind_below_ephemeral(taken, 20000 + 10 * int(os.environ.get("SHOAL_TEST_NET", "10")) % 10000)
        taken.listen()
        conf = tmp_path / "slurm.conf"
        conf.write_text(cluster.conf.read_text() + f"SrunPortRange={low}-{low + 1}\n")
        env = {"SLURM_CONF": str(conf)}
        assert cluster.ok("srun", "-N1", "hostname", env=env).strip()  # on low + 1, the free one
        with socket.socket() as also:
            also.bind(("0.0.0.0", low + 1))
            also.listen()
            out = cluster.run("srun", "-N1", "hostname", env=env)
    assert out.returncode == 1
    assert (
        out.stderr.strip() == f"srun: error: no free port in SrunPortRange={low}-{low + 1} for the step's I/O"
    )
    bad = tmp_path / "bad.conf"
    bad.write_text(cluster.conf.read_text() + "SrunPortRange=60000\n")
    out = cluster.run("srun", "-N1", "hostname", env={"SLURM_CONF": str(bad)})
    assert (
        out.returncode == 1 and "invalid SrunPortRange=60000" in out.stderr and "Traceback" not in out.stderr
    )


def _processes_running(argv: list[str]) -> list[int]:
    """Pids of processes whose command line is exactly `argv`."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_text() == wanted:
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_step_is_ended_at_its_own_time_limit_and_its_job_goes_on(cluster: Cluster, workdir: Path) -> None:
    """22.05 (measured): `srun -t 1` in a `-t 5` job shows TimeLimit=00:01:00 (squeue -s %l 1:00); at
    the limit its tasks get SIGTERM, srun says `*** STEP J.0 ON node CANCELLED AT ... DUE TO TIME
    LIMIT ***` and exits 143 like any terminated step; the script goes on and the job completes.
    A batch job at its own limit (`sbatch -t 1`, run beside it: one minute's wait for both) is told so by
    `slurmstepd-NODE: error: *** JOB J ON NODE CANCELLED AT ... DUE TO TIME LIMIT ***` and is TIMEOUT."""
    batch_out = workdir / "batch-limit.out"
    batch = cluster.submit("-t", "1", "-o", str(batch_out), "--wrap", "sleep 300")
    script = workdir / "limited.sh"
    script.write_text("#!/bin/bash\nsrun -n1 -t 1 sleep 317\necho rc=$?\nsrun -n1 echo after\n")
    job = cluster.submit("-n1", "-t", "5", "-o", str(workdir / "limited.out"), str(script))
    step = _wait_running_step(cluster, "sleep")
    assert step == f"{job}.0"
    assert cluster.ok("squeue", "-h", "-s", "-j", str(job), "-o", "%i %l").split("\n")[:2] == [
        f"{job}.0 1:00",
        f"{job}.batch UNLIMITED",
    ]
    assert "TimeLimit=00:01:00" in cluster.ok("scontrol", "show", "step", step)
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}, timeout=150) == "COMPLETED"
    out = (workdir / "limited.out").read_text().splitlines()
    node = cluster.job_field(job, "%N").strip()
    assert re.fullmatch(
        rf"slurmstepd-{node}: error: \*\*\* STEP {job}\.0 ON {node} CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*",
        out[0],
    ), out
    assert out[1:] == [
        f"srun: error: {node}: task 0: Terminated",
        f"srun: Force Terminated StepId={job}.0",
        "rc=143",
        "after",
    ]
    assert _processes_running(["sleep", "317"]) == []
    assert (
        cluster.wait_state(batch, {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"}, timeout=150) == "TIMEOUT"
    )
    batch_node = cluster.job_field(batch, "%N").strip()
    first = batch_out.read_text().splitlines()[0]
    assert re.fullmatch(
        rf"slurmstepd-{batch_node}: error: \*\*\* JOB {batch} ON {batch_node} CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*",
        first,
    ), first
