"""GPUs and isolation end to end: emulated DGX nodes (fake NVML) whose GPUs are character devices
(major 195) in a directory this test owns, jobs confined by real cgroups (v1 here)."""

from __future__ import annotations

import glob
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from noded.cgroup import detect_version
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

GPUS = 8


def _cgroups_usable() -> str:
    if os.geteuid() != 0:
        return "needs root (cgroups, mknod)"
    if detect_version() is None:
        return "no writable cgroup v1/v2 hierarchy with cpuset and memory"
    return ""


pytestmark = pytest.mark.skipif(bool(_cgroups_usable()), reason=_cgroups_usable() or "usable")


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    devices = tmp_path_factory.mktemp("gpudev")
    for i in range(GPUS):
        os.mknod(devices / f"nvidia{i}", 0o666 | 0o020000, os.makedev(195, i))
    c = start_cluster(
        tmp_path_factory.mktemp("gpus"),
        up_args=("--gpus-per-node", str(GPUS), "--gpu-type", "h100", "--gpu-files", str(devices)),
    )
    c.env["GPU_DEV_DIR"] = str(devices)
    yield c
    stop_cluster(c)


def _job_cgroups(c: Cluster) -> list[str]:
    scope = f"{zlib.crc32(os.path.abspath(c.conf).encode()):08x}_"
    return glob.glob(f"/sys/fs/cgroup/*/shoal/{scope}*/job_*") + glob.glob(
        f"/sys/fs/cgroup/shoal/{scope}*/job_*"
    )


def _run(c: Cluster, workdir: Path, *args: str, script: str) -> tuple[str, str, str]:
    """Submit, wait for the end; (state, stdout, stderr)."""
    (workdir / "job.sh").write_text("#!/bin/bash\n" + script)
    job_id = c.submit("-o", str(workdir / "out"), "-e", str(workdir / "err"), *args, str(workdir / "job.sh"))
    state = c.wait_state(job_id, {"COMPLETED", "FAILED", "OUT_OF_MEMORY", "CANCELLED", "TIMEOUT"})
    read = lambda name: (workdir / name).read_text() if (workdir / name).exists() else ""  # noqa: E731
    return state, read("out"), read("err")


OPEN_DEVICE = """import errno, os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDWR))
        print(path, "opened")
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
"""


def test_node_reports_topology_gres(gpu_cluster: Cluster) -> None:
    show = gpu_cluster.ok("scontrol", "show", "node", "node1")
    assert "Gres=gpu:h100:8" in show
    assert "DRAIN" not in show
    assert "gpu:h100:8" in gpu_cluster.ok("sinfo", "-h", "-N", "-o", "%G")


def test_two_gpus_visible_allowed_enxio_others_eperm(gpu_cluster: Cluster, workdir: Path) -> None:
    (workdir / "open.py").write_text(OPEN_DEVICE)
    dev = gpu_cluster.env["GPU_DEV_DIR"]
    script = (
        "env | grep -E '^(CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|SLURM_JOB_GPUS|SLURM_GPUS_ON_NODE)=' | sort\n"
        f"for i in ${{SLURM_JOB_GPUS//,/ }}; do python3 {workdir}/open.py {dev}/nvidia$i; done\n"
        f"python3 {workdir}/open.py {dev}/nvidia7\n"
    )
    state, out, err = _run(gpu_cluster, workdir, "--gres=gpu:2", script=script)
    assert state == "COMPLETED", err
    lines = out.splitlines()
    assert "CUDA_VISIBLE_DEVICES=0,1" in lines and "GPU_DEVICE_ORDINAL=0,1" in lines
    assert "SLURM_GPUS_ON_NODE=2" in lines
    job_gpus = next(line.split("=", 1)[1] for line in lines if line.startswith("SLURM_JOB_GPUS="))
    for index in job_gpus.split(","):
        assert f"{dev}/nvidia{index} ENXIO" in lines  # allowed by the devices cgroup, no driver behind it
    assert f"{dev}/nvidia7 EPERM" in lines  # not allocated: denied
    assert not _job_cgroups(gpu_cluster)


def test_memory_limit_kills_and_job_ends_out_of_memory(gpu_cluster: Cluster, workdir: Path) -> None:
    script = "python3 -c \"b = b'x' * (200 << 20); print(len(b))\"\n"
    state, _, err = _run(gpu_cluster, workdir, "--mem=50M", script=script)
    assert state == "OUT_OF_MEMORY"
    job_id = _last_job(gpu_cluster)[0]
    assert f"Detected 1 oom-kill event(s) in StepId={job_id}.batch cgroup" in err
    assert "JobState=OUT_OF_MEMORY" in gpu_cluster.ok("scontrol", "-o", "show", "job", job_id)
    assert not _job_cgroups(gpu_cluster)


def _last_job(c: Cluster) -> list[str]:
    ids = [int(x) for x in c.ok("squeue", "-h", "-t", "all", "-o", "%i").split()]
    return [str(max(ids))]


