"""shoal's task layout against every layout captured on the real Slurm 22.05 (tests/compat/layouts/).

Each captured step goes through the code a real step goes through: srun's own option parsing and
input variables (the captured batch environment), ctld's translation and the pure layout, ctld's
step record and noded's task environment; every layout variable of every task must be what 22.05
gave that task (present with the same value, or absent alike). The allocations themselves (srun's
own, sbatch's, salloc's) go through the scheduler core's placement on the same 4 x 16-CPU 8-GPU
nodes and must have 22.05's CPUs, tasks and GPUs per node.
"""

from __future__ import annotations

import re

import pytest

from cli import srun as srun_cli
from cli.common import CommandError
from cli.options import SBATCH_OPTIONS, JobOptions, SubmitContext, build_job_spec, parse_argv
from cli.salloc import SALLOC_OPTIONS, job_environment, parse_options
from ctld import steps as ctld_steps
from ctld.jobs import job_request
from ctld.sched.model import Config
from ctld.sched.placement import Overlay, place
from ctld.sched.steps import AllocNode, StepRefused, layout_step
from noded.env import slurm_variables
from noded.taskenv import task_environments
from shoal import hostlist
from shoal.v1 import jobs_pb2, node_pb2
from tests.compat.layouts import Capture, StepCapture, all_captures
from tests.unit.sched.builders import node, partition, snapshot

CAPTURES = all_captures()
STEPS = [(c, s) for c in CAPTURES for s in c.steps]

