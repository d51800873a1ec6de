"""Nothing outlives its job, and node failures as in Slurm 22.05: faults injected for real.

kill -9 of a job's stepd, a CompleteBatch crafted as SlurmUser, a noded frozen (SIGSTOP) past
SlurmdTimeout, every process of a node killed (a crash). Each test checks what is left afterwards:
the job's processes (by a marker in their environment, through /proc), its cgroup directories, its
output, and the records users and admins read (squeue, scontrol, sinfo, sacct).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.auth.key import load_key
from shoal.conf import load_slurm_conf
from shoal.rpc.client import Stub
from shoal.v1 import controller_pb2
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

CGROUP_ROOT = Path("/sys/fs/cgroup")
needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or not (CGROUP_ROOT / "memory").is_dir(),
    reason="needs root and cgroup v1 controllers (shoal up enforces cgroups then)",
)


# -- what is left of a job -------------------------------------------------------------------------


def marked(token: str, node: str | None = None, restarts: int | None = None, also: str = "") -> list[int]:
    """Live processes whose environment carries FAULTS_MARK=token (and that node / run / variable)."""
    want = f"FAULTS_MARK={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if want not in env or stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X"):
            continue
        if node is not None and f"SLURMD_NODENAME={node}".encode() not in env:
            continue
        if also and also.encode() not in env:
            continue
        if restarts is not None:
            count = next((v.split(b"=", 1)[1] for v in env if v.startswith(b"SLURM_RESTART_COUNT=")), b"0")
            if int(count) != restarts:
                continue
        found.append(int(entry.name))
    return found


def job_cgroups(cluster: Cluster, node: str, job_id: int) -> list[Path]:
    """The job's cgroup directories on `node` (one per v1 controller) that exist."""
    scope = f"{zlib.crc32(os.path.abspath(cluster.conf).encode()):08x}_"
    return sorted(CGROUP_ROOT.glob(f"*/shoal/{scope}{node}/job_{job_id}"))


def cgroup_procs(dirs: list[Path]) -> set[int]:
    pids: set[int] = set()
    for top in dirs:
        for procs in top.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except (OSError, ValueError):
                pass
    return pids


def spool_file(cluster: Cluster, node: str, job_id: int, name: str) -> Path:
    return cluster.dir / "spool" / node / f"job{job_id}" / name


def pid_in(path: Path) -> int:
    return int(path.read_text().split()[0])


def scontrol_field(cluster: Cluster, what: str, name: str | int, key: str) -> str:
    for word in cluster.ok("scontrol", "show", what, str(name)).split():
        if word.startswith(f"{key}="):
            return word.split("=", 1)[1]
    raise AssertionError(f"no {key}= in scontrol show {what} {name}")


def sinfo_state(cluster: Cluster, node: str) -> str:
    """The node's state as sinfo prints it (one row per partition, the same in each)."""
    return "|".join(sorted(set(cluster.ok("sinfo", "-h", "-N", "-n", node, "-o", "%T").split())))