def test_cpus_per_task_two_sees_exactly_two_cpus(gpu_cluster: Cluster, workdir: Path) -> None:
    script = "grep Cpus_allowed_list /proc/self/status\n"
    state, out, err = _run(gpu_cluster, workdir, "-c2", script=script)
    assert state == "COMPLETED", err
    allowed = out.split(":", 1)[1].strip()
    cpus = set()
    for part in allowed.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    assert len(cpus) == 2
    assert not _job_cgroups(gpu_cluster)


def test_gres_used_while_running(gpu_cluster: Cluster, workdir: Path) -> None:
    job_id = gpu_cluster.submit("-o", "/dev/null", "--gres=gpu:h100:2", "--wrap", "sleep 30")
    gpu_cluster.wait_state(job_id, {"RUNNING"})
    try:
        show = gpu_cluster.ok("scontrol", "-d", "show", "node", gpu_cluster.job_field(job_id, "%N"))
        assert "GresUsed=gpu:h100:2(IDX:0-1)" in show
        assert "gpu:h100:2" in gpu_cluster.ok("squeue", "-h", "-j", str(job_id), "-o", "%b")
    finally:
        gpu_cluster.ok("scancel", str(job_id))


def test_gpus_unlike_slurm_conf_drain_the_node(tmp_path: Path) -> None:
    c = start_cluster(
        tmp_path / "c",
        nodes=1,
        up_args=("--gpus-per-node", "8", "--gpu-type", "h100", "--fake-nvml", "pcie_a100", "--no-cgroups"),
    )
    try:
        show = c.ok("scontrol", "show", "node", "node1")
        assert "DRAIN" in show
        assert "Reason=gres/gpu:h100 count reported lower than configured (0 < 8; found gpu:a100:8)" in show
    finally:
        stop_cluster(c)


WHERE = (
    "import os\n"
    "cg = [l.split(':', 2)[2] for l in open('/proc/self/cgroup').read().splitlines() if 'cpuset' in l]\n"
    "print(os.environ.get('WHERE_TAG') or os.environ['SLURM_PROCID'], os.environ.get('CUDA_VISIBLE_DEVICES'),\n"
    "      os.environ.get('SLURM_STEP_GPUS', '-'), cg[0] if cg else '?', sorted(os.sched_getaffinity(0)))\n"
)


def test_step_tasks_get_their_gpus_and_their_step_cgroup(gpu_cluster: Cluster, workdir: Path) -> None:
    (workdir / "where.py").write_text(WHERE)
    script = (
        f"WHERE_TAG=batch python3 {workdir}/where.py\nsrun -n2 --gpus-per-task=1 python3 {workdir}/where.py\n"
    )
    state, out, err = _run(gpu_cluster, workdir, "-n2", "--gres=gpu:2", script=script)
    assert state == "COMPLETED", err
    rows = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines()}
    batch = rows["batch"].split(" ", 3)
    assert batch[0] == "0,1" and batch[2].endswith("/step_batch")  # the script in the job's step_batch
    job_cgroup = batch[2].rsplit("/", 1)[0]
    assert job_cgroup.rsplit("/", 1)[1].startswith("job_")
    for task, visible in (("0", "0"), ("1", "1")):  # one GPU each, numbered among the job's two
        cuda, step_gpus, cgroup, cpus = rows[task].split(" ", 3)
        assert cuda == visible and len(step_gpus.split(",")) == 1  # 22.05: each task's own (compat/layouts)
        assert cgroup == f"{job_cgroup}/step_0" and cpus == batch[3]  # the step's group; all the job's CPUs
    assert not _job_cgroups(gpu_cluster)


def test_srun_allocation_tasks_are_confined_and_cleaned_up(gpu_cluster: Cluster, workdir: Path) -> None:
    (workdir / "where.py").write_text(WHERE)
    out = gpu_cluster.ok(
        "srun", "-N1", "-n1", "-c2", "--gres=gpu:1", "python3", str(workdir / "where.py"), cwd=workdir
    )
    task, cuda, step_gpus, cgroup, cpus = out.split(" ", 4)
    assert (task, cuda) == ("0", "0") and "/job_" in cgroup and step_gpus.isdigit()
    assert len(cpus.strip().strip("[]").split(",")) == 2
    assert not _job_cgroups(gpu_cluster)


def test_exact_step_is_bound_to_its_own_cpus(gpu_cluster: Cluster, workdir: Path) -> None:
    """Without --exact a step's tasks run on all the job's CPUs; with it, on the step's share."""
    script = "python3 -c 'import os; print(\"job\", len(os.sched_getaffinity(0)))'\n" + "".join(
        f'srun -n1 {flag} python3 -c \'import os; print("{tag}", len(os.sched_getaffinity(0)), '
        'os.environ["SLURM_CPUS_ON_NODE"])\'\n'
        for tag, flag in (("whole", ""), ("exact", "--exact"))
    )
    state, out, err = _run(gpu_cluster, workdir, "-n1", "-c2", script=script)
    assert state == "COMPLETED", err
    assert out.splitlines() == ["job 2", "whole 2 2", "exact 1 1"]
    assert not _job_cgroups(gpu_cluster)


