"""The node's hooks around jobs: Prolog, Epilog, TaskProlog, TaskEpilog and HealthCheckProgram, as
Slurm's slurmd and slurmstepd run them (the runner itself is shoal.hookrun).

What noded adds: an emulated node's own namespaces (its hostname, under --node-namespaces), entered
between fork and exec where the caller is single-threaded (stepd) or by `noded/nodens.py --exec`
where it is not (noded), and TaskProlog's output applied to the task. Standard library only: stepd
imports it and must start fast.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from shoal.hookrun import HookResult, RunAs, expand, timeout_of
from shoal.hookrun import run_all as _run_all
from shoal.hookrun import run_script as _run_script
from shoal.rlimits import LIMITS

__all__ = [
    "HookConfig",
    "HookResult",
    "RunAs",
    "apply_task_prolog",
    "expand",
    "run_all",
    "run_script",
    "run_task_epilog",
    "run_task_prolog",
    "serial",
    "timeout_of",
]

HEALTH_CHECK_TIMEOUT_S = 60  # Slurm kills a HealthCheckProgram that runs longer
TASK_HOOK_TIMEOUT_S = None  # TaskProlog/TaskEpilog run as long as they take, as in Slurm


@dataclass(frozen=True)
class HookConfig:
    """The scripts slurm.conf names for a node's jobs, and its RebootProgram (noded fills it at start
    and at each reconfigure)."""

    prolog: tuple[str, ...] = ()
    epilog: tuple[str, ...] = ()
    task_prolog: str = ""
    task_epilog: str = ""
    timeout: int = 65534  # PrologEpilogTimeout
    cluster_name: str = ""
    slurm_conf: str = ""
    flags: tuple[str, ...] = ()  # PrologFlags, upper-case (shoal.conf.slurm)
    reboot_program: str = ""  # RebootProgram (noded.reboot)
    rlimits: frozenset[str] = frozenset(LIMITS)  # the limits propagated to jobs (shoal.rlimits)

    @property
    def at_allocation(self) -> bool:
        """PrologFlags=Alloc (or a flag implying it): ctld has the Prolog run when the job is allocated."""
        return "ALLOC" in self.flags


SERIAL_LOCK = "hooks.lock"  # in the node's spool: PrologFlags=Serial's one-at-a-time lock


@contextmanager
def serial(spool_root: str | Path, enabled: bool) -> Iterator[None]:
    """PrologFlags=Serial: one Prolog or Epilog at a time on the node (an flock, so noded's and every
    stepd's runs wait for each other); without the flag the scripts of different jobs run at once."""
    if not enabled:
        yield
        return
    fd = os.open(Path(spool_root) / SERIAL_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _enter(node_ns: Mapping[str, str], run_as: RunAs | None) -> None:
    """In the child before exec: the node's namespaces (an emulated node's hostname), then the user."""
    from noded import nodens

    nodens.enter(node_ns)
    if run_as is not None and os.geteuid() == 0:
        os.setgroups(list(run_as.groups))
        os.setgid(run_as.gid)
        os.setuid(run_as.uid)


def run_script(
    path: str,
    env: Mapping[str, str],
    timeout: float | None,
    what: str,
    *,
    node_ns: Mapping[str, str] | None = None,
    run_as: RunAs | None = None,
    cwd: str = "/",
    threaded: bool = False,
) -> HookResult:
    """shoal.hookrun.run_script in the node's namespaces when it has its own (`node_ns`).

    `threaded`: the caller has other threads (noded), so no Python runs between fork and exec: the
    namespaces are entered by `noded/nodens.py --exec` instead (as root only)."""
    if node_ns and threaded:
        from noded import nodens  # run as a file: the script's environment names no PYTHONPATH

        prefix = [
            sys.executable,
            "-P",
            "-S",
            os.path.abspath(nodens.__file__),
            "--exec",
            node_ns.get("hostname", ""),
            node_ns.get("hosts", ""),
            "--",
        ]
        return _run_script(path, env, timeout, what, prefix=prefix, run_as=run_as, cwd=cwd)
    if node_ns:
        ns = dict(node_ns)
        return _run_script(path, env, timeout, what, preexec=lambda: _enter(ns, run_as), cwd=cwd)
    return _run_script(path, env, timeout, what, run_as=run_as, cwd=cwd)


def run_all(
    specs: Sequence[str],
    env: Mapping[str, str],
    timeout: float | None,
    what: str,
    *,
    node_ns: Mapping[str, str] | None = None,
    threaded: bool = False,
) -> HookResult:
    """Every script a Prolog/Epilog setting names, in order, as root; the first failure stops the rest."""
    return _run_all(
        specs,
        env,
        timeout,
        what,
        lambda path: run_script(path, env, timeout, what, node_ns=node_ns, threaded=threaded),
    )


def apply_task_prolog(output: str, env: dict[str, str]) -> list[str]:
    """TaskProlog's stdout applied to the task's environment, as Slurm documents: `export NAME=value`
    sets, `unset NAME` removes, `print TEXT` is written to the task's stdout (returned, in order);
    other lines are ignored."""
    printed: list[str] = []
    for line in output.splitlines():
        if line.startswith("export "):
            name, sep, value = line[len("export ") :].strip().partition("=")
            if sep and name:
                env[name] = value
        elif line.startswith("unset "):
            env.pop(line[len("unset ") :].strip(), None)
        elif line.startswith("print "):
            printed.append(line[len("print ") :])
    return printed


def run_task_prolog(path: str, env: dict[str, str], cwd: str) -> None:
    """In a task's process, already the user, before exec: TaskProlog's `export`/`unset` lines change
    `env`, its `print` lines go to the task's stdout (fd 1). A failing TaskProlog does not stop the task."""
    if not path:
        return
    result = run_script(
        path, {**env, "SLURM_SCRIPT_CONTEXT": "prolog_task"}, TASK_HOOK_TIMEOUT_S, "task prolog", cwd=cwd
    )
    for line in apply_task_prolog(result.stdout, env):
        os.write(1, f"{line}\n".encode())


def run_task_epilog(
    path: str, env: Mapping[str, str], cwd: str, node_ns: Mapping[str, str] | None, run_as: RunAs | None
) -> None:
    """After a task ended, as its user in its environment (the output is dropped, as in Slurm)."""
    if path:
        run_script(
            path,
            {**env, "SLURM_SCRIPT_CONTEXT": "epilog_task"},
            TASK_HOOK_TIMEOUT_S,
            "task epilog",
            node_ns=node_ns,
            run_as=run_as if os.geteuid() == 0 else None,
            cwd=cwd,
        )
