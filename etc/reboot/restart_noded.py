#!/usr/bin/env python3
"""RebootProgram for emulated nodes (`shoal up`, the e2e clusters): "reboots" a node by restarting the
shoal-noded that serves it, which then registers it again with a new boot time. Never on a real node:
there RebootProgram reboots the machine (RebootProgram=/usr/sbin/reboot).

    RebootProgram=/path/to/shoal/etc/reboot/restart_noded.py        # slurm.conf, or shoal up --set

- Its node: SLURMD_NODENAME, which shoal-noded sets for the programs it runs (an emulated node's noded
  also marks the node's spool before it runs this, and the next noded to start takes its start as that
  node's boot time: noded/reboot.py). One noded serves every emulated node of `shoal up`: all of them
  register again, only the rebooted ones with a new boot time; running jobs live on under their stepd.
- Its noded: the nearest ancestor process that runs shoal-noded.
- What it does: it leaves noded's session (noded kills what its RebootProgram leaves behind) and exits
  0 at once; a moment later (reboots issued together reach noded first) it stops noded (SIGTERM, SIGKILL
  after 30 s) and starts it again with the same command line, environment and working directory, its
  output appended where the old one's went. Reboots of several nodes at once restart it once.

Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

GATHER_S = 1.0  # before stopping noded: the other reboots issued with this one arrive
PAUSE_S = 1.0  # between the old noded's end and the new one's start: the "reboot"
STOP_WAIT_S = 30.0


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return [part.decode(errors="surrogateescape") for part in fh.read().split(b"\0") if part]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def find_noded(pid: int) -> int | None:
    """The nearest ancestor of `pid` (itself included) that runs shoal-noded."""
    while pid > 1:
        try:
            argv = _cmdline(pid)
            if "noded.main" in argv or (argv and os.path.basename(argv[0]) == "shoal-noded"):
                return pid
            pid = _parent(pid)
        except (OSError, ValueError, IndexError):
            return None
    return None


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        pairs = [part.split(b"=", 1) for part in fh.read().split(b"\0") if b"=" in part]
    return {k.decode(errors="surrogateescape"): v.decode(errors="surrogateescape") for k, v in pairs}


def _output(pid: int, fd: int) -> str:
    """Where the noded's stdout/stderr went, if a regular file (else /dev/null)."""
    try:
        path = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return os.devnull
    return path if path.startswith("/") and os.path.isfile(path) else os.devnull


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def restart(pid: int, argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    claim = f"/tmp/.shoal-noded-{pid}.restart"
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return  # another node's reboot restarts this noded
    try:
        time.sleep(GATHER_S)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        time.sleep(PAUSE_S)
        with open(out, "ab") as stdout, open(err, "ab") as stderr:
            subprocess.Popen(  # noqa: S603 - the command line noded was started with
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
    finally:
        os.unlink(claim)


def main() -> int:
    node = os.environ.get("SLURMD_NODENAME", "")
    pid = find_noded(os.getppid())
    if pid is None:
        print(f"restart_noded: node {node or '?'}: not run by shoal-noded", file=sys.stderr)
        return 1
    try:
        argv, env = _cmdline(pid), _environ(pid)
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError as exc:
        print(f"restart_noded: cannot read shoal-noded's process {pid}: {exc}", file=sys.stderr)
        return 1
    out, err = _output(pid, 1), _output(pid, 2)
    if os.fork():
        return 0  # noded's RebootProgram has run; the restart goes on outside its session
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # noded reads the program's output until every copy of it is closed
        os.dup2(devnull, fd)
    try:
        restart(pid, argv, env, cwd, out, err)
    finally:
        os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