STEP_CPUSET = (
    "import os, re\n"
    "status = open('/proc/self/status').read()\n"
    "allowed = re.search(r'Cpus_allowed_list:\\s*(\\S+)', status).group(1)\n"
    "rel = [l.split(':', 2)[2] for l in open('/proc/self/cgroup').read().splitlines() if ':cpuset:' in l][0]\n"
    "print(os.environ.get('SLURM_STEP_ID', 'batch'), allowed, open('/sys/fs/cgroup/cpuset' + rel + '/cpuset.cpus').read().strip(), rel)\n"
)


def _cpus(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def test_exact_step_cpuset_holds_exactly_its_cpus(gpu_cluster: Cluster, workdir: Path) -> None:
    """The step's own cpuset (not only its affinity): a task cannot widen itself back to the job's."""
    (workdir / "cpuset.py").write_text(STEP_CPUSET)
    script = (
        f"python3 {workdir}/cpuset.py\n"
        f"srun -n1 --exact python3 {workdir}/cpuset.py\n"
        f"srun -n1 --exact python3 -c 'import os; os.sched_setaffinity(0, range(os.cpu_count()));"
        f' print("widened", len(os.sched_getaffinity(0)))\'\n'
    )
    state, out, err = _run(gpu_cluster, workdir, "-n2", script=script)
    assert state == "COMPLETED", err
    lines = out.splitlines()
    assert len(lines) == 3, out + err
    batch, step, widened = lines[0].split(), lines[1].split(), lines[2]
    assert batch[3].endswith("/step_batch") and len(_cpus(batch[2])) == 2
    assert step[0] == "0" and step[3].endswith("/step_0")
    assert _cpus(step[1]) == _cpus(step[2]) and len(_cpus(step[2])) == 1  # its CPU, in the kernel's words
    assert _cpus(step[2]) <= _cpus(batch[2])
    assert widened == "widened 1"
    assert not _job_cgroups(gpu_cluster)


def test_one_gpu_step_opens_its_gpu_and_not_the_jobs_other(gpu_cluster: Cluster, workdir: Path) -> None:
    (workdir / "open.py").write_text(OPEN_DEVICE)
    dev = gpu_cluster.env["GPU_DEV_DIR"]
    script = (
        f"echo JOB $SLURM_JOB_GPUS\n"
        f"srun --gres=gpu:1 bash -c 'echo STEP $SLURM_STEP_GPUS; "
        f"for i in ${{SLURM_JOB_GPUS//,/ }}; do python3 {workdir}/open.py {dev}/nvidia$i; done'\n"
    )
    state, out, err = _run(gpu_cluster, workdir, "--gres=gpu:2", script=script)
    assert state == "COMPLETED", err
    lines = out.splitlines()
    job_gpus = next(line.split()[1] for line in lines if line.startswith("JOB ")).split(",")
    step_gpus = next(line.split()[1] for line in lines if line.startswith("STEP ")).split(",")
    assert len(job_gpus) == 2 and len(step_gpus) == 1 and set(step_gpus) < set(job_gpus)
    for index in job_gpus:
        expected = (
            "ENXIO" if index in step_gpus else "EPERM"
        )  # the step's GPU allowed; the job's other denied
        assert f"{dev}/nvidia{index} {expected}" in lines
    assert not _job_cgroups(gpu_cluster)


def test_step_over_its_memory_is_oom_killed_and_the_job_goes_on(gpu_cluster: Cluster, workdir: Path) -> None:
    script = (
        "srun --mem=50M python3 -c \"b = b'x' * (200 << 20); print(len(b))\"\n"
        "echo srun exited $?\n"
        "srun --mem=50M echo small step fine\n"
    )
    state, out, err = _run(gpu_cluster, workdir, "--mem=400M", script=script)
    assert state == "COMPLETED", err
    job_id = _last_job(gpu_cluster)[0]
    assert "srun exited 253" in out  # 128 + Slurm's OOM "signal" 125
    assert "small step fine" in out
    assert f"Detected 1 oom-kill event(s) in StepId={job_id}.0 cgroup" in err
    assert "srun: error: node" in err and ": task 0: Out Of Memory" in err
    # the steps' end states (OUT_OF_MEMORY, COMPLETED) are sacct's: 22.05's scontrol forgets ended steps
    for step in (f"{job_id}.0", f"{job_id}.1"):
        assert gpu_cluster.run("scontrol", "show", "step", step).stdout == f"Job step {step} not found\n"
    assert not _job_cgroups(gpu_cluster)
