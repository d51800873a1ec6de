"""The fake-DGX training script on a 4-node 8-GPU cluster, against what Slurm 22.05 did with it.

The batch script and its steps are the ones captured on the real 22.05 (tests/compat/layouts/
batch_dgx*.txt, run there with -c2 on 16-CPU nodes); here the nodes have 112 CPUs and the job asks
-c14, as the issue's DGX script does, so CPU counts are 7 times the real ones. Every other layout
variable of every task (node, rank, local rank, GPUs, tasks per node, distribution, srun's warnings)
must be 22.05's.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.layouts import LAYOUTS, Capture, batch_script, parse, read
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e

SCALE = 7  # 112 CPUs per node here, 16 on the real nodes; -c14 here, -c2 there
CPU_VARIABLES = (
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0",
    "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_TASK",
)
LAYOUT_VARIABLES = (
    "SLURMD_NODENAME",
    "SLURM_NODEID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_GTIDS",
    "SLURM_NNODES",
    "SLURM_NTASKS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_NODELIST",
    "SLURM_NODELIST",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_DISTRIBUTION",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "SLURM_STEP_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_JOB_GPUS",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_MEM_PER_CPU",
    "SLURM_NODE_ALIASES",
)


@pytest.fixture(scope="module")
def dgx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("dgx"),
        nodes=4,
        cpus=8 * 14,
        mem=128000,
        extra=("DefMemPerCPU=1000",),
        up_args=("--gpus-per-node", "8", "--gpu-type", "h100"),
    )
    yield c
    stop_cluster(c)


def _scaled(text: str) -> str:
    """A CPU count (or `16(x4)` list) of the real run, on these nodes."""
    return re.sub(r"(^|,)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) * SCALE}", text)


def _run_like(dgx: Cluster, workdir: Path, real: Capture) -> Capture:
    """Run the captured batch script and its steps here (-c2 becomes -c14); the output as a capture."""
    shutil.copy(LAYOUTS / "show.sh", workdir / "show.sh")
    (workdir / "show.sh").chmod(0o755)
    steps = [" ".join(step.args).replace("-c2", "-c14") for step in real.steps]
    (workdir / "job.sh").write_text(batch_script(str(workdir / "show.sh"), steps))
    args = [a.replace("-c2", "-c14") for a in real.args]
    job_id = dgx.submit(
        "-D",
        str(workdir),
        "-o",
        str(workdir / "out"),
        "-e",
        str(workdir / "err"),
        *args,
        str(workdir / "job.sh"),
    )
    state = dgx.wait_state(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=180)
    out = (workdir / "out").read_text()
    assert state == "COMPLETED", out + (workdir / "err").read_text()
    return parse("shoal", f"$ sbatch {' '.join(args)}\n{out}")


def _compare(real: Capture, ours: Capture) -> None:
    assert [s.args for s in ours.steps] == [[a.replace("-c2", "-c14") for a in s.args] for s in real.steps]
    for step, mine in zip(real.steps, ours.steps, strict=True):
        where = " ".join(step.args) or "plain srun"
        assert mine.warnings == step.warnings, where
        assert (mine.error, mine.exit) == (step.error, step.exit), where
        assert sorted(mine.tasks) == sorted(step.tasks), where
        for task, env in step.tasks.items():
            got = mine.tasks[task]
            diff = {k: (env.get(k), got.get(k)) for k in LAYOUT_VARIABLES if env.get(k) != got.get(k)}
            diff.update(
                {
                    k: (_scaled(env[k]), got.get(k))
                    for k in CPU_VARIABLES
                    if k in env and _scaled(env[k]) != got.get(k)
                }
            )
            assert not diff, f"{where}, task {task}: (22.05, shoal) {diff}"


def test_dgx_script_lays_out_tasks_and_gpus_as_22_05(dgx: Cluster, workdir: Path) -> None:
    real = read(LAYOUTS / "batch_dgx.txt")
    ours = _run_like(dgx, workdir, real)
    # what the issue saw: the plain srun and --gpus-per-task=1 runs 8 tasks on each node ...
    for step in ours.steps[:2]:
        assert Counter(env["SLURMD_NODENAME"] for env in step.tasks.values()) == Counter(
            {f"node{i}": 8 for i in range(1, 5)}
        )
    # ... and --gpus-per-task=1 gives each of them one GPU, its local rank, and -c14's CPUs
    for env in ours.steps[1].tasks.values():
        assert env["CUDA_VISIBLE_DEVICES"] == env["SLURM_LOCALID"]
        assert env["SLURM_CPUS_PER_TASK"] == "14"
    _compare(real, ours)
    assert {k: v for k, v in ours.batch_env.items() if k.startswith("SLURM_GPUS")} == {
        k: v for k, v in real.batch_env.items() if k.startswith("SLURM_GPUS")
    }


def test_one_launcher_per_node_as_22_05(dgx: Cluster, workdir: Path) -> None:
    """torchrun's launcher line: `srun -n4 --ntasks-per-node=1` (and -N4 -n4) runs one task per node
    with all its GPUs; a bare --ntasks-per-node=1 keeps the job's 32 tasks (22.05 says why: batch_dgx)."""
    real = read(LAYOUTS / "batch_dgx_launchers.txt")
    ours = _run_like(dgx, workdir, real)
    for step in ours.steps:
        assert sorted(env["SLURMD_NODENAME"] for env in step.tasks.values()) == [
            f"node{i}" for i in range(1, 5)
        ]
    _compare(real, ours)


