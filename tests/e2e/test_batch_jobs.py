"""Batch jobs end to end on a real 2-node cluster: directives, environment, user, states, arrays, deps."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster

pytestmark = pytest.mark.e2e


def test_two_node_job_runs_as_submitting_user_with_slurm_env(cluster: Cluster, workdir: Path) -> None:
    script = workdir / "envjob.sh"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH -N2 --ntasks-per-node=2\n"
        "#SBATCH -J envjob\n"
        "#SBATCH -o envjob-%j.out\n"
        "id -u\n"
        "pwd\n"
        "env | grep -E '^SLURM' | sort\n"
        "touch started; while [ ! -e release ]; do sleep 0.1; done\n"
    )
    script.chmod(0o755)
    job = cluster.submit(str(script), user=NOBODY, cwd=workdir)
    cluster.wait_state(job, {"RUNNING"})
    deadline = time.monotonic() + 30
    while not (workdir / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.1)

    # visible while it runs
    row = cluster.ok("squeue", "-h", "-j", str(job), "-o", "%i %j %u %T %D %N")
    assert row.split() == [str(job), "envjob", "nobody", "RUNNING", "2", "node[1-2]"]
    show = cluster.ok("scontrol", "show", "job", str(job))
    assert f"JobId={job} JobName=envjob" in show
    assert "JobState=RUNNING" in show and "NumNodes=2" in show and "NumTasks=4" in show
    assert "UserId=nobody(65534)" in show
    sinfo = cluster.ok("sinfo", "-h", "-N", "-o", "%N %t")
    states = dict(line.split() for line in sinfo.splitlines())
    assert states["node1"] in ("mix", "alloc") and states["node2"] in ("mix", "alloc")

    (workdir / "release").touch()
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    out = (workdir / f"envjob-{job}.out").read_text().splitlines()
    assert out[0] == str(NOBODY)
    assert out[1] == str(workdir)
    env = dict(line.split("=", 1) for line in out[2:] if "=" in line)
    assert env["SLURM_JOB_ID"] == str(job)
    assert env["SLURM_JOB_NAME"] == "envjob"
    assert env["SLURM_JOB_NODELIST"] == "node[1-2]"
    assert env["SLURM_JOB_NUM_NODES"] == "2"
    assert env["SLURM_NTASKS"] == "4"
    assert env["SLURM_TASKS_PER_NODE"] == "2(x2)"
    assert env["SLURM_JOB_USER"] == "nobody"
    assert env["SLURM_JOB_UID"] == str(NOBODY)
    assert env["SLURM_SUBMIT_DIR"] == str(workdir)
    assert env["SLURMD_NODENAME"] == "node1"
    assert env["SLURM_JOB_PARTITION"] == "batch"
    assert (workdir / f"envjob-{job}.out").stat().st_uid == NOBODY


def test_scancel_ends_running_job_cancelled(cluster: Cluster, workdir: Path) -> None:
    job = cluster.submit("--wrap", "sleep 300", "-o", str(workdir / "c-%j.out"))
    cluster.wait_state(job, {"RUNNING"})
    cluster.ok("scancel", str(job))
    assert cluster.wait_state(job, {"CANCELLED"}) == "CANCELLED"
    assert cluster.job_field(job, "%t") == "CA"


def test_array_throttle_never_exceeds_limit(cluster: Cluster, workdir: Path) -> None:
    script = workdir / "arr.sh"
    script.write_text(
        "#!/bin/bash\n"
        'echo "start $(date +%s.%N)" > times-$SLURM_ARRAY_TASK_ID\n'
        "sleep 0.7\n"
        'echo "end $(date +%s.%N)" >> times-$SLURM_ARRAY_TASK_ID\n'
    )
    first = cluster.submit("--array=0-9%2", "-o", "/dev/null", str(script), cwd=workdir)
    squeue = cluster.ok("squeue", "-h", "-j", str(first), "-o", "%i")
    assert f"{first}_" in squeue
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        states = cluster.ok("squeue", "-h", "-t", "all", "-r", "-j", str(first), "-o", "%T").split()
        running = states.count("RUNNING")
        assert running <= 2, states
        if len(states) == 10 and all(s == "COMPLETED" for s in states):
            break
        time.sleep(0.1)
    else:
        pytest.fail("array did not finish")
    spans = []
    for task in range(10):
        lines = (workdir / f"times-{task}").read_text().split()
        spans.append((float(lines[1]), float(lines[3])))
    for t0, _ in spans:
        overlapping = sum(1 for s, e in spans if s <= t0 < e)
        assert overlapping <= 2


def test_afterok_chain_runs_in_order(cluster: Cluster, workdir: Path) -> None:
    log = workdir / "order.log"
    release = workdir / "release"
    # a runs until the test releases it (a fixed sleep let a slow sbatch of c come after b ended)
    a = cluster.submit(
        "--wrap", f"while [ ! -e {release} ]; do sleep 0.1; done; echo a >> {log}", "-o", "/dev/null"
    )
    b = cluster.submit(f"--dependency=afterok:{a}", "--wrap", f"echo b >> {log}", "-o", "/dev/null")
    c = cluster.submit(f"--dependency=afterok:{b}", "--wrap", f"echo c >> {log}", "-o", "/dev/null")
    # the reason shows from submission on, as Slurm's, not only after a scheduling cycle
    assert cluster.job_field(c, "%T %r") == "PENDING Dependency"
    assert cluster.job_field(b, "%T %r") == "PENDING Dependency"
    release.touch()
    cluster.wait_state(c, {"COMPLETED"})
    assert log.read_text().split() == ["a", "b", "c"]


def test_failed_dependency_is_never_satisfied(cluster: Cluster) -> None:
    a = cluster.submit("--wrap", "exit 3", "-o", "/dev/null")
    b = cluster.submit(f"--dependency=afterok:{a}", "--wrap", "true", "-o", "/dev/null")
    assert cluster.wait_state(a, {"FAILED"}) == "FAILED"
    assert cluster.job_field(a, "%T") == "FAILED"
    deadline = time.monotonic() + 20
    while cluster.job_field(b, "%r") != "DependencyNeverSatisfied":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    cluster.ok("scancel", str(b))


def test_two_full_cluster_jobs_run_one_after_the_other(cluster: Cluster, workdir: Path) -> None:
    script = workdir / "gang.sh"
    script.write_text('#!/bin/bash\necho "start $(date +%s.%N)"\nsleep 1\necho "end $(date +%s.%N)"\n')
    j1 = cluster.submit("-N2", "--exclusive", "-o", "gang-%j.out", str(script), cwd=workdir)
    j2 = cluster.submit("-N2", "--exclusive", "-o", "gang-%j.out", str(script), cwd=workdir)
    # never half-allocated: the second job pends whole, holding no node
    for _ in range(10):
        rows = cluster.ok("squeue", "-h", "-j", f"{j1},{j2}", "-o", "%i %T %D %N").splitlines()
        for row in rows:
            fields = row.split()
            if fields[1] == "PENDING":
                assert len(fields) == 3 or fields[3] == ""
        time.sleep(0.1)
    cluster.wait_state(j2, {"COMPLETED"})
    assert cluster.state(j1) == "COMPLETED"
    t1 = (workdir / f"gang-{j1}.out").read_text().split()
    t2 = (workdir / f"gang-{j2}.out").read_text().split()
    assert float(t1[3]) <= float(t2[1])


def test_exit_code_and_failed_state(cluster: Cluster) -> None:
    job = cluster.submit("--wrap", "exit 7", "-o", "/dev/null")
    assert cluster.wait_state(job, {"FAILED", "COMPLETED"}) == "FAILED"
    show = cluster.ok("scontrol", "show", "job", str(job))
    assert "ExitCode=7:0" in show
    # a finished job leaves the default listing but stays in -t all until MinJobAge
    assert str(job) not in cluster.ok("squeue", "-h", "-o", "%i").split()
    assert f"{job} FAILED" in cluster.ok("squeue", "-h", "-t", "all", "-o", "%i %T").splitlines()


def test_hold_release_and_update(cluster: Cluster) -> None:
    job = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null", "-J", "held")
    assert cluster.job_field(job, "%r") == "JobHeldUser"
    cluster.ok("scontrol", "update", f"JobId={job}", "TimeLimit=5", "Name=renamed")
    assert cluster.job_field(job, "%j %l") == "renamed 5:00"
    cluster.ok("scontrol", "release", str(job))
    assert cluster.wait_state(job, {"COMPLETED"}) == "COMPLETED"


def test_nobody_cannot_cancel_roots_job(cluster: Cluster) -> None:
    job = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null")
    out = cluster.run("scancel", str(job), user=NOBODY)
    assert out.returncode == 210  # 22.05 exits with the errno of a permission error (compat scenario 109)
    assert "Access/permission denied" in out.stderr
    assert cluster.state(job) == "PENDING"
    cluster.ok("scancel", str(job))
    assert cluster.state(job) == "CANCELLED"


def test_requeue_runs_the_job_again(cluster: Cluster, workdir: Path) -> None:
    count = workdir / "runs"
    job = cluster.submit("--wrap", f"echo run >> {count}; sleep 300", "-o", "/dev/null")
    cluster.wait_state(job, {"RUNNING"})
    deadline = time.monotonic() + 20
    while not count.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    cluster.ok("scontrol", "requeue", str(job))
    deadline = time.monotonic() + 60
    while (not count.exists() or len(count.read_text().split()) < 2) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert count.read_text().split() == ["run", "run"]
    assert "Restarts=1" in cluster.ok("scontrol", "show", "job", str(job))
    cluster.ok("scancel", str(job))
    assert cluster.wait_state(job, {"CANCELLED"}) == "CANCELLED"


def test_scancel_batch_signal_reaches_the_running_script(cluster: Cluster, workdir: Path) -> None:
    got = workdir / "got"
    job = cluster.submit(
        "-o",
        "/dev/null",
        "--wrap",
        f"trap 'echo USR1 > {got}; exit 0' USR1; touch {workdir}/up; sleep 300 & wait",
    )
    cluster.wait_state(job, {"RUNNING"})
    deadline = time.monotonic() + 20
    while not (workdir / "up").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    cluster.ok("scancel", "-b", "-s", "USR1", str(job))  # without -b: the steps only, as in Slurm
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert got.read_text().strip() == "USR1"
