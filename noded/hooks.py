"""Running the admin's scripts around jobs and nodes: Prolog, Epilog, TaskProlog, TaskEpilog and
HealthCheckProgram, as Slurm's slurmd and slurmstepd run them.

A script runs in its own session with the environment it is given (Slurm sets no PATH for it),
on a timeout after which its whole process group is killed. A Prolog/Epilog setting is a
comma-separated list of paths and globs; a glob runs every match in sorted order, a plain path
that is missing or not executable fails (Slurm: "can not be executed"). The first failure stops
the rest. Standard library only: stepd imports it and must start fast.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

NO_TIMEOUT = (0, 65534)  # PrologEpilogTimeout values that mean "no limit", as in Slurm
HEALTH_CHECK_TIMEOUT_S = 60  # Slurm kills a HealthCheckProgram that runs longer
TASK_HOOK_TIMEOUT_S = None  # TaskProlog/TaskEpilog run as long as they take, as in Slurm
_GLOB_CHARS = ("*", "?", "[")


@dataclass(frozen=True)
class HookConfig:
    """The scripts slurm.conf names for a node's jobs (noded fills it once, at start)."""

    prolog: tuple[str, ...] = ()
    epilog: tuple[str, ...] = ()
    task_prolog: str = ""
    task_epilog: str = ""
    timeout: int = 65534  # PrologEpilogTimeout
    cluster_name: str = ""
    slurm_conf: str = ""


@dataclass(frozen=True)
class HookResult:
    """How a script (or a list of them) ended; `message` says why it failed, for logs and ctld."""

    ok: bool
    message: str = ""
    stdout: str = ""


@dataclass(frozen=True)
class RunAs:
    """A user to become before exec (TaskProlog/TaskEpilog); None = stay root."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()


def expand(specs: Iterable[str]) -> list[str]:
    """The scripts a Prolog/Epilog setting names, in order: globs expanded and sorted, plain paths as given."""
    paths: list[str] = []
    for spec in specs:
        if any(ch in spec for ch in _GLOB_CHARS):
            paths.extend(sorted(glob.glob(spec)))
        else:
            paths.append(spec)
    return paths


def timeout_of(seconds: int) -> float | None:
    """PrologEpilogTimeout as a subprocess timeout (None: no limit)."""
    return None if seconds in NO_TIMEOUT or seconds < 0 else float(seconds)


def _preexec(node_ns: Mapping[str, str] | None, run_as: RunAs | None) -> None:
    """In the child before exec: the node's namespaces (an emulated node's hostname), then the user."""
    if node_ns:
        from noded import nodens

        nodens.enter(node_ns)
    if run_as is not None and os.geteuid() == 0:
        os.setgroups(list(run_as.groups))
        os.setgid(run_as.gid)
        os.setuid(run_as.uid)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
    """Run one script to its end (or its timeout); `what` names it in messages ("prolog").

    `threaded`: the caller has other threads (noded), so no Python runs between fork and exec: an
    emulated node's namespaces are entered by `noded/nodens.py --exec` instead (as root only)."""
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return HookResult(False, f"{what} {path} can not be executed")
    argv = [path]
    preexec = None
    if node_ns and threaded:
        from noded import nodens  # run as a file: the script's environment names no PYTHONPATH

        argv = [sys.executable, "-P", "-S", os.path.abspath(nodens.__file__), "--exec",
                node_ns.get("hostname", ""), node_ns.get("hosts", ""), "--", path]
    elif node_ns:
        def preexec() -> None:
            _preexec(node_ns, run_as)
    # without a preexec, the user is switched between fork and exec in C (safe with threads)
    switch = run_as is not None and preexec is None and os.geteuid() == 0
    try:
        proc = subprocess.Popen(  # noqa: S603 - the admin's configured script
            argv, env=dict(env), cwd=cwd if os.path.isdir(cwd) else "/", stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec,
            user=run_as.uid if switch and run_as else None, group=run_as.gid if switch and run_as else None,
            extra_groups=list(run_as.groups) if switch and run_as else None,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return HookResult(False, f"{what} {path} can not be executed: {exc}")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return HookResult(False, f"{what} {path} killed after {timeout:g} s (timeout)")
    _kill_group(proc)  # what the script left behind in its session goes with it
    stdout = out.decode(errors="replace")
    if proc.returncode != 0:
        status = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                  else f"exit code {proc.returncode}")
        detail = err.decode(errors="replace").strip().splitlines()
        tail = f": {detail[-1]}" if detail else ""
        return HookResult(False, f"{what} {path} failed ({status}){tail}", stdout)
    return HookResult(True, "", stdout)


def run_all(
    specs: Sequence[str],
    env: Mapping[str, str],
    timeout: float | None,
    what: str,
    *,
    node_ns: Mapping[str, str] | None = None,
    threaded: bool = False,
) -> HookResult:
    """Run every script a setting names, in order, as root; stop at the first that fails."""
    for path in expand(specs):
        result = run_script(path, env, timeout, what, node_ns=node_ns, threaded=threaded)
        if not result.ok:
            return result
    return HookResult(True)


def apply_task_prolog(output: str, env: dict[str, str]) -> list[str]:
    """TaskProlog's stdout applied to the task's environment, as Slurm documents: `export NAME=value`
    sets, `unset NAME` removes, `print TEXT` is written to the task's stdout (returned, in order);
    other lines are ignored."""
    printed: list[str] = []
    for line in output.splitlines():
        if line.startswith("export "):
            name, sep, value = line[len("export "):].strip().partition("=")
            if sep and name:
                env[name] = value
        elif line.startswith("unset "):
            env.pop(line[len("unset "):].strip(), None)
        elif line.startswith("print "):
            printed.append(line[len("print "):])
    return printed


def run_task_prolog(path: str, env: dict[str, str], cwd: str) -> None:
    """In a task's process, already the user, before exec: TaskProlog's `export`/`unset` lines change
    `env`, its `print` lines go to the task's stdout (fd 1). A failing TaskProlog does not stop the task."""
    if not path:
        return
    result = run_script(path, {**env, "SLURM_SCRIPT_CONTEXT": "prolog_task"}, TASK_HOOK_TIMEOUT_S, "task prolog",
                        cwd=cwd)
    for line in apply_task_prolog(result.stdout, env):
        os.write(1, f"{line}\n".encode())


def run_task_epilog(path: str, env: Mapping[str, str], cwd: str, node_ns: Mapping[str, str] | None,
                    run_as: RunAs | None) -> None:
    """After a task ended, as its user in its environment (the output is dropped, as in Slurm)."""
    if path:
        run_script(path, {**env, "SLURM_SCRIPT_CONTEXT": "epilog_task"}, TASK_HOOK_TIMEOUT_S, "task epilog",
                   node_ns=node_ns, run_as=run_as if os.geteuid() == 0 else None, cwd=cwd)