OWN = [
    "srun_N2_n4",
    "srun_N2_n4_gres1",
    "srun_N2_n4_gpt1",
    "srun_N2_n4_cyclic",
    "srun_N2_n4_plane2",
    "srun_N2_n3_tpn2",
    "srun_N3_n5",
]


@pytest.mark.parametrize("name", OWN)
def test_srun_own_allocation_as_22_05(dgx: Cluster, workdir: Path, name: str) -> None:
    """srun outside any job: the allocation it makes (3+1 for -N2 -n4, whatever the nodes' size) and
    its tasks' variables, none of the job-environment ones (SLURM_MEM_PER_CPU, SLURM_NODE_ALIASES,
    SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0, SLURM_DISTRIBUTION without -m)."""
    real = read(LAYOUTS / f"{name}.txt")
    shutil.copy(LAYOUTS / "show.sh", workdir / "show.sh")
    (workdir / "show.sh").chmod(0o755)
    out = dgx.run("srun", *real.args, "-l", str(workdir / "show.sh"), cwd=workdir, timeout=120)
    assert out.returncode == real.steps[0].exit, out.stderr
    text = "\n".join(sorted(out.stdout.splitlines(), key=lambda line: int(line.split(":")[0])))
    ours = parse(
        "shoal",
        f"$ srun {' '.join(real.args)}\n{text}\n"
        + "".join(f"! {line}\n" for line in out.stderr.splitlines()),
    )
    step, mine = real.steps[0], ours.steps[0]
    assert mine.warnings == step.warnings
    assert sorted(mine.tasks) == sorted(step.tasks)
    for task, env in step.tasks.items():
        diff = {
            k: (env.get(k), mine.tasks[task].get(k))
            for k in (*LAYOUT_VARIABLES, *CPU_VARIABLES)
            if env.get(k) != mine.tasks[task].get(k)
        }
        assert not diff, f"task {task}: (22.05, shoal) {diff}"


@pytest.mark.parametrize("name", ["salloc_N2_n4_gpt1", "salloc_N2_tpn2"])
def test_srun_inside_salloc_as_22_05(dgx: Cluster, workdir: Path, name: str) -> None:
    """salloc's command's variables, and a plain srun's tasks inside it (they inherit salloc's)."""
    real = read(LAYOUTS / f"{name}.txt")
    shutil.copy(LAYOUTS / "show.sh", workdir / "show.sh")
    (workdir / "show.sh").chmod(0o755)
    show = str(workdir / "show.sh")
    inner = f'echo "batch: $({show})"; echo "$ srun "; srun -l {show} | sort -n'
    out = dgx.run("salloc", *real.args, "bash", "-c", inner, cwd=workdir, timeout=120)
    assert out.returncode == 0, out.stderr
    ours = parse("shoal", f"$ salloc {' '.join(real.args)}\n{out.stdout}")
    assert {k: v for k, v in ours.batch_env.items() if k in LAYOUT_VARIABLES or k in CPU_VARIABLES} == {
        k: v for k, v in real.batch_env.items() if k in LAYOUT_VARIABLES or k in CPU_VARIABLES
    }
    step, mine = real.steps[0], ours.steps[0]
    assert sorted(mine.tasks) == sorted(step.tasks)
    for task, env in step.tasks.items():
        diff = {
            k: (env.get(k), mine.tasks[task].get(k))
            for k in (*LAYOUT_VARIABLES, *CPU_VARIABLES)
            if env.get(k) != mine.tasks[task].get(k)
        }
        assert not diff, f"task {task}: (22.05, shoal) {diff}"
