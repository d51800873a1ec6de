"""Launching a job step's tasks on this node (LaunchTasks) and signalling running steps.

Each step gets <spool>/step<job>.<step>/ with tasks.json (noded.taskd's StepSpec) and its own
supervisor (`python -m noded.stepd .../tasks.json`), detached like a batch job's. The directory
disappears when the step ends; its stepd.pid names the supervisor meanwhile.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from noded import reap, spool, stepd_spawn
from noded.hooks import HookConfig
from noded.isolation import Isolation, cgroup_request, step_cgroup_request
from noded.launcher import DEFAULT_PATH, LaunchFailed, LaunchRefused
from noded.taskd import StepSpec, TaskSpec
from noded.taskenv import task_environments
from shoal import rlimits
from shoal.gpubind import GpuBindError
from shoal.v1 import jobs_pb2, node_pb2

STEP_PREFIX = "step"
STARTING_GRACE_S = 30.0  # a step directory without the supervisor's pid this long has lost it
# What srun says when its step lands on a node after the job was told to end there (Slurm's words)
STEP_OF_ENDED_JOB = "Job/step already completing or completed"
# how long a launch waits for a previous run's step to end (within ctld's 10 s launch RPC timeout)
EARLIER_RUN_WAIT_S = 8.0
_TOKEN = re.compile(r"%(\d*)([%AaJjNnstux])")


def step_dir(spool_root: Path, job_id: int, step_id: int) -> Path:
    return Path(spool_root) / f"{STEP_PREFIX}{job_id}.{step_id}"


def expand_pattern(pattern: str, fields: dict[str, str]) -> str:
    """%t %n %N %j %s %u %x (with optional zero-padding width) for one task; backslash = literal."""
    if "\\" in pattern:
        return pattern.replace("\\", "")

    def replace(match: re.Match[str]) -> str:
        width, letter = match.group(1), match.group(2)
        value = fields.get(letter, "%")
        return value.zfill(int(width)) if width and value.isdigit() else value

    return _TOKEN.sub(replace, pattern)


def _stream(pattern: str, cwd: str, fields: dict[str, str]) -> str:
    """srun's --output/--error/--input value for one task: "" (through srun), a path, /dev/null."""
    if not pattern:
        return ""
    if pattern.lower() == "none":
        return "/dev/null"
    path = expand_pattern(pattern, fields)
    return path if os.path.isabs(path) else os.path.join(cwd, path)


def _stdin(mode: str, gtid: int, cwd: str, fields: dict[str, str]) -> str:
    if mode == "":
        return "srun" if gtid == 0 else "/dev/null"
    if mode.lower() == "all":
        return "srun"
    if mode.isdigit():
        return "srun" if int(mode) == gtid else "/dev/null"
    return _stream(mode, cwd, fields)


def step_memory(job: jobs_pb2.JobInfo, step: jobs_pb2.JobStep, node: str) -> int:
    """MB the step holds on `node`: its own --mem/--mem-per-cpu there, else all the job's memory
    there (22.05: `srun -n1` in a 4000 MB job gets `ulimit -m` 4096000, `srun --mem=300` 307200)."""
    part = next((p for p in step.layout if p.node == node), None)
    if part is not None and part.mem_mb:
        return part.mem_mb
    return next((a.mem_mb for a in job.allocation if a.node == node), 0)


