"""Step cgroups inside the job's: path building (v1 per controller, v2 one tree), what a step's
group constrains, and the hierarchy for real where this machine has it (each skips saying why)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from noded.cgroup import BATCH, CgroupRequest, JobCgroup, StepCgroup, detect_version, step_name
from noded.cgroup.bpf import DEV_CHAR
from noded.isolation import Isolation, step_cgroup_request
from shoal.conf.cgroup import CgroupConf
from shoal.v1 import jobs_pb2, node_pb2

V2_MOUNTS = [
    m
    for m in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
    if os.path.exists(f"{m}/cgroup.procs") and os.path.exists(f"{m}/cgroup.controllers")
]
needs_v1 = pytest.mark.skipif(
    os.geteuid() != 0 or detect_version("cgroup/v1") != "v1",
    reason="cgroup v1 not writable here (needs root and v1 controllers)",
)


def test_step_paths_v1_and_v2() -> None:
    job = CgroupRequest(version="v1", relpath="shoal/x_node1/job_7", cpus=[0, 1], mem_bytes=100 << 20)
    step = job.child(step_name(3), cpus=[1], mem_bytes=40 << 20)
    assert step.relpath == "shoal/x_node1/job_7/step_3"
    assert (step.cpus, step.mem_bytes, step.deny_devices) == ([1], 40 << 20, [])
    assert [str(p) for p in JobCgroup(step).dirs()] == [
        f"/sys/fs/cgroup/{c}/shoal/x_node1/job_7/step_3"
        for c in ("cpuset", "memory", "devices", "cpuacct")
        + (("freezer",) if os.path.isdir("/sys/fs/cgroup/freezer") else ())
    ]  # joined where mounted (suspend)
    batch = job.child(BATCH)  # nothing of its own: the job's limits apply
    assert batch.relpath.endswith("/job_7/step_batch") and (batch.cpus, batch.mem_bytes) == ([], 0)
    v2 = CgroupRequest(version="v2", relpath="shoal/x_node1/job_7", mount="/mnt/cg2").child(step_name(0))
    assert [str(p) for p in JobCgroup(v2).dirs()] == ["/mnt/cg2/shoal/x_node1/job_7/step_0"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_step_request_takes_its_cpus_memory_and_only_its_gpus(tmp_path: Path) -> None:
    files = {}
    for i in range(4):
        os.mknod(tmp_path / f"nvidia{i}", 0o666 | 0o020000, os.makedev(195, i))
        files[i] = str(tmp_path / f"nvidia{i}")
    conf = CgroupConf(
        constrain_cores=True, constrain_ram_space=True, constrain_devices=True, allowed_ram_space=100
    )
    iso = Isolation(conf=conf, version="v1", gpu_files=files, scope="x_")
    machine = sorted(os.sched_getaffinity(0))
    job = jobs_pb2.JobInfo(
        job_id=7,
        allocation=[jobs_pb2.NodeAlloc(node="n1", cpus=2, cpu_ids=[0, 1], mem_mb=100, gpu_indices=[1, 2])],
    )
    exact = jobs_pb2.JobStep(
        step_id=3, layout=[jobs_pb2.StepNode(node="n1", cpu_ids=[1], mem_mb=40, gpu_indices=[2])]
    )
    req = step_cgroup_request(iso, node_pb2.LaunchTasksRequest(job=job, step=exact), "n1")
    assert req.relpath == "shoal/x_n1/job_7/step_3"
    assert req.cpus == [machine[1 % len(machine)]] and req.mem_bytes == 40 << 20
    assert req.deny_devices == [[DEV_CHAR, 195, 1]]  # the job's other GPU; the rest the job's group denies
    whole = jobs_pb2.JobStep(step_id=4, layout=[jobs_pb2.StepNode(node="n1", cpu_ids=[0, 1])])
    req = step_cgroup_request(iso, node_pb2.LaunchTasksRequest(job=job, step=whole), "n1")
    assert (req.cpus, req.mem_bytes, req.deny_devices) == ([], 0, [])  # the job's CPUs, memory and GPUs


def _start_in(cg: StepCgroup, argv: list[str]) -> subprocess.Popen[bytes]:
    """Start argv inside the group. The child stops itself, is attached, then continues into argv: no
    preexec_fn, whose Python code in a fork of this (gRPC-threaded) test process can abort."""
    proc = subprocess.Popen(["/bin/sh", "-c", 'kill -STOP $$; exec "$@"', "sh", *argv])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{proc.pid}/stat").read_text().split(")")[-1].split()[0] != "T":
        assert time.monotonic() < deadline, "the child never stopped"
        time.sleep(0.01)
    cg.attach(proc.pid)
    os.kill(proc.pid, signal.SIGCONT)
    return proc


def _int(path: Path) -> int:
    return int(path.read_text().strip())


@needs_v1
def test_v1_step_inside_job_limits_oom_and_removal() -> None:
    node = f"shoal/test_{uuid.uuid4().hex[:8]}"
    job = CgroupRequest(version="v1", relpath=f"{node}/job_1", mem_bytes=120 << 20)
    step = StepCgroup(job, job.child(step_name(0), mem_bytes=40 << 20))
    batch = StepCgroup(job, job.child(BATCH))
    root = Path("/sys/fs/cgroup")
    try:
        step.create()  # no batch script made the job's group: the step does, with the job's limits
        batch.create()
        assert _int(root / "memory" / node / "job_1/memory.limit_in_bytes") == 120 << 20
        assert _int(root / "memory" / node / "job_1/step_0/memory.limit_in_bytes") == 40 << 20
        assert (root / "cpuset" / node / "job_1/step_batch/cpuset.cpus").read_text().strip()
        sleeper = _start_in(batch, ["sleep", "60"])
        # -I -S: no site hooks, so the interpreter starts well inside the 40 MB before it allocates
        hog = _start_in(step, [sys.executable, "-I", "-S", "-c", "b = b'x' * (200 << 20)"])
        assert hog.wait(timeout=60) == -signal.SIGKILL
        assert step.oom_count() >= 1 and batch.oom_count() == 0  # the step's kill, not the script's
        step.remove()
        assert not (root / "memory" / node / "job_1/step_0").exists()
        assert (root / "memory" / node / "job_1").exists()  # the script still runs in step_batch
        batch.job.remove()  # the job ends: its groups go, with what is left in them
        assert sleeper.wait(timeout=30) == -signal.SIGKILL
    finally:
        JobCgroup(job).remove(timeout=10)
    for controller in ("cpuset", "memory", "devices", "cpuacct"):
        assert not (root / controller / node).exists()


@pytest.mark.skipif(os.geteuid() != 0 or not V2_MOUNTS, reason="no cgroup2 hierarchy mounted (or not root)")
def test_v2_job_holds_no_process_and_steps_are_leaves() -> None:
    mount = V2_MOUNTS[-1]
    controllers = Path(mount, "cgroup.controllers").read_text().split()
    if "memory" not in controllers:
        pytest.skip(f"cgroup2 at {mount} offers no memory controller ({' '.join(controllers) or 'none'})")
    node = f"shoal/test_{uuid.uuid4().hex[:8]}"
    job = CgroupRequest(version="v2", mount=mount, relpath=f"{node}/job_1", mem_bytes=120 << 20)
    batch = StepCgroup(job, job.child(BATCH))
    step = StepCgroup(job, job.child(step_name(0), mem_bytes=40 << 20))
    try:
        batch.create()
        sleeper = _start_in(batch, ["sleep", "60"])
        time.sleep(0.1)
        step.create()  # the job's subtree_control is writable: no process lives in the job's own group
        assert "memory" in Path(mount, node, "job_1/cgroup.subtree_control").read_text().split()
        assert _int(Path(mount, node, "job_1/step_0/memory.max")) == 40 << 20
        assert not Path(mount, node, "job_1/cgroup.procs").read_text().split()
        step.remove()
        batch.remove()
        batch.job.remove()
        sleeper.wait(timeout=30)
    finally:
        JobCgroup(job).remove(timeout=10)
    assert not Path(mount, node).exists()


@needs_v1
def test_v1_last_step_on_a_node_without_the_script_removes_the_jobs_group() -> None:
    node = f"shoal/test_{uuid.uuid4().hex[:8]}"
    job = CgroupRequest(version="v1", relpath=f"{node}/job_2", mem_bytes=120 << 20)
    first, second = (StepCgroup(job, job.child(step_name(i))) for i in (0, 1))
    root = Path("/sys/fs/cgroup")
    try:
        first.create()
        second.create()
        first.remove()
        assert (root / "memory" / node / "job_2").exists()  # the other step's group keeps it
        second.remove()  # nothing else of the job here: no group of it may be left behind
        for controller in ("cpuset", "memory", "devices", "cpuacct"):
            assert not (root / controller / node).exists()
    finally:
        JobCgroup(job).remove(timeout=10)
