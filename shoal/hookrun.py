"""Running an admin's script the way Slurm runs its prologs, epilogs and health checks.

A script runs in its own session with exactly the environment it is given (Slurm sets no PATH), on
a timeout after which its whole process group is killed; what it leaves in its session is killed
when it ends. A Prolog/Epilog-style setting is a list of paths and globs: a glob runs every match in
sorted order, a plain path that is missing or not executable fails ("can not be executed"), and the
first failure stops the rest. Shared by noded (Prolog, Epilog, Task*, HealthCheckProgram) and ctld
(PrologSlurmctld, EpilogSlurmctld). Standard library only: noded's stepd imports it.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

NO_TIMEOUT = (0, 65534)  # PrologEpilogTimeout values that mean "no limit", as in Slurm
_GLOB_CHARS = ("*", "?", "[")


@dataclass(frozen=True)
class HookResult:
    """How a script (or a list of them) ended; `message` says why it failed, for logs and ctld."""

    ok: bool
    message: str = ""
    stdout: str = ""


@dataclass(frozen=True)
class RunAs:
    """A user to become before exec; None = stay who the caller is."""

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
    prefix: Sequence[str] = (),
    preexec: Callable[[], None] | None = None,
    run_as: RunAs | None = None,
    cwd: str = "/",
) -> HookResult:
    """Run one script to its end (or its timeout); `what` names it in messages ("prolog").

    `prefix`: a program that execs the script (argv prefix); `preexec`: Python run between fork and
    exec (single-threaded callers only). Without a preexec, `run_as` is applied between fork and exec
    in C, which is safe in a threaded daemon; with one, the preexec must switch the user itself."""
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return HookResult(False, f"{what} {path} can not be executed")
    switch = run_as is not None and preexec is None and os.geteuid() == 0 and run_as.uid != 0
    try:
        proc = subprocess.Popen(  # noqa: S603 - the admin's configured script
            [*prefix, path],
            env=dict(env),
            cwd=cwd if os.path.isdir(cwd) else "/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec,
            user=run_as.uid if switch and run_as else None,
            group=run_as.gid if switch and run_as else None,
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
        status = (
            f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        )
        detail = err.decode(errors="replace").strip().splitlines()
        tail = f": {detail[-1]}" if detail else ""
        return HookResult(False, f"{what} {path} failed ({status}){tail}", stdout)
    return HookResult(True, "", stdout)


def run_all(
    specs: Sequence[str],
    env: Mapping[str, str],
    timeout: float | None,
    what: str,
    run: Callable[[str], HookResult] | None = None,
) -> HookResult:
    """Run every script a setting names, in order; stop at the first that fails. `run(path)` runs one
    (default: run_script with `env`, `timeout` and `what`, as the caller)."""
    for path in expand(specs):
        result = run(path) if run is not None else run_script(path, env, timeout, what)
        if not result.ok:
            return result
    return HookResult(True)
