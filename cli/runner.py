"""The command runner: a warm process that forks to run a short command for a local caller.

A Python command spends 60-100 ms starting the interpreter and importing protobuf before it does
any work; Slurm's C commands take 5-10 ms in all. The local agent therefore starts this runner
beside itself (on `<agent socket>.run`). It imports the short commands once, then for every
connection from the native launcher (cli/native/command.c) forks a child that:

1. reads the request: command name, working directory, umask, argv, environment, and the caller's
   stdin/stdout/stderr passed as file descriptors (SCM_RIGHTS);
2. becomes the caller, whose uid and gid come from the kernel (SO_PEERCRED), never from the
   request: supplementary groups from the group database, then gid, then uid;
3. runs `cli.<command>.main()` exactly as the console script would, and reports the exit status.

The runner never runs a command itself, so nothing one command does is seen by the next. A runner
that cannot become the caller (it is not root and the caller is someone else) answers "F" and the
launcher runs the plain Python command instead.

The fork is kept off a command's path: the runner keeps SPARES children forked ahead, each waiting
in accept() on the runner's socket. The spare that takes a connection hands a copy of it to the
runner (which reports the wait status, and kills the command if its launcher goes away), runs that one
command and exits; the runner forks the next spare meanwhile. Spares that keep dying before taking a
connection are given up: the runner then accepts and forks per connection, as it does with SPARES=0.

Wire format (little-endian u32 lengths): request = b"SHR1", str name, str cwd, str umask (octal),
u32 argc, argc x str, u32 envc, envc x str ("KEY=VALUE"); str = u32 length + UTF-8/bytes. Replies
are records of one tag byte and one u32: b"P" child pid, b"F" declined (nothing ran), b"X" wait
status (the first X counts; the child sends its own exit code, the runner the real wait status).
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import errno
import functools
import gc
import importlib
import io
import logging
import os
import pwd
import random
import select
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

from cli.command import COMMANDS
from shoal import rlimits
from shoal.agent.protocol import RUNNER_CANNOT_LISTEN, remove_socket_if_ours
from shoal.forking import fork_child

log = logging.getLogger("shoal.runner")

REQUEST_MAGIC = b"SHR1"
MAX_REQUEST = 16 * 1024 * 1024  # argv + environment; Linux's own limit for exec is far lower
REQUEST_TIMEOUT = 10.0
# Children forked ahead, waiting for a connection; given up after this many die in a row untaken.
SPARES = 2
SPARE_DEATHS = 5
PR_SET_PDEATHSIG = 1
_U32 = struct.Struct("<I")
_UCRED = struct.Struct("3i")

# Imported once in the runner so that children start with them loaded (what each command imports
# lazily while it runs, too).
PRELOAD = (
    *(f"cli.{name}" for name in COMMANDS),
    "cli.fmt",
    "cli.show",
    "cli.options",
    "cli.reservations",
    "cli.stepshow",
    "shoal.agent.client",
    "shoal.v1.controller_pb2",
    "shoal.v1.jobs_pb2",
    "shoal.v1.cluster_pb2",
    "shoal.v1.common_pb2",
    "shoal.timefmt",
    "shoal.sizefmt",
    "shoal.hostlist",
    "shoal.states",
    "shoal.arrayspec",
    "shoal.outpath",
    "argparse",
    "shlex",
    "getpass",
    "pwd",
    "grp",
    "json",
    "datetime",
)


class RequestError(Exception):
    """A malformed or oversized request: the child exits without running anything."""


# -- the request ----------------------------------------------------------------------------------


class _Reader:
    """Reads the request from the connection; the first chunk carries the caller's three fds."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.data = bytearray()
        self.pos = 0
        self.fds: list[int] = []

    def _fill(self, need: int) -> None:
        while len(self.data) - self.pos < need:
            if len(self.data) > MAX_REQUEST:
                raise RequestError("request too large")
            if not self.fds and not self.data:
                chunk, fds, _flags, _addr = socket.recv_fds(self.conn, 65536, 3)
                self.fds = list(fds)
            else:
                chunk = self.conn.recv(65536)
            if not chunk:
                raise RequestError("request cut short")
            self.data += chunk

    def u32(self) -> int:
        self._fill(4)
        (value,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def raw(self, n: int) -> bytes:
        if n > MAX_REQUEST:
            raise RequestError("request too large")
        self._fill(n)
        value = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return value

    def text(self) -> str:
        return os.fsdecode(self.raw(self.u32()))


class Request(NamedTuple):
    """What the launcher asked for, and the caller's stdin, stdout and stderr (received fds)."""

    name: str
    cwd: str
    umask: int
    argv: list[str]
    env: dict[str, str]
    fds: list[int]


def read_request(conn: socket.socket) -> Request:
    reader = _Reader(conn)
    try:
        if reader.raw(4) != REQUEST_MAGIC:
            raise RequestError("not a command request")
        name = reader.text()
        cwd = reader.text()
        umask = int(reader.text(), 8)
        argv = [reader.text() for _ in range(reader.u32())]
        env: dict[str, str] = {}
        for _ in range(reader.u32()):
            key, sep, value = reader.text().partition("=")
            if sep and key:
                env[key] = value
    except (ValueError, struct.error) as exc:
        raise RequestError(f"malformed request: {exc}") from exc
    except RequestError:
        for fd in reader.fds:
            os.close(fd)
        raise
    if name not in COMMANDS or len(reader.fds) != 3:
        for fd in reader.fds:
            os.close(fd)
        raise RequestError("unknown command or missing file descriptors")
    return Request(name, cwd, umask, argv, env, reader.fds)


# -- the child: become the caller and run the command -------------------------------------------


def _send(conn: socket.socket, tag: bytes, value: int) -> None:
    try:
        conn.sendall(tag + _U32.pack(value & 0xFFFFFFFF))
    except OSError:
        pass


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end, from the kernel."""
    pid, uid, gid = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return pid, uid, gid


def become(uid: int, gid: int) -> bool:
    """Take the caller's identity; False when this runner cannot (it is not root)."""
    if os.geteuid() != 0 or (uid == 0 and gid == os.getegid()):
        return uid == os.geteuid() and gid == os.getegid()
    try:
        groups = os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
    except KeyError:
        groups = [gid]
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)
    return True


