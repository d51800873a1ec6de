"""Starting a job's (or a step's) supervisor: `python -m noded.stepd PATH`, or a fork of a warm one.

Starting the supervisor as a new interpreter costs ~50 ms of CPU per job (interpreter + imports),
the largest part of what a short job costs a node. noded therefore keeps one single-threaded
"stepd fork server" (this module run as `python -m noded.stepd_spawn --fd N`) with noded.stepd
imported: for each launch it forks a child that becomes the supervisor, as `python -m noded.stepd
PATH` would (its own session, stdio on /dev/null), waits until it has recorded its pid and reports
0 (or 1 when it died first). The supervisor is the server's child, never waited for (SIGCHLD is
ignored: the kernel reaps it); `python -m noded.stepd` needs a second fork to detach, this does not.

noded is multi-threaded (gRPC), so it never forks itself; the server is a fresh process it starts
before serving. When the server is not running (not started, died, timed out), `spawn` falls back
to the new interpreter: slower, same result. The server exits when noded's end of its socket
closes; the supervisors it forked live on (they are in their own sessions), as before.

Protocol over a socketpair: noded sends "<id> <path>\\n"; the server answers "<id> <code>\\n".
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path
from typing import NoReturn

from shoal.forking import fork_child

log = logging.getLogger("shoal.noded.stepd_spawn")

SPAWN_TIMEOUT_S = 30.0


class _ForkServer:
    """noded's handle on the running server: one request at a time, under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._file: object = None
        self._next_id = 0

    def start(self) -> None:
        with self._lock:
            self._start()

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "noded.stepd_spawn", "--fd", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                cwd="/",
                close_fds=True,
            )
        except OSError as exc:
            log.warning("cannot start the stepd fork server: %s", exc)
            ours.close()
            return
        finally:
            theirs.close()
        self._sock = ours

    def stop(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the server sees EOF and exits
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def spawn(self, path: Path) -> int | None:
        """The exit code of a forked `noded.stepd PATH`, or None when the server cannot answer."""
        with self._lock:
            if self._sock is None or self._proc is None:
                return None
            if self._proc.poll() is not None:
                log.warning("the stepd fork server exited (status %s); restarting it", self._proc.returncode)
                self._close()
                self._start()
                if self._sock is None:
                    return None
            self._next_id += 1
            request_id = self._next_id
            try:
                self._sock.settimeout(SPAWN_TIMEOUT_S)
                self._sock.sendall(f"{request_id} {path}\n".encode())
                return self._answer(request_id)
            except (OSError, ValueError) as exc:
                log.warning("stepd fork server failed (%s); starting supervisors directly", exc)
                self._close()
                return None

    def _answer(self, request_id: int) -> int:
        assert self._sock is not None
        buf = b""
        while True:
            chunk = self._sock.recv(4096)
            if not chunk:
                raise ConnectionError("the stepd fork server closed its socket")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                answered, code = line.split()
                if int(answered) == request_id:
                    return int(code)


_server = _ForkServer()


def start_fork_server() -> None:
    """Start the warm server (noded does, before serving); without it every launch starts Python."""
    _server.start()


def stop_fork_server() -> None:
    _server.stop()


def spawn(path: Path) -> int:
    """Start the supervisor for `path` (launch.json or tasks.json); its exit code (0: pid recorded)."""
    code = _server.spawn(path)
    if code is not None:
        return code
    result = subprocess.run(
        [sys.executable, "-m", "noded.stepd", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        cwd="/",
        timeout=SPAWN_TIMEOUT_S,
        check=False,
    )
    return result.returncode


# -- the server process -----------------------------------------------------------------------


def _run_one(path: str, sock: socket.socket, ready_w: int) -> NoReturn:
    """In the forked child: become the supervisor of `path`, from a clean slate, as
    `python -m noded.stepd PATH` would (there a second fork detaches it; here the server's child
    is the supervisor itself: the server never waits for it, the kernel reaps it)."""
    os.close(sock.detach())  # the supervisor and the job must not hold noded's socket
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    fd = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(fd, target)
    if fd > 2:
        os.close(fd)
    random.seed()
    from noded import stepd

    launch = Path(path).resolve()
    stepd.become_supervisor(launch, ready_w, stepd.body_for(launch))


def serve(sock_fd: int) -> int:
    """Answer launch requests until noded's end closes."""
    from noded import stepd, taskd  # noqa: F401  (what every child needs, imported once)

    # The supervisors are this server's children but it never waits for them: the kernel reaps
    # them (each child sets SIGCHLD back to the default before it forks the job).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    os.set_inheritable(sock_fd, False)
    sock = socket.socket(fileno=sock_fd)
    reader = sock.makefile("rb")
    for line in reader:
        try:
            request_id, path = line.decode().rstrip("\n").split(" ", 1)
        except (UnicodeDecodeError, ValueError):
            continue
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        try:
            fork_child(partial(_run_one, path, sock, ready_w))
        except OSError:
            pass  # no supervisor: EOF below
        finally:
            os.close(ready_w)
        ready = os.read(ready_r, 1)  # the supervisor wrote stepd.pid (or died trying: EOF)
        os.close(ready_r)
        code = 0 if ready else 1
        try:
            sock.sendall(f"{request_id} {code}\n".encode())
        except OSError:
            return 0
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--fd":
        print("usage: python -m noded.stepd_spawn --fd N", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # noded's Ctrl-C is noded's; our end is its socket
    return serve(int(args[1]))


if __name__ == "__main__":
    sys.exit(main())
