"""The per-job supervisor (Slurm's slurmstepd): `python -m noded.stepd <job dir>/launch.json`.

It detaches from noded (so it outlives a noded restart or kill -9), runs the batch script as
the job's user in its own process group, terminates it on SIGTERM (SIGCONT+SIGTERM, then
SIGKILL after KillWait), and when the script ends writes status.json and tells noded.
The script is started through shoal-stepd-exec (noded/native/stepd_exec.c), spawned without
copying this process; where that is not installed, and for a TaskProlog, by a fork of it.
Standard library only: it must start fast and must not depend on noded's state.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from noded import hooks, nodens, reap, spool
from noded.cgroup import BATCH, CgroupError, CgroupRequest, StepCgroup, oom_note
from noded.launchspec import LaunchSpec
from noded.workdir import enter_workdir
from shoal import rlimits

# Signals stepd itself ignores; the job gets default dispositions back before exec.
_IGNORED = (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE, signal.SIGUSR1, signal.SIGUSR2)
# ... with those stepd catches and SIGXFSZ, which Python ignores
_RESET = (*_IGNORED, signal.SIGTERM, signal.SIGALRM, signal.SIGXFSZ)
EXEC_HELPER = "shoal-stepd-exec"  # noded/native/stepd_exec.c


STREAM_OPEN_FAILED = "Could not open "  # how the child's message starts when -o/-e/-i cannot be opened
IO_SETUP_FAILED = 53  # 22.05 records such a batch job FAILED with ExitCode=0:53 (measured: -o /nonexistent/x)


class LaunchError(Exception):
    """The job could not be started; the message is recorded in status.json."""


class Supervisor:
    """Runs one job and records how it ended."""

    def __init__(self, spec: LaunchSpec, job_dir: Path) -> None:
        self.spec = spec
        self.job_dir = job_dir
        self.job_pid = 0
        self.terminating = False

    # -- signals -----------------------------------------------------------------------------
    def _kill_wait(self) -> float:
        try:
            return float((self.job_dir / spool.KILL_WAIT).read_text().strip())
        except (OSError, ValueError):
            return float(self.spec.kill_wait)

    def on_terminate(self, signum: int, frame: object) -> None:
        """SIGTERM to stepd: SIGCONT+SIGTERM to the job's group now, SIGKILL after KillWait."""
        if self.terminating or not self.job_pid:
            return
        self.terminating = True
        self._tell_why()
        _killpg(self.job_pid, signal.SIGCONT)
        _killpg(self.job_pid, signal.SIGTERM)
        signal.setitimer(signal.ITIMER_REAL, max(self._kill_wait(), 0.001))

    def _tell_why(self) -> None:
        """The line noded left for this termination (a cancel for idle GPUs), on the job's stderr."""
        try:
            note = (self.job_dir / spool.CANCEL_NOTE).read_text()
        except OSError:
            return
        try:
            with open(self.spec.stderr, "a", encoding="utf-8") as fh:
                fh.write(note)
        except OSError:
            pass

    def on_alarm(self, signum: int, frame: object) -> None:
        _killpg(self.job_pid, signal.SIGKILL)

    # -- the job -------------------------------------------------------------------------------
    def run(self) -> dict[str, object]:
        """Start the job, wait for it, and return the status record."""
        status: dict[str, object] = {
            "job_id": self.spec.job_id,
            "exit_code": 0,
            "exit_signal": 0,
            "end_time": 0,
            "launch_failed": False,
            "message": "",
        }
        signal.signal(signal.SIGTERM, self.on_terminate)
        signal.signal(signal.SIGALRM, self.on_alarm)
        # A SIGTERM arriving before the job's pid is known waits until it is.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        if spool.cancel_marker(self.job_dir.parent, self.spec.job_id).exists():
            # TerminateJob came before this stepd had its pid on record: never start the job.
            status.update(
                exit_signal=int(signal.SIGTERM), message="cancelled before start", end_time=int(time.time())
            )
            return status
        prolog = self.run_node_hook(self.spec.prolog, "prolog")
        if not prolog.ok:
            # the script never runs; ctld drains the node and requeues the job held (ctld.job_hooks)
            status.update(
                exit_code=1,
                launch_failed=True,
                prolog_failed=True,
                message=prolog.message,
                end_time=int(time.time()),
            )
            return status
        if self.spec.prolog and spool.cancel_marker(self.job_dir.parent, self.spec.job_id).exists():
            # cancelled while the Prolog ran (a SIGTERM waits, blocked): the script never starts; the
            # Epilog runs, as after any job that ran the Prolog
            status.update(
                exit_signal=int(signal.SIGTERM), message="cancelled before start", end_time=int(time.time())
            )
            return self.after_epilog(status)
        try:
            cgroup = make_cgroup(self.spec)
        except CgroupError as exc:
            status.update(
                exit_code=1, launch_failed=True, message=f"task/cgroup: {exc}", end_time=int(time.time())
            )
            return status
        try:
            pid, err_r, refused = self.start_job(cgroup)
        except LaunchError as exc:  # nothing was started
            status.update(finish_cgroup(cgroup, self.spec))
            status.update(exit_code=1, launch_failed=True, message=str(exc), end_time=int(time.time()))
            return self.after_epilog(status)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        error = _read_all(err_r) or refused
        _, wait_status, rusage = os.wait4(pid, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        _killpg(pid, signal.SIGKILL)  # what the script left running ends with it, as in Slurm
        if cgroup is None:  # no cgroup to empty: the job's session is the unit (see noded.reap)
            reap.kill_all(os.getpid())
        status.update(finish_cgroup(cgroup, self.spec))
        measured = status.get("usage")
        cgroup_usage = measured if isinstance(measured, dict) else {}
        # The cgroup's figures (the whole job, daemons it left included) win; rusage where it has none.
        status["usage"] = {k: cgroup_usage.get(k) or v for k, v in rusage_usage(rusage).items()}
        if error:
            io_failed = error.startswith(STREAM_OPEN_FAILED)
            status.update(
                exit_code=0 if io_failed else 1,
                exit_signal=IO_SETUP_FAILED if io_failed else 0,
                launch_failed=True,
                message=error,
            )
        elif os.WIFSIGNALED(wait_status):
            status["exit_signal"] = os.WTERMSIG(wait_status)
        else:
            status["exit_code"] = os.waitstatus_to_exitcode(wait_status)
        status["end_time"] = int(time.time())
        hooks.run_task_epilog(
            self.spec.task_epilog,
            self.spec.env,
            self.spec.cwd,
            self.spec.node_ns,
            hooks.RunAs(self.spec.uid, self.spec.gid, tuple(self.spec.groups)),
        )
        return self.after_epilog(status)

    def start_job(self, cgroup: StepCgroup | None) -> tuple[int, int, str]:
        """Start the script, held until its pid is on record (a signal sent the moment it prints,
        scancel -s or SignalJob, must find it, not "not running"); (its pid, the read end of its
        launch errors, why it was not let go or "")."""
        helper = None if self.spec.task_prolog else exec_helper()
        if helper is not None:
            pid, err_r, go_w = _spawn_job(self.spec, helper)
        else:
            pid, err_r, go_w = _fork_job(self.spec, cgroup)  # the child joins its cgroups itself
        self.job_pid = pid
        refused = ""
        try:
            if helper is not None and cgroup is not None:
                try:
                    cgroup.attach(pid)  # before the go: the script starts in its cgroups
                except CgroupError as exc:
                    refused = f"launch failed: {exc}"
            spool.write_pid_file(self.job_dir / spool.JOB_PID, pid)
        finally:
            if not refused:
                os.write(go_w, b"1")
            os.close(go_w)  # without the go the helper exits at once
        return pid, err_r, refused

    def after_epilog(self, status: dict[str, object]) -> dict[str, object]:
        """The node's Epilog for this job; its failure is added to the job's status (ctld drains the node)."""
        epilog = self.run_node_hook(self.spec.epilog, "epilog")
        if not epilog.ok:
            status.update(epilog_failed=True, hook_message=epilog.message)
        return status

    def run_node_hook(self, scripts: list[str], what: str) -> hooks.HookResult:
        """The node's Prolog or Epilog for this job, as root (SLURM_SCRIPT_CONTEXT prolog_slurmd/epilog_slurmd)."""
        if not scripts:
            return hooks.HookResult(True)
        env = {**self.spec.hook_env, "SLURM_SCRIPT_CONTEXT": f"{what}_slurmd"}
        with hooks.serial(self.job_dir.parent, self.spec.hook_serial):
            result = hooks.run_all(
                scripts, env, hooks.timeout_of(self.spec.hook_timeout), what, node_ns=self.spec.node_ns
            )
        if not result.ok:
            print(f"slurmstepd: error: job {self.spec.job_id}: {result.message}", file=sys.stderr)
        return result


def rusage_usage(rusage: object) -> dict[str, int]:
    """Peak RSS and CPU time of a waited-for process and the descendants it waited for (no cgroup)."""
    maxrss = int(getattr(rusage, "ru_maxrss", 0))  # kilobytes on Linux
    cpu = float(getattr(rusage, "ru_utime", 0.0)) + float(getattr(rusage, "ru_stime", 0.0))
    return {"max_rss_bytes": maxrss * 1024, "cpu_time_us": int(cpu * 1_000_000)}


def _killpg(pgid: int, sig: int) -> None:
    if pgid <= 0:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read_all(fd: int) -> str:
    chunks: list[bytes] = []
    while True:
        data = os.read(fd, 4096)
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def _open_stream(path: str, flags: int, what: str) -> int:
    try:
        return os.open(path, flags, 0o644)
    except OSError as exc:
        raise LaunchError(f"{STREAM_OPEN_FAILED}{what} file {path}: {exc.strerror}") from exc


def make_cgroup(spec: LaunchSpec) -> StepCgroup | None:
    """The job's cgroup and the script's step_batch in it, created before the job starts (None
    when the node enforces none)."""
    if not spec.cgroup:
        return None
    job = CgroupRequest.from_dict(spec.cgroup)
    cgroup = StepCgroup(job, job.child(BATCH))
    cgroup.create()
    return cgroup


def finish_cgroup(cgroup: StepCgroup | None, spec: LaunchSpec) -> dict[str, object]:
    """After the job: whether it was OOM-killed (also told on its stderr), its usage (the whole
    job's: its steps included); the job's cgroup goes, with whatever is left in it."""
    if cgroup is None:
        return {}
    count = cgroup.oom_count()
    oom = count > 0
    usage = cgroup.job.usage()
    cgroup.remove()
    cgroup.job.remove()
    if oom:
        note = oom_note(f"{spec.job_id}.batch", count)
        try:
            with open(spec.stderr, "a", encoding="utf-8") as fh:
                fh.write(note)
        except OSError:
            pass
    return {"oom": oom, "usage": usage}


def exec_helper() -> str | None:
    """The exec helper (noded/native/stepd_exec.c, installed as a script beside this Python), or
    $SHOAL_STEPD_EXEC; None where there is none (the supervisor then forks the script itself)."""
    path = os.environ.get("SHOAL_STEPD_EXEC") or os.path.join(os.path.dirname(sys.executable), EXEC_HELPER)
    return path if os.access(path, os.X_OK) else None


def _spawn_job(spec: LaunchSpec, helper: str) -> tuple[int, int, int]:
    """The script through the exec helper, spawned without copying this process (posix_spawn is a
    vfork and exec): (pid, the read end of its launch errors, the write end of its go). The node's
    namespaces are entered here, by the supervisor itself (the helper inherits them); the signals
    stepd ignores or catches are the default again there, none blocked."""
    if spec.node_ns:
        try:
            nodens.enter(spec.node_ns)
        except OSError as exc:
            raise LaunchError(f"node namespaces for {spec.node_ns.get('hostname')}: {exc.strerror}") from exc
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    go_r, go_w = os.pipe2(os.O_CLOEXEC)
    os.set_inheritable(err_w, True)
    os.set_inheritable(go_r, True)
    argv = [
        helper,
        str(go_r),
        str(err_w),
        str(spec.uid),
        str(spec.gid),
        ",".join(str(g) for g in spec.groups),
        f"{spec.umask:o}",
        spec.open_mode,
        spec.stdin,
        spec.stdout,
        spec.stderr,
        spec.cwd,
        spec.script,
        *spec.argv,
    ]
    try:
        env = (
            {**spec.env, rlimits.EXEC_VARIABLE: rlimits.exec_argument(spec.rlimits, spec.memory_cap)}
            if spec.rlimits or spec.memory_cap
            else spec.env
        )
        pid = os.posix_spawn(helper, argv, env, setpgroup=0, setsigmask=(), setsigdef=_RESET)
    except OSError as exc:
        os.close(err_r)
        os.close(go_w)
        raise LaunchError(f"cannot start {helper}: {exc.strerror}") from exc
    finally:
        os.close(err_w)
        os.close(go_r)
    return pid, err_r, go_w


def _fork_job(spec: LaunchSpec, cgroup: StepCgroup | None) -> tuple[int, int, int]:
    """The script in a forked child of the supervisor, where there is no exec helper, and for a
    TaskProlog (it runs in the job's process, before the exec): as _spawn_job."""
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    go_r, go_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        os.close(go_w)
        os.read(go_r, 1)
        os.close(go_r)
        _exec_job(spec, err_w, cgroup)  # never returns
    os.close(err_w)
    os.close(go_r)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child already did it (or already exec'd)
    return pid, err_r, go_w


def _exec_job(spec: LaunchSpec, err_w: int, cgroup: StepCgroup | None = None) -> None:
    """In the forked child: join the job's step_batch cgroup, become the user, wire the streams, chdir and exec."""
    try:
        os.setpgid(0, 0)
        if cgroup is not None:
            cgroup.attach(os.getpid())
        for sig in _RESET:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        if spec.node_ns:
            try:
                nodens.enter(spec.node_ns)
            except OSError as exc:
                raise LaunchError(
                    f"node namespaces for {spec.node_ns.get('hostname')}: {exc.strerror}"
                ) from exc
        refused = rlimits.apply(spec.rlimits, spec.memory_cap)  # as root: up to the node's hard limit
        if os.geteuid() == 0:
            os.setgroups(spec.groups)
            os.setgid(spec.gid)
            os.setuid(spec.uid)
        elif os.geteuid() != spec.uid:
            raise LaunchError(f"cannot run a job of uid {spec.uid} as uid {os.geteuid()}")
        os.umask(spec.umask)
        out_flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if spec.open_mode == "append" else os.O_TRUNC)
        fd_in = _open_stream(spec.stdin, os.O_RDONLY, "stdin")
        fd_out = _open_stream(spec.stdout, out_flags, "stdout")
        fd_err = fd_out if spec.stderr == spec.stdout else _open_stream(spec.stderr, out_flags, "stderr")
        os.dup2(fd_in, 0)
        os.dup2(fd_out, 1)
        os.dup2(fd_err, 2)
        for message in refused:
            os.write(2, f"slurmstepd: error: {message}\n".encode())
        node = spec.env.get("SLURMD_NODENAME")
        who = f"slurmstepd-{node}" if node else "slurmstepd"
        enter_workdir(spec.cwd, who)
        env = dict(spec.env)
        env["SLURM_TASK_PID"] = str(os.getpid())
        hooks.run_task_prolog(spec.task_prolog, env, spec.cwd)
        try:
            os.execve(spec.script, [spec.script, *spec.argv], env)
        except OSError as exc:  # the job's own failure, as 22.05: said on its stderr, errno its status
            os.write(2, f"{who}: error: {exec_failure(spec.script, exc)}\n".encode())
            os._exit(exc.errno or 1)
    except BaseException as exc:  # noqa: B036 - the child must never return into stepd
        message = str(exc) if isinstance(exc, LaunchError) else f"launch failed: {exc}"
        try:
            os.write(err_w, message.encode())
        finally:
            os._exit(1)


def exec_failure(script: str, exc: OSError) -> str:
    """What a failed exec of the script says, as 22.05: a "#!" line naming a missing interpreter
    is told as such (noded/native/stepd_exec.c says the same)."""
    try:
        with open(script, "rb") as fh:
            head = fh.read(512)
    except OSError:
        head = b""
    words = head[2:].split(b"\n", 1)[0].split() if head.startswith(b"#!") else []
    if words and exc.errno in (errno.ENOENT, errno.EACCES):
        return f"execve(): bad interpreter({os.fsdecode(words[0])}): {exc.strerror}"
    return f"execve(): {script}: {exc.strerror}"


def notify(socket_path: str, job_id: int) -> None:
    """Tell noded that a job ended (best effort: noded also scans the spool)."""
    if not socket_path:
        return
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(f"done {job_id}".encode(), socket_path)
    except OSError:
        pass


def supervise(launch_path: Path) -> int:
    """Run the job described by launch.json in this process; always leaves a status.json."""
    job_dir = launch_path.parent
    spec = LaunchSpec.load(launch_path)
    for sig in _IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    try:
        status = Supervisor(spec, job_dir).run()
    except Exception as exc:  # a broken supervisor must still report the job as failed
        status = {
            "job_id": spec.job_id,
            "exit_code": 1,
            "exit_signal": 0,
            "end_time": int(time.time()),
            "launch_failed": True,
            "message": f"slurmstepd failed: {exc}",
        }
    spool.write_json_atomic(job_dir / spool.STATUS, status)
    notify(spec.notify_socket, spec.job_id)
    return 0


def daemonize_and_supervise(launch_path: Path, body: Callable[[Path], int] | None = None) -> int:
    """Fork the supervisor off; return once it has recorded its pid (the caller may exit).

    `body` runs in the supervisor (default: the batch script; noded.taskd for a step's tasks)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid > 0:
        os.close(ready_w)
        ready = os.read(ready_r, 1)  # the supervisor wrote stepd.pid (or died trying)
        os.close(ready_r)
        return 0 if ready else 1
    os.close(ready_r)
    become_supervisor(launch_path, ready_w, body)


def become_supervisor(launch_path: Path, ready_w: int, body: Callable[[Path], int] | None = None) -> NoReturn:
    """In a process of its own (forked, not to be returned into): a new session, stepd.pid recorded
    (then one byte on `ready_w`), the supervisor's body, exit."""
    code = 1
    try:
        os.setsid()
    except OSError:
        pass  # already a session leader
    # A SIGTERM sent once the pid is on record waits until the supervisor can act on it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        spool.write_pid_file(launch_path.parent / spool.STEPD_PID, os.getpid())
        os.write(ready_w, b"1")
        os.close(ready_w)
        code = (body or supervise)(launch_path)
    finally:
        os._exit(code)


def body_for(path: Path) -> Callable[[Path], int]:
    """The supervisor's body for a launch.json (the batch script) or a tasks.json (a step's tasks)."""
    if path.name == "tasks.json":
        from noded.taskd import supervise_step

        return supervise_step
    return supervise


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m noded.stepd <job dir>/launch.json", file=sys.stderr)
        return 2
    path = Path(args[0]).resolve()
    return daemonize_and_supervise(path, body_for(path))


if __name__ == "__main__":
    sys.exit(main())