def start_noded(cluster: Cluster, *nodes: str) -> subprocess.Popen[bytes]:
    log = open(cluster.dir / "log" / "noded.faults.out", "ab")  # noqa: SIM115 - the daemon keeps it
    args = [a for n in nodes for a in ("-N", n)]
    return subprocess.Popen(
        [sys.executable, "-m", "noded.main", "-f", str(cluster.conf), "--no-agent", *args],
        env=cluster.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_gone(what: str, check: object, timeout: float = 60) -> None:
    wait_until(what, lambda: not check(), timeout)  # type: ignore[operator]


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[Cluster]:
    c = start_cluster(tmp_path / "c", nodes=1)
    yield c
    stop_cluster(c)


def _lingering_job(cluster: Cluster, token: str, late: Path, *opts: str) -> int:
    """A job whose script leaves a child behind that writes `late` some seconds on, then waits."""
    script = f"#!/bin/sh\n(sleep 6; echo late >> {late}) &\nsleep 300\n"
    job = cluster.submit("-o", "/dev/null", f"--export=ALL,FAULTS_MARK={token}", *opts, input=script)
    cluster.wait_state(job, {"RUNNING"})
    wait_until("the job's processes", lambda: len(marked(token)) >= 3)  # script, subshell, sleeps
    return job


# -- the tests -------------------------------------------------------------------------------------


@needs_cgroups
def test_kill_9_of_stepd_kills_the_jobs_processes_and_removes_its_cgroup(
    one_node: Cluster, tmp_path: Path
) -> None:
    c, token, late = one_node, uuid.uuid4().hex, tmp_path / "late"
    job = _lingering_job(c, token, late)
    dirs = job_cgroups(c, "node1", job)
    assert dirs, "the running job has no cgroup"
    assert set(marked(token)) <= cgroup_procs(dirs)
    os.kill(pid_in(spool_file(c, "node1", job, "stepd.pid")), signal.SIGKILL)
    assert c.wait_state(job, {"FAILED", "COMPLETED", "NODE_FAIL"}) == "FAILED"
    assert scontrol_field(c, "job", job, "ExitCode") == "0:9"
    # The record says the job ended: by then nothing of it runs (noded kills, then reports).
    assert marked(token) == []
    assert job_cgroups(c, "node1", job) == []
    time.sleep(7)  # past the moment the lingering child would have written
    assert not late.exists()
    # Its CPUs are free for the next job, which the node really runs.
    nxt = c.submit("-c", "4", "-o", "/dev/null", "--wrap", "true")
    assert c.wait_state(nxt, {"COMPLETED", "FAILED"}) == "COMPLETED"


@needs_cgroups
def test_complete_batch_crafted_as_slurm_user_ends_the_jobs_processes(
    one_node: Cluster, tmp_path: Path
) -> None:
    c, token, late = one_node, uuid.uuid4().hex, tmp_path / "late"
    job = _lingering_job(c, token, late)
    assert job_cgroups(c, "node1", job)
    cfg = load_slurm_conf(str(c.conf))
    stub = Stub(f"{cfg.control_addr}:{cfg.slurmctld_port}", load_key(cfg.auth_key_file))
    request = controller_pb2.CompleteBatchRequest(
        node="node1", job_id=job, exit_code=0, end_time=int(time.time())
    )
    stub.call("/shoal.v1.Controller/CompleteBatch", request, controller_pb2.CompleteBatchResponse, timeout=10)
    assert c.state(job) == "COMPLETED"  # the controller takes SlurmUser's word, as Slurm does
    wait_gone("the job's processes to be killed", lambda: marked(token), timeout=30)
    wait_gone("the job's cgroup to be removed", lambda: job_cgroups(c, "node1", job), timeout=30)
    time.sleep(7)
    assert not late.exists()
    assert c.state(job) == "COMPLETED"  # the real end that follows changes nothing


@needs_cgroups
def test_noded_frozen_past_slurmd_timeout_requeues_and_kills_the_lost_run(tmp_path: Path) -> None:
    c = start_cluster(
        tmp_path / "c", nodes=2, extra=("SlurmdTimeout=6", "ReturnToService=2"), accounting=True
    )
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        # one noded per node, so that node2 alone can be frozen
        first = pid_in(c.dir / "run" / "noded.pid")
        os.kill(first, signal.SIGTERM)
        wait_until("the first noded to stop", lambda: not Path(f"/proc/{first}").exists(), timeout=30)
        daemons = [start_noded(c, "node1"), start_noded(c, "node2")]
        wait_until("both nodes idle", lambda: sinfo_state(c, "node1") == "idle" == sinfo_state(c, "node2"))
        token, out = uuid.uuid4().hex, tmp_path / "out"
        blocker = c.submit("-w", "node1", "-c", "4", "-o", "/dev/null", "--wrap", "sleep 300")
        c.wait_state(blocker, {"RUNNING"})
        script = (
            '#!/bin/sh\necho "start ${SLURM_RESTART_COUNT:-0} $SLURMD_NODENAME"\n'
            'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 120; fi\necho "end ${SLURM_RESTART_COUNT:-0}"\n'
        )
        job = c.submit(
            "--requeue",
            "-o",
            str(out),
            "--open-mode=append",
            f"--export=ALL,FAULTS_MARK={token}",
            input=script,
        )
        c.wait_state(job, {"RUNNING"})
        assert c.job_field(job, "%N") == "node2"
        wait_until("run 0 running", lambda: marked(token, "node2", 0))
        c.ok("scancel", str(blocker))
        # and a two-node job that may not be requeued, with a step's task on node2
        wide_token = uuid.uuid4().hex
        wide = c.submit(
            "--no-requeue",
            "-N2",
            "-o",
            "/dev/null",
            f"--export=ALL,FAULTS_MARK={wide_token}",
            "--wrap",
            "srun -N2 --ntasks-per-node=1 sleep 120",
        )
        c.wait_state(wide, {"RUNNING"})
        wait_until(
            "the wide job's task on node2", lambda: marked(wide_token, "node2", also="SLURM_STEP_ID=0")
        )
        daemons[1].send_signal(signal.SIGSTOP)
        try:
            wait_until("node2 DOWN", lambda: sinfo_state(c, "node2").startswith("down"), timeout=60)
            assert "Reason=Not responding" in c.ok("scontrol", "show", "node", "node2")
            # 22.05: a requeueable batch job of a failed node runs again (its run recorded NODE_FAIL)
            assert c.wait_state(job, {"COMPLETED", "FAILED", "NODE_FAIL"}, timeout=60) == "COMPLETED"
            assert scontrol_field(c, "job", job, "Restarts") == "1"
            assert scontrol_field(c, "job", job, "NodeList") == "node1"
            assert c.wait_state(wide, {"NODE_FAIL", "FAILED", "COMPLETED", "CANCELLED"}) == "NODE_FAIL"
            wait_gone("the wide job's processes on node1", lambda: marked(wide_token, "node1"), timeout=30)
            # frozen, node2 cannot kill anything: run 0 still runs there, in its cgroup (the wide job's
            # task there may end with its srun, whose connection broke)
            assert marked(token, "node2", 0)
            assert job_cgroups(c, "node2", job)
        finally:
            daemons[1].send_signal(signal.SIGCONT)
        # node2 answers again: what it still runs of the ended run is killed, its cgroup removed ...
        wait_gone("run 0's processes to be killed", lambda: marked(token), timeout=60)
        wait_gone("run 0's cgroup to be removed", lambda: job_cgroups(c, "node2", job), timeout=30)
        wait_gone("the wide job's step task to be killed", lambda: marked(wide_token), timeout=60)
        wait_gone(
            "the wide job's cgroup on node2 to be removed", lambda: job_cgroups(c, "node2", wide), timeout=30
        )
        # ... and, ReturnToService=2, it returns to service without an admin
        wait_until("node2 idle again", lambda: sinfo_state(c, "node2") == "idle", timeout=60)
        lines = out.read_text().splitlines()
        assert lines[0] == "start 0 node2"
        assert lines[-2:] == ["start 1 node1", "end 1"]
        assert "end 0" not in lines

        # accounting: the lost run is its own NODE_FAIL record, then the run that completed
        def runs() -> list[str]:
            return c.ok("sacct", "-D", "-X", "-n", "-P", "-j", str(job), "-o", "JobID,State,NodeList").split()

        wait_until(
            "both runs in accounting", lambda: len(runs()) == 2 and runs()[-1].endswith("COMPLETED|node1")
        )
        assert runs() == [f"{job}|NODE_FAIL|node2", f"{job}|COMPLETED|node1"]
        assert c.ok("sacct", "-X", "-n", "-P", "-j", str(job), "-o", "State").split() == ["COMPLETED"]
    finally:
        for d in daemons:
            if d.poll() is None:
                d.send_signal(signal.SIGCONT)
        stop_cluster(c)


@needs_cgroups
def test_every_process_of_a_node_killed_its_jobs_are_lost_with_the_node(
    one_node: Cluster, tmp_path: Path
) -> None:
    c, token, out = one_node, uuid.uuid4().hex, tmp_path / "out"
    script = (
        '#!/bin/sh\necho "start ${SLURM_RESTART_COUNT:-0}"\n'
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi\necho "end ${SLURM_RESTART_COUNT:-0}"\n'
    )
    again = c.submit("-o", str(out), "--open-mode=append", f"--export=ALL,FAULTS_MARK={token}", input=script)
    lost = c.submit(
        "--no-requeue", "-o", "/dev/null", f"--export=ALL,FAULTS_MARK={token}", "--wrap", "sleep 300"
    )
    for job in (again, lost):
        c.wait_state(job, {"RUNNING"})
    wait_until("both jobs' processes", lambda: len(marked(token)) >= 3)
    # the crash: noded, every stepd and every process of the jobs, all at once (frozen first, so
    # that none sees another die)
    victims = {pid_in(c.dir / "run" / "noded.pid")}
    victims |= {pid_in(spool_file(c, "node1", j, "stepd.pid")) for j in (again, lost)}
    for pid in victims:
        os.kill(pid, signal.SIGSTOP)
    for _ in range(5):
        left = (
            victims
            | set(marked(token))
            | cgroup_procs(job_cgroups(c, "node1", again) + job_cgroups(c, "node1", lost))
        )
        # every one frozen before any is killed: a script must not see its child die (it would say
        # "Killed" and carry on while the loop is preempted on a loaded machine; the set's order is the pids')
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in left:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        time.sleep(0.2)
    assert marked(token) == []
    assert c.state(lost) == "RUNNING"  # nobody has told the controller yet
    start_noded(c, "node1")
    # not FAILED 0:9 (a crash is not the user's SIGKILL): lost with the node, requeued if it may be
    assert c.wait_state(lost, {"NODE_FAIL", "FAILED", "COMPLETED"}) == "NODE_FAIL"
    assert c.wait_state(again, {"COMPLETED", "FAILED", "NODE_FAIL"}) == "COMPLETED"
    assert scontrol_field(c, "job", again, "Restarts") == "1"
    assert out.read_text().splitlines() == ["start 0", "start 1", "end 1"]
    assert job_cgroups(c, "node1", lost) == [] and job_cgroups(c, "node1", again) == []
    assert sinfo_state(c, "node1") == "idle"


@needs_cgroups
def test_kill_9_of_a_steps_supervisor_kills_its_tasks_and_removes_its_cgroup(one_node: Cluster) -> None:
    c, token = one_node, uuid.uuid4().hex
    job = c.submit(
        "-o",
        "/dev/null",
        f"--export=ALL,FAULTS_MARK={token}",
        "--wrap",
        "srun sh -c 'sleep 300 & sleep 301; wait'; sleep 300",
    )
    c.wait_state(job, {"RUNNING"})

    def tasks() -> list[int]:
        return marked(token, also="SLURM_STEP_ID=0")

    wait_until("the step's tasks", lambda: len(tasks()) >= 3)
    step_group = [d / "step_0" for d in job_cgroups(c, "node1", job)]
    assert all(d.is_dir() for d in step_group) and set(tasks()) <= cgroup_procs(step_group)
    supervisor = next((c.dir / "spool" / "node1").glob(f"step{job}.0/stepd.pid"))
    os.kill(pid_in(supervisor), signal.SIGKILL)
    wait_gone("the step's tasks to be killed", tasks, timeout=30)
    wait_gone("the step's cgroup to be removed", lambda: [d for d in step_group if d.exists()], timeout=30)
    assert not supervisor.parent.exists()
    c.ok("scancel", str(job))
    assert c.wait_state(job, {"CANCELLED", "FAILED", "COMPLETED"}) == "CANCELLED"
    wait_gone("the job's processes to be killed", lambda: marked(token), timeout=30)
    assert job_cgroups(c, "node1", job) == []
