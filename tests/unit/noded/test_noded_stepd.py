"""The job supervisor with real processes: users, output files, exit codes, signals, survival."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from noded import jobs, spool, stepd_spawn
from noded.launcher import LaunchRefused, build_spec, launch_batch
from tests.unit.noded.noded_builders import job, launch

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="running jobs as another user needs root")


class Node:
    name = "n1"


@pytest.fixture(scope="session")
def built_exec_helper(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """noded/native/stepd_exec.c compiled as setup.py does (None without a C compiler)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    out = tmp_path_factory.mktemp("exec-helper") / "shoal-stepd-exec"
    source = Path(__file__).resolve().parents[3] / "noded" / "native" / "stepd_exec.c"
    subprocess.run([compiler, "-O2", "-Wall", "-o", str(out), str(source)], check=True)
    return str(out)


@pytest.fixture(params=["exec-helper", "forked-script"])
def script_start(
    request: pytest.FixtureRequest, built_exec_helper: str | None, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The supervisor starts the script through shoal-stepd-exec, or forks it where none is installed."""
    if request.param == "exec-helper":
        if built_exec_helper is None:
            pytest.skip("no C compiler for shoal-stepd-exec")
        monkeypatch.setenv("SHOAL_STEPD_EXEC", built_exec_helper)
    else:
        monkeypatch.setenv("SHOAL_STEPD_EXEC", "none")
    return str(request.param)


@pytest.fixture(autouse=True, params=["new-interpreter", "fork-server"])
def stepd_start(request: pytest.FixtureRequest, script_start: str) -> Iterator[str]:
    """Every test runs twice: supervisors started as `python -m noded.stepd`, and forked by the
    warm fork server noded runs (noded.stepd_spawn); each both ways of starting the script."""
    if request.param == "fork-server":
        stepd_spawn.start_fork_server()
    yield request.param
    stepd_spawn.stop_fork_server()


def submit(
    spool_root: Path,
    work: Path,
    script: str,
    job_id: int = 10,
    uid: int | None = None,
    kill_wait: float = 5,
    run: int = 0,
    mem_mb: int = 0,
    **spec: object,
) -> Path:
    """Launch run `run` (the restart count) of a batch job through noded's launcher; return its spool directory."""
    uid = os.geteuid() if uid is None else uid
    gid = os.getegid() if uid == os.geteuid() else NOBODY
    name = "nobody" if uid == NOBODY else "root"
    spec.setdefault("work_dir", str(work))
    builder = (
        job(job_id)
        .name("t")
        .user(name, uid, gid)
        .spec(script=script.encode(), **spec)
        .node("n1", cpus=1, mem_mb=mem_mb)
    )
    builder.set(restarts=run, start_time=int(time.time()))
    launch_batch(launch(builder.obj()), Node(), spool_root, kill_wait)
    return spool.job_dir(spool_root, job_id)


def wait_status(job_dir: Path, timeout: float = 20) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = spool.read_json(job_dir / spool.STATUS)
        if status is not None:
            return status
        time.sleep(0.05)
    raise AssertionError(f"no status.json in {job_dir} after {timeout}s")


def wait_for(path: Path, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}")


@pytest.mark.parametrize(
    ("uid", "script", "exit_code", "exit_signal"),
    [
        (0, "#!/bin/bash\necho hello $SLURM_JOB_ID\nexit 0\n", 0, 0),
        (0, "#!/bin/bash\necho failing\nexit 3\n", 3, 0),
        (NOBODY, "#!/bin/sh\necho hello $(id -u)\nexit 7\n", 7, 0),
        (0, "#!/bin/bash\necho dying\nkill -KILL $$\n", 0, 9),
    ],
    ids=["root-ok", "root-exit3", "nobody-exit7", "self-sigkill"],
)
@needs_root
def test_job_exit_status_and_output_owner(
    open_dirs: tuple[Path, Path], uid: int, script: str, exit_code: int, exit_signal: int
) -> None:
    spool_root, work = open_dirs
    job_dir = submit(spool_root, work, script, uid=uid)
    status = wait_status(job_dir)
    assert (status["exit_code"], status["exit_signal"], status["launch_failed"]) == (
        exit_code,
        exit_signal,
        False,
    )
    out = work / "slurm-10.out"
    assert out.stat().st_uid == uid
    assert out.read_text().splitlines()[0] in ("hello 10", f"hello {uid}", "failing", "dying")


def test_environment_cwd_and_task_pid(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    script = (
        "#!/bin/bash\necho cwd=$(pwd) id=$SLURM_JOB_ID pidok=$([ $SLURM_TASK_PID = $$ ] && echo y) a=$1\n"
    )
    job_dir = submit(spool_root, work, script, std_out="o-%x-%j.txt", argv=["first"])
    assert wait_status(job_dir)["exit_code"] == 0
    assert (work / "o-t-10.txt").read_text() == f"cwd={work} id=10 pidok=y a=first\n"


def test_separate_error_file_and_append_mode(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    (work / "out.txt").write_text("before\n")
    script = "#!/bin/bash\necho to-out\necho to-err >&2\n"
    job_dir = submit(spool_root, work, script, std_out="out.txt", std_err="err.txt", open_mode="append")
    wait_status(job_dir)
    assert (work / "out.txt").read_text() == "before\nto-out\n"
    assert (work / "err.txt").read_text() == "to-err\n"


def test_unopenable_output_fails_the_job(open_dirs: tuple[Path, Path]) -> None:
    """As 22.05 records it: ExitCode=0:53 (sacct), whereas other launch failures end 1:0."""
    spool_root, work = open_dirs
    job_dir = submit(spool_root, work, "#!/bin/bash\necho hi\n", std_out="/nonexistent/dir/out")
    status = wait_status(job_dir)
    assert (status["exit_code"], status["exit_signal"], status["launch_failed"]) == (0, 53, True)
    assert status["message"] == "Could not open stdout file /nonexistent/dir/out: No such file or directory"


def test_missing_workdir_falls_back_to_tmp(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    job_dir = submit(
        spool_root,
        work,
        "#!/bin/bash\necho cwd=$(pwd)\n",
        work_dir="/nonexistent/wd",
        std_out=str(work / "o"),
    )
    assert wait_status(job_dir)["exit_code"] == 0
    lines = (work / "o").read_text().splitlines()
    assert lines == [
        "slurmstepd-n1: error: couldn't chdir to `/nonexistent/wd': No such file or directory: going to /tmp instead",
        "cwd=/tmp",
    ]


def test_bad_interpreter_fails_the_job_with_its_errno(open_dirs: tuple[Path, Path]) -> None:
    """22.05, `#!/nonexistent/sh`: FAILED 2:0 (ENOENT), not a launch failure; said in the output."""
    spool_root, work = open_dirs
    status = wait_status(submit(spool_root, work, "#!/nonexistent/sh\necho hi\n", std_out=str(work / "o")))
    assert (status["exit_code"], status["exit_signal"], status["launch_failed"]) == (2, 0, False)
    assert (work / "o").read_text() == (
        "slurmstepd-n1: error: execve(): bad interpreter(/nonexistent/sh): No such file or directory\n"
    )


def test_script_without_interpreter_fails_with_enoexec(open_dirs: tuple[Path, Path]) -> None:
    """Only a crafted request gets here (sbatch refuses a script without #!): exit code ENOEXEC."""
    spool_root, work = open_dirs
    status = wait_status(submit(spool_root, work, "echo no shebang\n", std_out=str(work / "o")))
    assert (status["exit_code"], status["launch_failed"]) == (errno.ENOEXEC, False)
    assert "Exec format error" in (work / "o").read_text()


def test_limits_from_the_submit_host_are_the_scripts(open_dirs: tuple[Path, Path]) -> None:
    """SLURM_RLIMIT_* (what sbatch sends) become the script's soft limits and leave its environment;
    one above the node's hard limit is lowered to it."""
    spool_root, work = open_dirs
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    env = {
        "SLURM_RLIMIT_NOFILE": str(hard + 1000),
        "SLURM_RLIMIT_CORE": "0",
        "SLURM_RLIMIT_STACK": "18446744073709551615",
    }
    script = "#!/bin/bash\necho $(ulimit -n) $(ulimit -c) $(ulimit -s) $(env | grep -c RLIMIT)\n"
    job_dir = submit(spool_root, work, script, std_out=str(work / "o"), environment=env)
    assert wait_status(job_dir)["exit_code"] == 0
    assert (work / "o").read_text().split() == [str(hard), "0", "unlimited", "0"]


def test_rss_limit_is_the_jobs_memory_on_the_node(open_dirs: tuple[Path, Path]) -> None:
    """22.05: `sbatch --mem=2000` -> `ulimit -m` 2048000 soft and hard, over a propagated soft RSS
    limit; a job that holds no memory keeps the node's (and the propagated) RSS limit."""
    spool_root, work = open_dirs
    script = "#!/bin/bash\necho $(ulimit -Sm) $(ulimit -Hm)\n"
    env = {"SLURM_RLIMIT_RSS": str(500000 * 1024)}
    job_dir = submit(spool_root, work, script, mem_mb=2000, std_out=str(work / "o"), environment=env)
    assert wait_status(job_dir)["exit_code"] == 0
    assert (work / "o").read_text().split() == ["2048000", "2048000"]
    job_dir = submit(spool_root, work, script, job_id=11, std_out=str(work / "p"), environment=env)
    assert wait_status(job_dir)["exit_code"] == 0
    hard = resource.getrlimit(resource.RLIMIT_RSS)[1]
    assert (work / "p").read_text().split() == [
        "500000",
        "unlimited" if hard == resource.RLIM_INFINITY else str(hard // 1024),
    ]


def test_terminate_runs_trap_then_sigkill_after_kill_wait(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    script = "#!/bin/bash\ntrap 'echo got TERM' TERM\necho ready\nwhile true; do sleep 0.1; done\n"
    job_dir = submit(spool_root, work, script, kill_wait=30)
    out = work / "slurm-10.out"
    wait_for(out, "ready")
    assert jobs.scan(spool_root)[0] == [10]
    started = time.monotonic()
    assert jobs.terminate_job(spool_root, 10, kill_wait=1)
    status = wait_status(job_dir)
    elapsed = time.monotonic() - started
    assert "got TERM" in out.read_text()
    assert status["exit_signal"] == signal.SIGKILL
    assert 0.9 <= elapsed < 10


def test_signal_job_reaches_the_script(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    script = "#!/bin/bash\ntrap 'echo got USR1; exit 0' USR1\necho ready\nwhile true; do sleep 0.1; done\n"
    job_dir = submit(spool_root, work, script)
    wait_for(work / "slurm-10.out", "ready")
    assert jobs.signal_job(spool_root, 10, signal.SIGUSR1, batch_only=True)
    assert wait_status(job_dir)["exit_code"] == 0
    assert "got USR1" in (work / "slurm-10.out").read_text()
    assert not jobs.signal_job(spool_root, 10, signal.SIGUSR1, batch_only=False)


def test_finished_jobs_are_listed_until_removed_and_noded_is_notified(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(spool_root / spool.NOTIFY_SOCKET))
    sock.settimeout(20)
    try:
        submit(spool_root, work, "#!/bin/bash\nexit 2\n", job_id=21)
        assert sock.recv(100) == b"done 21"
    finally:
        sock.close()
    running, finished = jobs.scan(spool_root)
    assert running == []
    assert [(f.job_id, f.exit_code) for f in finished] == [(21, 2)]
    jobs.remove_job(spool_root, 21)
    assert jobs.scan(spool_root) == ([], [])


def test_stepd_outlives_a_killed_noded(open_dirs: tuple[Path, Path], stepd_start: str) -> None:
    """Launch from a separate process, kill -9 it, and the job still finishes and reports."""
    spool_root, work = open_dirs
    repo = Path(__file__).parents[3]
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]);"
        "from noded import stepd_spawn; sys.argv[4] == 'fork-server' and stepd_spawn.start_fork_server();"
        "from pathlib import Path; from tests.unit.noded.test_noded_stepd import submit;"
        "submit(Path(sys.argv[2]), Path(sys.argv[3]), '#!/bin/bash\\necho start\\nsleep 1\\necho end\\n');"
        "print('launched', flush=True); time.sleep(60)"
    )
    fake_noded = subprocess.Popen(
        [sys.executable, "-c", code, str(repo), str(spool_root), str(work), stepd_start],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fake_noded.stdout is not None and fake_noded.stdout.readline() == "launched\n"
    fake_noded.kill()
    fake_noded.wait()
    status = wait_status(spool.job_dir(spool_root, 10))
    assert status["exit_code"] == 0
    assert (work / "slurm-10.out").read_text() == "start\nend\n"


def test_stepd_imports_only_the_standard_library() -> None:
    # the bare `shoal` package (its __init__ only sets an environment default) is allowed, and shoal.hookrun
    # (the Prolog/Epilog runner, itself standard library only) and shoal.rlimits (likewise); other shoal
    # modules are not
    code = (
        "import sys, noded.stepd; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('grpc', 'google', 'psutil', 'shoal') and m not in ('shoal', 'shoal.hookrun', 'shoal.rlimits')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_non_root_noded_refuses_other_users(
    monkeypatch: pytest.MonkeyPatch, open_dirs: tuple[Path, Path]
) -> None:
    spool_root, work = open_dirs
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    req = launch(job(5).user("alice", 1001, 1001).node("n1").obj())
    with pytest.raises(
        LaunchRefused, match="runs as uid 1000 and can only run its own jobs, not jobs of uid 1001"
    ):
        build_spec(req, Node(), spool_root, 30)


def test_terminate_before_the_launch_arrives_never_runs_the_job(open_dirs: tuple[Path, Path]) -> None:
    """scancel right after the job started in ctld: the TerminateJob may reach noded first."""
    spool_root, work = open_dirs
    assert not jobs.terminate_job(spool_root, 10, kill_wait=1)  # nothing runs yet
    job_dir = submit(spool_root, work, "#!/bin/bash\necho started\nsleep 300\n")
    status = wait_status(job_dir, timeout=10)
    assert status["exit_signal"] == signal.SIGTERM
    assert not (work / "slurm-10.out").exists()
    jobs.remove_job(spool_root, 10)
    assert not spool.cancel_marker(spool_root, 10).exists()


def test_requeued_job_runs_again_though_its_last_run_is_not_yet_removed(open_dirs: tuple[Path, Path]) -> None:
    """scontrol requeue: ctld requeues on the first run's completion report and may launch the next
    run before the reporter has removed the first run's directory (and the cancel marker that ended it)."""
    spool_root, work = open_dirs
    script = "#!/bin/bash\necho run >> runs\nsleep 300\n"
    job_dir = submit(spool_root, work, script)
    wait_for(work / "runs", "run")
    assert jobs.terminate_job(spool_root, 10, kill_wait=1)
    wait_status(job_dir)
    [reported] = jobs.scan(spool_root)[1]  # the report ctld acknowledges by requeueing the job
    submit(spool_root, work, script, run=1)
    jobs.remove_job(spool_root, 10, reported.run)  # the reporter's removal comes after the launch
    wait_for(work / "runs", "run\nrun\n")
    assert jobs.scan(spool_root) == ([10], [])
    assert jobs.terminate_job(spool_root, 10, kill_wait=1)
    assert wait_status(job_dir)["exit_signal"] == signal.SIGTERM
    assert [f.run for f in jobs.scan(spool_root)[1]] == [1]


def test_a_retried_launch_of_a_finished_run_does_not_run_it_again(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    job_dir = submit(spool_root, work, "#!/bin/bash\necho run >> runs\n")
    assert wait_status(job_dir)["exit_code"] == 0
    submit(spool_root, work, "#!/bin/bash\necho run >> runs\n")
    assert (work / "runs").read_text() == "run\n"
    assert [f.job_id for f in jobs.scan(spool_root)[1]] == [10]


def test_a_pid_file_being_rewritten_always_reads_as_the_live_process(tmp_path: Path) -> None:
    """noded's job scan reads stepd.pid while it is written: a half-written file made a live job 'lost'."""
    import threading

    path = tmp_path / spool.STEPD_PID
    spool.write_pid_file(path, os.getpid())
    stop = threading.Event()

    def rewrite() -> None:
        while not stop.is_set():
            spool.write_pid_file(path, os.getpid())

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        misses = sum(spool.live_pid(path) is None for _ in range(20000))
    finally:
        stop.set()
        writer.join()
    assert misses == 0


def test_the_script_starts_with_its_pid_already_on_record(open_dirs: tuple[Path, Path]) -> None:
    """A signal sent the moment the script runs (it printed "ready") must find its pid: the
    supervisor records it before the script may start (this was a race the signal test lost)."""
    spool_root, work = open_dirs
    job_dir = spool.job_dir(spool_root, 10)
    script = f"#!/bin/sh\ncat {job_dir / spool.JOB_PID} > {work / 'seen'} 2>&1\necho $$ >> {work / 'seen'}\n"
    assert wait_status(submit(spool_root, work, script))["exit_code"] == 0
    recorded, own = (work / "seen").read_text().split("\n")[:2]
    assert recorded.split()[0] == own


@needs_root
def test_the_script_runs_as_its_user_with_its_groups_and_no_signal_ignored_or_blocked(
    open_dirs: tuple[Path, Path],
) -> None:
    """Whichever way it is started, the script is the user's (uid, gid, supplementary groups) and
    gets every signal (scancel -s, a time limit's): none ignored or blocked from the supervisor."""
    spool_root, work = open_dirs
    # read by the script's own process, exec'd: the shell blocks every signal while it vforks a child
    script = "#!/bin/sh\nid -u\nid -g\nid -G\nexec grep -E '^Sig(Ign|Blk):' /proc/self/status\n"
    status = wait_status(submit(spool_root, work, script, uid=NOBODY))
    assert (status["exit_code"], status["launch_failed"]) == (0, False)
    uid, gid, groups, *masks = (work / "slurm-10.out").read_text().splitlines()
    assert (int(uid), int(gid)) == (NOBODY, NOBODY)
    assert {int(g) for g in groups.split()} == set(os.getgrouplist("nobody", NOBODY))
    assert dict(line.split() for line in masks) == {"SigBlk:": "0" * 16, "SigIgn:": "0" * 16}