def build_step_spec(
    req: node_pb2.LaunchTasksRequest,
    node: str,
    kill_wait: float,
    isolation: Isolation | None = None,
    gpu_cpus: Mapping[int, Sequence[int]] | None = None,
    identity: Mapping[str, str] | None = None,
    hooks: HookConfig | None = None,
) -> StepSpec:
    job, step = req.job, req.step
    launch = step.launch
    euid = os.geteuid()
    if euid != 0 and job.user_id != euid:
        raise LaunchRefused(f"shoal-noded runs as uid {euid} and can only run its own jobs")
    try:
        pw = pwd.getpwuid(job.user_id)
    except KeyError:
        raise LaunchRefused(f"User id {job.user_id} not found on node {node}") from None
    if not launch.argv:
        raise LaunchRefused("No command given")
    groups = os.getgrouplist(pw.pw_name, job.group_id) if euid == 0 else []
    base_env = {
        "HOME": pw.pw_dir,
        "USER": pw.pw_name,
        "LOGNAME": pw.pw_name,
        "SHELL": pw.pw_shell or "/bin/sh",
        "PATH": DEFAULT_PATH,
    }
    constrained = isolation is not None and isolation.devices_constrained
    try:
        envs = task_environments(req, node, base_env, devices_constrained=constrained, gpu_cpus=gpu_cpus)
    except GpuBindError as exc:
        raise LaunchRefused(str(exc)) from None
    extra: dict[str, object] = {}
    if isolation is not None:  # the step's cgroup inside the job's (which is made if no batch script did)
        alloc = next((a for a in job.allocation if a.node == node), None)
        extra["cgroup"] = cgroup_request(isolation, node, job.job_id, alloc).to_dict()
        extra["step_cgroup"] = step_cgroup_request(isolation, req, node).to_dict()
    if identity:  # an emulated node of a local cluster: its own hostname and /etc/hosts (noded.nodens)
        extra["node_ns"] = dict(identity)
    if hooks is not None and hooks.task_prolog:
        extra["task_prolog"] = hooks.task_prolog
    if hooks is not None and hooks.task_epilog:
        extra["task_epilog"] = hooks.task_epilog
    propagated = hooks.rlimits if hooks is not None else frozenset(rlimits.LIMITS)
    limits: dict[str, tuple[int, bool]] = {}
    for env in envs.values():  # the same in every task: srun's
        limits = rlimits.job_limits(env, propagated)
    if limits:
        extra["rlimits"] = limits
    cap = rlimits.memory_cap(step_memory(job, step, node))
    if cap:
        extra["memory_cap"] = cap
    cwd = launch.cwd or job.spec.work_dir or pw.pw_dir
    index = next(i for i, n in enumerate(step.layout) if n.node == node)
    tasks = []
    for gtid, env in envs.items():
        fields = {
            "j": str(job.job_id),
            "J": str(job.job_id),
            "s": str(step.step_id),
            "t": str(gtid),
            "n": str(index),
            "N": node,
            "u": pw.pw_name,
            "x": job.spec.name,
            "A": str(job.array_job_id or job.job_id),
            "a": str(max(job.array_task_id, 0)),
        }
        tasks.append(
            TaskSpec(
                gtid=gtid,
                env=env,
                stdin=_stdin(launch.std_in, gtid, cwd, fields),
                stdout=_stream(launch.std_out, cwd, fields),
                stderr=_stream(launch.std_err or launch.std_out, cwd, fields),
            )
        )
    return StepSpec(
        job_id=job.job_id,
        step_id=step.step_id,
        node=node,
        uid=job.user_id,
        gid=job.group_id,
        groups=groups,
        cwd=cwd,
        argv=list(launch.argv),
        tasks=tasks,
        io_host=launch.io_host,
        io_port=launch.io_port,
        io_token=launch.io_token,
        unbuffered=launch.unbuffered,
        open_mode="append" if launch.open_mode == "append" else "truncate",
        umask=launch.umask or 0o022,
        kill_wait=kill_wait,
        extra=extra,
    )


def launch_tasks(
    req: node_pb2.LaunchTasksRequest,
    node: str,
    spool_root: Path,
    kill_wait: float,
    isolation: Isolation | None = None,
    gpu_cpus: Mapping[int, Sequence[int]] | None = None,
    identity: Mapping[str, str] | None = None,
    hooks: HookConfig | None = None,
) -> None:
    """Start this node's tasks of the step under their own supervisor. Idempotent per step.

    A job this node was told to end (TerminateJob's cancel marker, newer than this run's start)
    starts no more steps, even when the launch arrives after the terminate."""
    spec = build_step_spec(req, node, kill_wait, isolation, gpu_cpus, identity, hooks)
    if _job_ended_here(spool_root, req.job):
        raise LaunchRefused(STEP_OF_ENDED_JOB)
    path = step_dir(spool_root, spec.job_id, spec.step_id)
    while True:
        try:
            os.mkdir(path, 0o700)
            break
        except FileExistsError:
            if not _wait_for_earlier_run(path, req.job):
                return  # this run's step is here already: a repeated launch
        except OSError as exc:
            raise LaunchFailed(f"cannot create {path}: {exc.strerror}") from exc
    try:
        spec.save(path / "tasks.json")
        code = stepd_spawn.spawn(path / "tasks.json")
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(path, ignore_errors=True)
        raise LaunchFailed(f"cannot start slurmstepd for StepId={spec.job_id}.{spec.step_id}: {exc}") from exc
    if code != 0:
        shutil.rmtree(path, ignore_errors=True)
        raise LaunchFailed(f"slurmstepd for StepId={spec.job_id}.{spec.step_id} did not start")
    if _job_ended_here(spool_root, req.job):
        # TerminateJob arrived while the supervisor started (it found no pid to signal): end it now
        signal_steps(spool_root, spec.job_id, spec.step_id, 0)
        raise LaunchRefused(STEP_OF_ENDED_JOB)