def _stdio(fd: int, mode: str) -> io.TextIOWrapper:
    """A text stream on one of the caller's descriptors, buffered as Python buffers its own stdio."""
    tty = os.isatty(fd)
    if mode == "r":
        return io.TextIOWrapper(open(fd, "rb", closefd=False), encoding="utf-8", errors="surrogateescape")
    raw = open(fd, "wb", buffering=0, closefd=False)
    errors = "backslashreplace" if fd == 2 else "surrogateescape"
    stream = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding="utf-8",
        errors=errors,
        line_buffering=tty or fd == 2,
        write_through=fd == 2,
    )
    return stream


def _install_stdio(fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    sys.stdin = _stdio(0, "r")
    sys.stdout = _stdio(1, "w")
    sys.stderr = _stdio(2, "w")


def _exit_code(code: object) -> int:
    """What `sys.exit(code)` would make the process's exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _reset_for_child(close_fds: list[int]) -> None:
    """In a fresh fork of the runner: drop its descriptors and signal handlers, leave its session,
    and draw a random seed of our own (the runner's would repeat in every child)."""
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    random.seed()


def run_child(conn: socket.socket, close_fds: list[int]) -> int:
    """In a child forked for `conn`: run its command. Returns the status."""
    _reset_for_child(close_fds)
    return serve_connection(conn)


class Spare(NamedTuple):
    """What a spare is forked with."""

    listener: socket.socket
    notify: socket.socket  # to the runner: the connection taken
    close_fds: list[int]
    runner: int  # the runner's pid


_libc: ctypes.CDLL | None = None


def load_libc() -> ctypes.CDLL:
    """libc for prctl, loaded once in the runner before it forks spares (not in each spare: a
    dlopen there costs every command a few milliseconds of CPU)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def parent_death_signal(sig: int) -> None:
    """Have the kernel send `sig` to this process when its parent dies (0: no longer)."""
    load_libc().prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def run_spare(spare: Spare) -> int:
    """In a spare: wait for a connection, hand a copy of it to the runner, run its command."""
    parent_death_signal(signal.SIGKILL)  # an idle spare must not outlive its runner
    if os.getppid() != spare.runner:
        return 0  # the runner died before we asked
    _reset_for_child(spare.close_fds)
    try:
        conn, _ = spare.listener.accept()
    except OSError as exc:
        log.warning("a spare cannot accept a command: %s", exc)
        return 2
    finally:
        spare.listener.close()
    parent_death_signal(0)  # a command that has started runs to its end, as a forked one does
    conn.setblocking(True)
    try:
        # First the runner's copy (it reports our wait status, even if we are killed now), then our pid.
        socket.send_fds(spare.notify, [b"T" + _U32.pack(os.getpid())], [conn.fileno()])
    except OSError as exc:
        log.warning("a spare cannot reach the runner: %s", exc)
    spare.notify.close()
    _send(conn, b"P", os.getpid())
    return serve_connection(conn)


def serve_connection(conn: socket.socket) -> int:
    """Read the request, become the caller, run the command; report and return its exit status."""
    conn.settimeout(REQUEST_TIMEOUT)
    try:
        request = read_request(conn)
    except (RequestError, OSError) as exc:
        log.warning("dropping a command request: %s", exc)
        return 2
    _pid, uid, gid = peer_credentials(conn)
    try:
        if not become(uid, gid):
            _send(conn, b"F", 0)
            return 0
        os.chdir(request.cwd)
    except OSError:
        _send(conn, b"F", 0)  # nothing has run yet: the plain command will say what is wrong
        return 0
    conn.settimeout(None)
    os.umask(request.umask)
    rlimits.take_caller_limits(request.env)  # the caller's, not this runner's (cli/native/command.c)
    tz_changed = request.env.get("TZ") != os.environ.get("TZ")
    for key in [k for k in os.environ if k not in request.env]:
        del os.environ[key]
    for key, value in request.env.items():
        if os.environ.get(key) != value:
            os.environ[key] = value
    if tz_changed:
        time.tzset()
    _install_stdio(request.fds)
    sys.argv = [request.name, *request.argv]
    code = run_command(request.name)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    _send(conn, b"X", code << 8)
    return code


def run_command(name: str) -> int:
    """Run cli.<name>.main() as its console script would: sys.exit semantics, atexit hooks."""
    try:
        main: Callable[[], object] = importlib.import_module(f"cli.{name}").main
        code = _exit_code(main())
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # what an uncaught exception does to a Python process
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    return code


# -- the runner: accept, fork, report ---------------------------------------------------------


class Runner:
    """Keep spares waiting for connections (or accept and fork per connection when there are none),
    and report each command's wait status."""

    def __init__(self, path: str, parent_fd: int | None, spares: int = SPARES) -> None:
        self.path = path
        self.parent_fd = parent_fd
        self.poll = select.epoll()
        self.children: dict[int, socket.socket] = {}  # a command's pid -> the runner's copy of its connection
        self.by_fd: dict[int, int] = {}  # connection fd -> child pid
        self.spares: set[int] = set()  # forked ahead, not yet known to have taken a connection
        self.spares_wanted = spares
        self.spare_deaths = 0  # spares that died in a row before taking a connection
        self.listener: socket.socket | None = None
        self.listening = False  # the runner itself accepts (no spare is waiting)
        self.notify: socket.socket | None = None  # spares send the connection they took here
        self.notify_w: socket.socket | None = None
        self.inode: int | None = None
        self.stopping = False
        self._own_fds: list[int] = [self.poll.fileno()]

    def bind(self) -> None:
        """Listen on `path` (0666). The agent that started us already owns the directory and the name."""
        try:
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        os.chmod(self.path, 0o666)
        listener.listen(128)
        # Blocking: spares wait in accept(); the runner accepts only while no spare is waiting, so
        # it never finds the connection it was told of taken.
        listener.setblocking(True)
        self.inode = os.stat(self.path).st_ino
        self.listener = listener

    def serve(self) -> None:
        if self.listener is None:
            raise RuntimeError("serve() before bind()")
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        self.notify, self.notify_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.setblocking(False)
        self._own_fds += [wake_r, wake_w, self.notify.fileno()]
        self.poll.register(wake_r, select.EPOLLIN)
        self.poll.register(self.notify.fileno(), select.EPOLLIN)
        if self.parent_fd is not None:
            self._own_fds.append(self.parent_fd)
            self.poll.register(self.parent_fd, select.EPOLLIN)
        if self.spares_wanted:
            load_libc()
        while not self.stopping:
            self._fill_spares()
            self._listen_if_no_spare()
            for fd, _events in self.poll.poll(5.0):
                if fd == self.listener.fileno():
                    if not self.spares:
                        self._accept()
                elif fd == wake_r:
                    self._drain(wake_r)
                elif fd == self.notify.fileno():
                    self._taken()
                elif fd == self.parent_fd:
                    self.stopping = True  # the agent is gone (its end of the pipe closed)
                else:
                    self._caller_gone(fd)
            self._reap()
        self.close()

    def _on_stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    @staticmethod
    def _drain(fd: int) -> None:
        try:
            while os.read(fd, 512):
                pass
        except BlockingIOError:
            pass

    # -- spares -----------------------------------------------------------------------------

    def _fill_spares(self) -> None:
        assert self.listener is not None and self.notify_w is not None
        while len(self.spares) < self.spares_wanted:
            spare = Spare(
                self.listener,
                self.notify_w,
                [*self._own_fds, *self.by_fd],
                os.getpid(),
            )
            try:
                pid = fork_child(functools.partial(run_spare, spare), failure=2)
            except OSError as exc:  # out of processes or memory: accept and fork per connection meanwhile
                log.warning("cannot fork a spare command runner: %s", exc)
                return
            self.spares.add(pid)

    def _listen_if_no_spare(self) -> None:
        assert self.listener is not None
        want = not self.spares
        if want != self.listening:
            if want:
                self.poll.register(self.listener.fileno(), select.EPOLLIN)
            else:
                self.poll.unregister(self.listener.fileno())
            self.listening = want

    def _taken(self) -> None:
        """Messages from spares: a connection taken (keep the copy, to report the command's status and
        watch its caller)."""
        assert self.notify is not None
        while True:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(self.notify, 1 + _U32.size, 1)
            except (BlockingIOError, InterruptedError):
                return
            pid = _U32.unpack(msg[1:])[0] if msg[:1] == b"T" and len(msg) == 1 + _U32.size else 0
            if pid not in self.spares or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                continue
            self.spares.discard(pid)
            self.spare_deaths = 0
            self._watch(pid, socket.socket(fileno=fds[0]))

    def _watch(self, pid: int, conn: socket.socket) -> None:
        self.children[pid] = conn
        self.by_fd[conn.fileno()] = pid
        # Only the peer's hang-up wakes us (not the request bytes the child has yet to read).
        self.poll.register(conn.fileno(), select.EPOLLRDHUP)

    def _spare_died(self, pid: int, status: int) -> None:
        self.spares.discard(pid)
        if self.stopping:
            return
        self.spare_deaths += 1
        if self.spare_deaths >= SPARE_DEATHS and self.spares_wanted:
            log.warning(
                "spare command runners keep dying (last status %d); forking per command instead", status
            )
            self.spares_wanted = 0

    # -- commands ---------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self.listener is not None and self.notify_w is not None
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                log.warning("cannot accept a command: %s", exc)
                time.sleep(0.05)
                return
            raise
        conn.setblocking(True)
        close_fds = [self.listener.fileno(), self.notify_w.fileno(), *self._own_fds, *self.by_fd]
        pid = fork_child(lambda: run_child(conn, close_fds), failure=2)
        _send(conn, b"P", pid)
        self._watch(pid, conn)

    def _caller_gone(self, fd: int) -> None:
        """The launcher closed its end before its command finished (it was killed): so is the command."""
        pid = self.by_fd.pop(fd, None)
        self.poll.unregister(fd)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _reap(self) -> None:
        self._taken()  # a spare's copy of its connection reached us before it could exit
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.spares:
                self._spare_died(pid, status)
                continue
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            _send(conn, b"X", status)
            if self.by_fd.pop(conn.fileno(), None) is not None:
                self.poll.unregister(conn.fileno())
            conn.close()

    def close(self) -> None:
        if self.notify is not None:
            self._taken()  # spares that have just taken a command run it to its end
        for pid in self.spares:  # idle: nothing of anyone's runs there
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.spares.clear()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            remove_socket_if_ours(self.path, self.inode)


def preload() -> None:
    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # a command that cannot import still runs (and fails) in its child
            log.warning("cannot preload %s: %s", module, exc)
    # Children share the preloaded objects' pages with the runner until written: keep the cyclic
    # garbage collector (which writes to every object it scans) off them.
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shoal-runner", description="serve shoal's short commands")
    parser.add_argument("--socket", required=True, metavar="PATH", help="unix socket to listen on")
    parser.add_argument("--parent-fd", type=int, metavar="FD", help="exit when this pipe closes")
    parser.add_argument(
        "--spares",
        type=int,
        default=SPARES,
        metavar="N",
        help="children forked ahead of commands (0: fork per command)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s shoal-runner %(levelname)s %(message)s")
    preload()
    runner = Runner(args.socket, args.parent_fd, max(0, args.spares))
    try:
        runner.bind()
    except OSError as exc:
        print(f"shoal-runner: error: cannot listen on {args.socket}: {exc.strerror or exc}", file=sys.stderr)
        return RUNNER_CANNOT_LISTEN
    runner.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