# The variables that say how a step is laid out; each must match 22.05's, task by task.
COMPARED = (
    "SLURMD_NODENAME",
    "SLURM_NODEID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_GTIDS",
    "SLURM_NNODES",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_NODELIST",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0",
    "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_DISTRIBUTION",
    "SLURM_DIST_PLANESIZE",
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

# Where shoal knowingly differs, by (capture, srun options): variable -> why.
KNOWN = {
    # more tasks on a node than its CPUs hold (-c2, 2 tasks on 3 CPUs): 22.05 then gives the step
    # all the job's CPUs on each node; shoal gives --exact's count.
    ("batch_N2_tpn3", "-c2 -n3"): {"SLURM_CPUS_ON_NODE": "overcommitted -c step"},
    # the same with -c3 on nodes of 8 and 2 CPUs: 22.05 says 2 and 1 (the tasks there), shoal 6 and 2.
    ("batch_N2_n5_c2_dist", "-c3 -n3"): {"SLURM_CPUS_ON_NODE": "overcommitted -c step"},
}


def _expand_counts(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        assert m, text
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return out


def _step_id(cap: Capture, step: StepCapture) -> str:
    return f"{cap.name}:{' '.join(step.args) or 'plain'}"


def _spec(cap: Capture) -> jobs_pb2.JobSpec:
    """The JobSpec the allocating command builds from its options (srun's own: sbatch's options)."""
    table = {"sbatch": SBATCH_OPTIONS, "salloc": SALLOC_OPTIONS, "srun": srun_cli.SRUN_OPTIONS}[cap.kind]
    parsed, _ = parse_argv(cap.kind, cap.args, table)
    opts = JobOptions()
    opts.apply(parsed, "cli")
    if cap.kind == "srun":
        srun_cli.own_allocation_shape(opts)
        for dest in ("distribution", "label"):
            opts.values.pop(dest, None)
    ctx = SubmitContext(cwd="/tmp", environ={}, now=1_000_000, script=b"#!/bin/bash\ntrue\n")
    return build_job_spec(opts, ctx, batch=cap.kind == "sbatch")


def _job(cap: Capture) -> jobs_pb2.JobInfo:
    """The job as 22.05 allocated it (nodes, CPUs, tasks and GPUs per node from the capture)."""
    first = next(iter(cap.steps[0].tasks.values()), {}) if not cap.batch_env else cap.batch_env
    names = hostlist.expand(first["SLURM_JOB_NODELIST"])
    cpus = _expand_counts(first["SLURM_JOB_CPUS_PER_NODE"])
    tasks = _expand_counts(first["SLURM_TASKS_PER_NODE"])
    job = jobs_pb2.JobInfo(
        job_id=7, user_id=1001, user_name="alice", partition="batch", state=jobs_pb2.RUNNING
    )
    job.spec.CopyFrom(_spec(cap))
    job.nodes = first["SLURM_JOB_NODELIST"]
    job.num_nodes = len(names)
    if "SLURM_NTASKS" in first:
        job.num_tasks = int(first["SLURM_NTASKS"])
    for name, n_cpus, n_tasks in zip(names, cpus, tasks, strict=True):
        # the node's GPUs: every GPU a task there saw (steps' tasks see the batch host's SLURM_JOB_GPUS)
        seen = {
            g
            for s in cap.steps
            for t in s.tasks.values()
            if t["SLURMD_NODENAME"] == name
            for var in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS")
            for g in t.get(var, "").split(",")
            if g
        }
        if name == names[0]:
            seen.update(g for g in cap.batch_env.get("SLURM_JOB_GPUS", "").split(",") if g)
        gpus = ",".join(sorted(seen, key=int))
        job.allocation.add(
            node=name,
            cpus=n_cpus,
            tasks=n_tasks,
            gpu_type="h100" if gpus else "",
            gpu_indices=[int(g) for g in gpus.split(",") if g],
        )
    return job


def _srun_environ(cap: Capture, job: jobs_pb2.JobInfo) -> dict[str, str]:
    """What srun reads: the batch script's environment, salloc's, or (its own) what srun sets."""
    if cap.kind != "srun":
        return dict(cap.batch_env)
    environ = job_environment(job)
    for name in srun_cli.OWN_ALLOCATION_UNSET:
        environ.pop(name, None)
    return environ


def _run_step(
    cap: Capture, step: StepCapture, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[int, dict[str, str]] | str, list[str]]:
    """shoal's tasks' environments for the captured step (or its refusal), and srun's warnings."""
    job = _job(cap)
    environ = _srun_environ(cap, job)
    opts, command = parse_options(
        "srun", [*step.args, "./show.sh"], srun_cli.SRUN_OPTIONS, environ, srun_cli.SRUN_ENV
    )
    cli_given = {d for d, s in opts.source.items() if s == "cli"}
    capsys.readouterr()
    if cap.kind == "srun":
        srun_cli.own_allocation_shape(opts)
    req = srun_cli.step_request(opts, environ, command, job.job_id, cli_given)
    if cap.kind == "srun":  # as run_step does
        srun_cli.whole_nodes_unless_counted(req, opts)
    req.launch.own_allocation = cap.kind == "srun"
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("srun: Warning")]
    try:
        srun_cli.check_excluded(req, job)
    except CommandError as exc:
        return f"srun: error: {exc.message}", warnings
    alloc = [AllocNode(a.node, a.cpus, tuple(a.gpu_indices)) for a in job.allocation]
    try:
        found = layout_step(alloc, {}, ctld_steps.layout_request(req, job))
    except StepRefused as exc:
        return exc.message, warnings
    record = jobs_pb2.JobStep(step_id=0)
    ctld_steps.fill_step(record, job, req, found, 0, lambda name: "127.0.0.1")
    envs: dict[int, dict[str, str]] = {}
    for name in found.nodes:
        launch = node_pb2.LaunchTasksRequest(node=name, job=job, step=record, cluster_name="realslurm")
        envs.update(task_environments(launch, name, {}, devices_constrained=False))
    return envs, warnings


@pytest.mark.parametrize(("cap", "step"), STEPS, ids=[_step_id(c, s) for c, s in STEPS])
def test_step_layout_matches_22_05(
    cap: Capture, step: StepCapture, capsys: pytest.CaptureFixture[str]
) -> None:
    got, warnings = _run_step(cap, step, capsys)
    assert warnings == step.warnings
    if step.error:
        assert got == step.error
        return
    if step.exit and not step.tasks:  # refused by srun itself, in its own words
        assert isinstance(got, str) and got.splitlines() == [line for line in step.stderr if "error" in line]
        return
    assert isinstance(got, dict), got
    assert sorted(got) == sorted(step.tasks)
    known = KNOWN.get((cap.name, " ".join(step.args)), {})
    for task, real in step.tasks.items():
        ours = got[task]
        diff = {
            k: (real.get(k), ours.get(k)) for k in COMPARED if k not in known and real.get(k) != ours.get(k)
        }
        assert not diff, f"task {task}: variable: (22.05, shoal) {diff}"


ALLOCATIONS = [c for c in CAPTURES if c.steps and (c.batch_env or c.steps[0].tasks)]


@pytest.mark.parametrize("cap", ALLOCATIONS, ids=[c.name for c in ALLOCATIONS])
def test_allocation_shape_matches_22_05(cap: Capture) -> None:
    """CPUs, tasks and GPUs per node of the job itself (SLURM_JOB_CPUS_PER_NODE and
    SLURM_TASKS_PER_NODE of the batch script / salloc / srun's own job; SLURM_JOB_GPUS)."""
    real = _job(cap)
    nodes = [node(f"node{i}").cpus(16).mem(64000).gpus(8, "h100").obj() for i in range(1, 5)]
    snap = snapshot(
        nodes,
        partitions=[partition("batch", [n.name for n in nodes])],
        config=Config(def_mem_per_cpu_mb=1000),
    )
    pending = jobs_pb2.JobInfo(job_id=7, user_id=1001, partition="batch")
    pending.spec.CopyFrom(real.spec)
    start = place(job_request(pending, {n.name: n for n in nodes}), snap.partitions[0], snap, Overlay())
    assert not isinstance(start, str), start
    assert [a.node for a in start.allocation] == [a.node for a in real.allocation]
    assert [len(a.cpu_ids) for a in start.allocation] == [a.cpus for a in real.allocation]
    if cap.kind != "srun":  # srun's own job: the tasks see the step's tasks per node, not the job's
        placed = jobs_pb2.JobInfo(job_id=7, nodes=real.nodes, num_nodes=len(start.allocation))
        placed.spec.CopyFrom(real.spec)
        for a in start.allocation:
            placed.allocation.add(node=a.node, cpus=len(a.cpu_ids), tasks=a.tasks)
        first = placed.allocation[0].node
        env = (
            job_environment(placed)
            if cap.kind == "salloc"
            else slurm_variables(node_pb2.LaunchBatchRequest(node=first, job=placed, cluster_name="c"), first)
        )
        assert env["SLURM_TASKS_PER_NODE"] == cap.batch_env["SLURM_TASKS_PER_NODE"]
    if any(a.gpu_indices for a in real.allocation) and cap.kind != "srun":
        assert [len(a.gpu_indices) for a in start.allocation] == [len(a.gpu_indices) for a in real.allocation]


JOB_ENVS = [c for c in CAPTURES if c.batch_env]


@pytest.mark.parametrize("cap", JOB_ENVS, ids=[c.name for c in JOB_ENVS])
def test_job_environment_matches_22_05(cap: Capture) -> None:
    """The batch script's (salloc command's) variables: the same names with the same values, none
    more, none fewer (show.sh leaves out ids, ports, pids, paths and the like)."""
    job = _job(cap)
    job.min_memory_cpu_mb = 1000  # the reference cluster's DefMemPerCPU, as ctld records it
    if cap.kind == "salloc":
        ours = job_environment(job)
    else:
        launch = node_pb2.LaunchBatchRequest(node=job.allocation[0].node, job=job, cluster_name="realslurm")
        ours = slurm_variables(launch, job.allocation[0].node)
    shown = {k: v for k, v in ours.items() if k in cap.batch_env or _SHOWN.match(k)}
    assert shown == cap.batch_env


_SHOWN = re.compile(
    r"^(SLURMD_NODENAME|CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|SLURM_(?!(JOB_ID|JOBID|TASK_PID|SRUN_COMM_PORT|"
    r"STEP_LAUNCHER_PORT|SUBMIT_DIR|SUBMIT_HOST|CLUSTER_NAME|CONF|WORKING_CLUSTER|JOB_UID|JOB_GID|JOB_USER|"
    r"JOB_ACCOUNT|JOB_QOS|UMASK|PRIO_PROCESS|LAUNCH_NODE_IPADDR|SRUN_COMM_HOST|TOPOLOGY_ADDR|"
    r"TOPOLOGY_ADDR_PATTERN|JOB_NAME|LABELIO|JOB_PARTITION|STEP_ID|STEPID)$).*)$"
)  # what show.sh keeps


@pytest.mark.parametrize(
    ("args", "cpus", "tasks"),
    [
        (["-N1", "--exclusive"], 16, 1),  # the real one: SLURM_CPUS_ON_NODE=16, one task
        (["--exclusive"], 16, 1),
        (["-N1", "--exclusive", "-n1"], 1, 1),
        (["-N1", "--exclusive", "-n2"], 2, 2),
    ],
)
def test_srun_exclusive_in_its_own_allocation_takes_the_whole_node_unless_n_is_given(
    args: list[str], cpus: int, tasks: int
) -> None:
    """22.05, measured: `srun -N1 --exclusive` (a new, whole-node allocation) runs its task on all 16
    CPUs; with -n the step is exact, as it is inside an allocation."""
    job = jobs_pb2.JobInfo(job_id=7)
    environ: dict[str, str] = {}
    opts, command = parse_options(
        "srun", [*args, "./show.sh"], srun_cli.SRUN_OPTIONS, environ, srun_cli.SRUN_ENV
    )
    req = srun_cli.step_request(
        opts, environ, command, job.job_id, {d for d, s in opts.source.items() if s == "cli"}
    )
    srun_cli.whole_nodes_unless_counted(req, opts)
    found = layout_step([AllocNode("node1", 16)], {}, ctld_steps.layout_request(req, job))
    assert (found.cpus, found.num_tasks) == ((cpus,), tasks)