def _wait_for_earlier_run(path: Path, job: jobs_pb2.JobInfo) -> bool:
    """True once the step directory `path`, left by a run before a requeue, is gone; False when it is
    this run's. A requeued job starts again while its previous run's tasks may still be in their
    KillWait (they caught the SIGTERM) and that run numbers its steps from 0 too: launching over it
    would start nothing and leave srun waiting for tasks forever."""
    deadline = time.monotonic() + EARLIER_RUN_WAIT_S
    while True:
        try:
            if (path / "tasks.json").stat().st_mtime >= job.start_time - 1:
                return False
        except FileNotFoundError:
            if not path.exists():
                return True
        except OSError:
            return False
        if time.monotonic() >= deadline:
            raise LaunchFailed(
                f"StepId={job.job_id}.{path.name.rsplit('.', 1)[1]} of the job's previous run "
                "is still ending on this node"
            )
        time.sleep(0.1)


def _job_ended_here(spool_root: Path, job: jobs_pb2.JobInfo) -> bool:
    """A cancel marker from this run of the job (an older one belongs to a run before a requeue)."""
    try:
        return spool.cancel_marker(spool_root, job.job_id).stat().st_mtime >= job.start_time - 1
    except OSError:
        return False


def _step_dirs(spool_root: Path, job_id: int) -> list[Path]:
    prefix = f"{STEP_PREFIX}{job_id}."
    try:
        return [p for p in Path(spool_root).iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []


def signal_steps(spool_root: Path, job_id: int, step_id: int | None, sig: int) -> int:
    """Signal the supervisors of a job's steps (all, or one); SIGTERM there ends the tasks.

    sig 0 means terminate. Returns how many supervisors were signalled.
    """
    count = 0
    for path in _step_dirs(spool_root, job_id):
        if step_id is not None and path.name != step_dir(spool_root, job_id, step_id).name:
            continue
        pid = spool.live_pid(path / spool.STEPD_PID)
        if pid is None:
            continue
        try:
            if sig == 0:
                os.kill(pid, signal.SIGTERM)
            else:
                _signal_tasks(pid, sig)
            count += 1
        except (ProcessLookupError, OSError):
            continue
    return count


def _signal_tasks(stepd_pid: int, sig: int) -> None:
    """Deliver a signal to every task of a step: its supervisor's children lead their groups."""
    try:
        children = Path(f"/proc/{stepd_pid}/task/{stepd_pid}/children").read_text().split()
    except OSError:
        return
    for child in children:
        try:
            os.killpg(int(child), sig)
        except (ProcessLookupError, PermissionError, ValueError):
            pass


def terminate_steps(spool_root: Path, job_id: int) -> int:
    return signal_steps(spool_root, job_id, None, 0)


def running_step_jobs(spool_root: Path) -> list[int]:
    """Jobs with a step whose supervisor runs here (on a node without the batch script too: what
    ctld compares with its records to end what runs of ended jobs)."""
    found: set[int] = set()
    try:
        paths = list(Path(spool_root).iterdir())
    except OSError:
        return []
    for path in paths:
        name = path.name
        if not name.startswith(STEP_PREFIX):
            continue
        job_text = name[len(STEP_PREFIX) :].partition(".")[0]
        if job_text.isdigit() and spool.live_pid(path / spool.STEPD_PID) is not None:
            found.add(int(job_text))
    return sorted(found)


def reap_lost_steps(spool_root: Path, now: float | None = None) -> list[str]:
    """Steps whose supervisor died (kill -9) without cleaning up: their tasks are killed, their
    cgroups and directories removed, as when a step ends. The step directories reaped."""
    now = time.time() if now is None else now
    reaped: list[str] = []
    try:
        paths = [p for p in Path(spool_root).iterdir() if p.name.startswith(STEP_PREFIX)]
    except OSError:
        return reaped
    for path in paths:
        pid_file = path / spool.STEPD_PID
        if spool.live_pid(pid_file) is not None:
            continue
        if not pid_file.exists():
            try:  # a supervisor starting now has not written its pid yet
                if now - path.stat().st_mtime < STARTING_GRACE_S:
                    continue
            except OSError:
                continue
        spec = spool.read_json(path / "tasks.json") or {}
        extra = spec.get("extra")
        reap.kill_all(reap.owned_id(pid_file))
        if isinstance(extra, dict) and isinstance(extra.get("step_cgroup"), dict):
            reap.remove_cgroup(extra["step_cgroup"])  # and the job's group with it when it was the last
        shutil.rmtree(path, ignore_errors=True)
        reaped.append(path.name)
    return reaped
