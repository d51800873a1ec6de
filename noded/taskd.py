"""stepd's step mode: run one node's tasks of a job step and stream their I/O to srun.

Started as `python -m noded.stepd <spool>/step<job>.<step>/tasks.json` (detached like a batch
supervisor, so it outlives noded). It connects to srun's I/O address, forks each task as the
job's user in its own process group, forwards stdout/stderr (whole lines, or bytes as they come
with -u) and each task's exit status, feeds stdin from srun, and applies srun's signals.
SIGTERM (TerminateJob, SignalStep 0) ends the tasks: SIGCONT+SIGTERM, SIGKILL after KillWait.
Standard library only (plus shoal.taskio, itself stdlib-only).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from noded import hooks, nodens
from noded.cgroup.step import oom_note
from noded.workdir import enter_workdir
from shoal import rlimits, taskio

if TYPE_CHECKING:
    from noded.cgroup import StepCgroup

CONNECT_TIMEOUT_S = 10.0


@dataclass
class TaskSpec:
    gtid: int
    env: dict[str, str]
    stdin: str = ""  # "srun" = from srun, else a path ("/dev/null")
    stdout: str = ""  # "" = to srun, else a path
    stderr: str = ""


@dataclass
class StepSpec:
    job_id: int
    step_id: int
    node: str
    uid: int
    gid: int
    groups: list[int]
    cwd: str
    argv: list[str]
    tasks: list[TaskSpec]
    io_host: str
    io_port: int
    io_token: str
    unbuffered: bool = False
    open_mode: str = "truncate"
    umask: int = 0o022
    kill_wait: float = 30.0
    extra: dict[str, Any] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        data = dict(self.__dict__)
        data["tasks"] = [t.__dict__ for t in self.tasks]
        text = json.dumps(data)  # json.dumps's encoder is C, json.dump's Python
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)

    @classmethod
    def load(cls, path: Path) -> StepSpec:
        with open(path) as fh:
            data = json.load(fh)
        data["tasks"] = [TaskSpec(**t) for t in data["tasks"]]
        return cls(**data)


class StepSupervisor:
    def __init__(self, spec: StepSpec) -> None:
        self.spec = spec
        self.sock: socket.socket | None = None
        self.send_lock = threading.Lock()
        self.pids: dict[int, int] = {}  # gtid -> pid (= its process group)
        self.stdin_fds: dict[int, int] = {}
        self.terminating = False
        self.connection_lost = False
        self.cgroup: StepCgroup | None = None
        self.ooms = 0  # OOM kills in the step's cgroup seen so far

    # -- sending ------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        if self.sock is None or self.connection_lost:
            return
        with self.send_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                self.connection_lost = True

    def connect(self) -> None:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                self.sock = socket.create_connection((self.spec.io_host, self.spec.io_port), timeout=5)
                self.sock.settimeout(None)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        hello = {
            "node": self.spec.node,
            "token": self.spec.io_token,
            "tasks": [t.gtid for t in self.spec.tasks],
        }
        self.send(taskio.json_frame(taskio.HELLO, 0, hello))

    # -- signals ------------------------------------------------------------------------------
    def signal_tasks(self, sig: int) -> None:
        for pid in self.pids.values():
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def terminate(self) -> None:
        if self.terminating:
            return
        self.terminating = True
        self.signal_tasks(signal.SIGCONT)
        self.signal_tasks(signal.SIGTERM)
        timer = threading.Timer(max(0.001, self.spec.kill_wait), self.signal_tasks, args=(signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def on_sigterm(self, signum: int, frame: object) -> None:
        self.terminate()

    # -- I/O ------------------------------------------------------------------------------------
    def pump(self, fd: int, kind: int, gtid: int) -> None:
        """Forward one task pipe to srun: whole lines unless unbuffered; the rest at EOF."""
        pending = b""
        while True:
            try:
                data = os.read(fd, taskio.CHUNK)
            except OSError:
                data = b""
            if not data:
                break
            if self.spec.unbuffered:
                self.send(taskio.frame(kind, gtid, data))
                continue
            pending += data
            cut = pending.rfind(b"\n") + 1
            if cut == 0 and len(pending) < taskio.CHUNK:
                continue
            cut = cut or len(pending)
            self.send(taskio.frame(kind, gtid, pending[:cut]))
            pending = pending[cut:]
        if pending:
            self.send(taskio.frame(kind, gtid, pending))
        os.close(fd)

    def listen(self) -> None:
        """srun's frames: stdin data and signals. A lost srun ends the step."""
        sock = self.sock
        if sock is None:
            return
        while True:
            try:
                got = taskio.read_frame(sock)
            except (OSError, ValueError):
                got = None
            if got is None:
                if not self.connection_lost:
                    self.connection_lost = True
                    self.terminate()
                return
            kind, task, payload = got
            if kind == taskio.IN:
                self.feed(task, payload)
            elif kind == taskio.SIGNAL:
                sig = int(payload or b"0")
                if sig == 0:
                    self.terminate()
                else:
                    self.signal_tasks(sig)

    def feed(self, gtid: int, data: bytes) -> None:
        fd = self.stdin_fds.get(gtid)
        if fd is None:
            return
        if not data:
            os.close(fd)
            del self.stdin_fds[gtid]
            return
        try:
            os.write(fd, data)  # blocking: a task that does not read holds srun back (backpressure)
        except OSError:
            pass

    # -- tasks ----------------------------------------------------------------------------------
    def start_task(self, task: TaskSpec) -> list[threading.Thread]:
        spec = self.spec
        out_r = out_w = err_r = err_w = in_r = in_w = -1
        if not task.stdout:
            out_r, out_w = os.pipe()
        if not task.stderr:
            err_r, err_w = os.pipe()
        if task.stdin == "srun":
            in_r, in_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _exec_task(spec, task, in_r, out_w, err_w, self.cgroup)  # never returns
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        self.pids[task.gtid] = pid
        threads = []
        for fd in (out_w, err_w, in_r):
            if fd >= 0:
                os.close(fd)
        if in_w >= 0:
            self.stdin_fds[task.gtid] = in_w
        for fd, kind in ((out_r, taskio.OUT), (err_r, taskio.ERR)):
            if fd >= 0:
                t = threading.Thread(target=self.pump, args=(fd, kind, task.gtid), daemon=True)
                t.start()
                threads.append(t)
        return threads

    def make_cgroup(self) -> bool:
        """The step's cgroup, before any task starts; on failure every task fails with the reason."""
        if not self.spec.extra.get("step_cgroup"):
            return True
        from noded.cgroup import CgroupError

        try:
            self.cgroup = _step_cgroup(self.spec)
            self.cgroup.create()
            return True
        except CgroupError as exc:
            self.cgroup = None
            for task in self.spec.tasks:
                self.send(
                    taskio.frame(taskio.ERR, task.gtid, f"slurmstepd: error: task/cgroup: {exc}\n".encode())
                )
                self.send(taskio.json_frame(taskio.EXIT, task.gtid, {"code": 1, "signal": 0}))
            return False

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer struck in the step since last asked."""
        if self.cgroup is None:
            return False
        count = self.cgroup.oom_count()
        new, self.ooms = count > self.ooms, max(count, self.ooms)
        return new

    def run(self) -> None:
        """Start the tasks, relay them, wait for them.

        SIGTERM (the job ends: scancel, time limit) stays blocked until every task's pid is known,
        so it reaches them all; one that came before they started keeps them from starting.
        """
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        signal.signal(signal.SIGTERM, self.on_sigterm)
        self.connect()
        if not self.make_cgroup():
            self.finish()
            return
        readers: dict[int, list[threading.Thread]] = {}
        if signal.SIGTERM in signal.sigpending():
            self.terminating = True
            for task in self.spec.tasks:  # ended by the terminate before they began
                self.send(
                    taskio.json_frame(taskio.EXIT, task.gtid, {"code": 0, "signal": int(signal.SIGTERM)})
                )
        else:
            for task in self.spec.tasks:
                readers[task.gtid] = self.start_task(task)
        threading.Thread(target=self.listen, daemon=True).start()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        by_pid = {pid: gtid for gtid, pid in self.pids.items()}
        while by_pid:
            try:
                pid, status, rusage = os.wait4(-1, 0)
            except ChildProcessError:
                break
            gtid = by_pid.pop(pid, None)
            if gtid is None:
                continue
            for t in readers[gtid]:
                t.join()
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
            _killpg(pid, signal.SIGKILL)  # what the task left running ends with it
            self.task_epilog(gtid)
            cpu_us = int((rusage.ru_utime + rusage.ru_stime) * 1_000_000)
            ended = {
                "code": code,
                "signal": sig,
                "max_rss_kb": rusage.ru_maxrss,
                "cpu_time_us": cpu_us,
                "oom": sig == signal.SIGKILL and self.oom_killed(),
            }
            self.send(taskio.json_frame(taskio.EXIT, gtid, ended))
        if self.cgroup is not None and self.ooms:
            note = oom_note(f"{self.spec.job_id}.{self.spec.step_id}", self.ooms)
            self.send(taskio.frame(taskio.ERR, self.spec.tasks[0].gtid, note.encode()))
        self.finish()

    def task_epilog(self, gtid: int) -> None:
        """TaskEpilog after one task, as its user, in its environment."""
        task = next((t for t in self.spec.tasks if t.gtid == gtid), None)
        if task is not None and self.spec.extra.get("task_epilog"):
            run_as = hooks.RunAs(self.spec.uid, self.spec.gid, tuple(self.spec.groups))
            # no node namespaces here: the supervisor has threads (I/O), so nothing may run between fork and exec
            hooks.run_task_epilog(self.spec.extra["task_epilog"], task.env, self.spec.cwd, None, run_as)

    def finish(self) -> None:
        self.send(taskio.frame(taskio.DONE, 0))
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exec_task(
    spec: StepSpec, task: TaskSpec, in_r: int, out_w: int, err_w: int, cgroup: StepCgroup | None
) -> None:
    """In the forked child: become the user, wire stdio, exec argv (exit 2 if it cannot)."""
    code = 1
    try:
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        if cgroup is not None:
            cgroup.attach(os.getpid())  # the step's cgroup: its cpuset, memory and devices
        if spec.extra.get("node_ns"):  # an emulated node's hostname and /etc/hosts
            nodens.enter(spec.extra["node_ns"])
        refused = rlimits.apply(  # as root: up to the node's hard limit; RSS capped at the step's memory
            spec.extra.get("rlimits", {}), int(spec.extra.get("memory_cap", 0))
        )
        if os.geteuid() == 0:
            os.setgroups(spec.groups)
            os.setgid(spec.gid)
            os.setuid(spec.uid)
        os.umask(spec.umask)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if spec.open_mode == "append" else os.O_TRUNC)
        fd_in = in_r if in_r >= 0 else os.open(task.stdin or "/dev/null", os.O_RDONLY)
        fd_out = out_w if out_w >= 0 else os.open(task.stdout, flags, 0o644)
        if err_w >= 0:
            fd_err = err_w
        elif task.stderr == task.stdout:
            fd_err = fd_out
        else:
            fd_err = os.open(task.stderr, flags, 0o644)
        os.dup2(fd_in, 0)
        os.dup2(fd_out, 1)
        os.dup2(fd_err, 2)
        for message in refused:
            os.write(2, f"slurmstepd: error: {message}\n".encode())
        enter_workdir(spec.cwd)
        env = dict(task.env)
        env["SLURM_TASK_PID"] = str(os.getpid())
        hooks.run_task_prolog(spec.extra.get("task_prolog", ""), env, spec.cwd)
        code = 2
        try:
            os.execvpe(spec.argv[0], spec.argv, env)
        except OSError as exc:
            os.write(2, f"slurmstepd: error: execve(): {spec.argv[0]}: {exc.strerror}\n".encode())
    except BaseException as exc:  # noqa: B036 - the child must never return into the supervisor
        try:
            os.write(2, f"slurmstepd: error: task launch failed: {exc}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(code)


def _step_cgroup(spec: StepSpec) -> StepCgroup:
    from noded.cgroup import CgroupRequest, StepCgroup

    return StepCgroup(
        CgroupRequest.from_dict(spec.extra["cgroup"]), CgroupRequest.from_dict(spec.extra["step_cgroup"])
    )


def supervise_step(launch_path: Path) -> int:
    """Run the tasks in tasks.json, then remove the step's spool directory."""
    spec = StepSpec.load(launch_path)
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    supervisor = StepSupervisor(spec)
    try:
        supervisor.run()
    except OSError:
        pass  # srun unreachable: nothing was started, nobody to tell
    finally:
        shutil.rmtree(launch_path.parent, ignore_errors=True)
        if supervisor.cgroup is not None:
            supervisor.cgroup.remove()
    return 0
