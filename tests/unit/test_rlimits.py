"""shoal.rlimits: what slurm.conf's PropagateResourceLimits(Except) and --propagate choose, and the
round trips of the limits between the commands, the runner and the node."""

from __future__ import annotations

import os
import resource

import pytest

from shoal import rlimits
from shoal.conf import ConfigError, load_slurm_conf

ALL = frozenset(rlimits.LIMITS)


@pytest.mark.parametrize(
    ("limits", "except_", "expected"),
    [
        ("ALL", "", ALL),
        ("", "", ALL),
        ("NONE", "", frozenset()),
        ("ALL", "MEMLOCK", ALL - {"MEMLOCK"}),
        ("ALL", "MEMLOCK,STACK", ALL - {"MEMLOCK", "STACK"}),
        ("ALL", "NONE", ALL),
        ("NOFILE,CORE", "", frozenset({"NOFILE", "CORE"})),
        ("NOFILE,CORE", "CORE", frozenset({"NOFILE"})),
    ],
)
def test_propagated(limits: str, except_: str, expected: frozenset[str]) -> None:
    assert rlimits.propagated(limits, except_) == expected


@pytest.mark.parametrize("text", ["STACKS", "stack", "all", "NOFILE,BOGUS"])
def test_unknown_name_is_refused(text: str) -> None:
    """22.05: `--propagate=stack` -> "Bad rlimit name: stack" (upper case only, `all` too)."""
    with pytest.raises(rlimits.PropagateError, match="Bad rlimit name: "):
        rlimits.propagated(text)


def test_slurm_conf_keys(tmp_path: object) -> None:
    from pathlib import Path

    base = Path(str(tmp_path))
    conf = base / "slurm.conf"
    conf.write_text("ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    assert load_slurm_conf(conf).propagate_rlimits == ALL
    conf.write_text(conf.read_text() + "PropagateResourceLimitsExcept=MEMLOCK,NOFILE\n")
    assert load_slurm_conf(conf).propagate_rlimits == ALL - {"MEMLOCK", "NOFILE"}
    conf.write_text(conf.read_text() + "PropagateResourceLimits=BOGUS\n")
    with pytest.raises(ConfigError, match="BOGUS"):
        load_slurm_conf(conf)


def test_submit_environment_is_this_process_soft_limits() -> None:
    env = rlimits.submit_environment()
    assert set(env) == {f"SLURM_RLIMIT_{n}" for n in rlimits.LIMITS}
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert env["SLURM_RLIMIT_NOFILE"] == str(soft)
    asked = rlimits.submit_environment("STACK,NOFILE")
    assert asked == {
        "SLURM_RLIMIT_STACK": "U" + env["SLURM_RLIMIT_STACK"],
        "SLURM_RLIMIT_NOFILE": "U" + str(soft),
    }
    assert set(rlimits.submit_environment("")) == set(env)  # --propagate alone: ALL


def test_job_limits_leave_the_environment_and_follow_slurm_conf() -> None:
    env = {
        "SLURM_RLIMIT_NOFILE": "1024",
        "SLURM_RLIMIT_MEMLOCK": "65536",
        "SLURM_RLIMIT_STACK": "U18446744073709551615",
        "SLURM_RLIMIT_BOGUS": "1",
        "PATH": "/bin",
    }
    limits = rlimits.job_limits(env, ALL - {"MEMLOCK", "STACK"})
    assert env == {"PATH": "/bin"}
    # STACK is excepted by slurm.conf but asked for with --propagate: it goes
    assert limits == {"NOFILE": (1024, False), "STACK": (resource.RLIM_INFINITY, True)}
    assert rlimits.exec_argument(limits) == f"{resource.RLIMIT_NOFILE}=1024,{resource.RLIMIT_STACK}=-1:u"


def test_caller_limits_round_trip() -> None:
    text = rlimits.encode_caller(
        {"NOFILE": (1024, 4096), "STACK": (resource.RLIM_INFINITY, resource.RLIM_INFINITY)}
    )
    assert text == "NOFILE=1024:4096,STACK=18446744073709551615:18446744073709551615"
    assert rlimits.decode_caller(text + ",BOGUS=1:1,CORE=x:y") == {
        "NOFILE": (1024, 4096),
        "STACK": (resource.RLIM_INFINITY, resource.RLIM_INFINITY),
    }


def test_the_runners_child_takes_the_callers_limits_and_drops_the_variable() -> None:
    """What cli.runner does with what cli/native/command.c sent: the caller's soft (and lower hard)
    limits become the process's; one above this process's hard limit stays at it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want_soft, want_hard = min(soft, 512), min(hard, 900)
    env = {
        rlimits.CALLER_VARIABLE: rlimits.encode_caller(
            {"NOFILE": (want_soft, want_hard), "CORE": (0, resource.RLIM_INFINITY)}
        ),
        "PATH": "/bin",
    }
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the limits are this process's from here on: in a child
        code = 1
        try:
            failed = rlimits.take_caller_limits(env)
            os.write(
                w,
                repr(
                    (
                        failed,
                        env,
                        resource.getrlimit(resource.RLIMIT_NOFILE),
                        resource.getrlimit(resource.RLIMIT_CORE)[0],
                    )
                ).encode(),
            )
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as fh:
        got = fh.read()
    os.waitpid(pid, 0)
    assert got == repr(([], {"PATH": "/bin"}, (want_soft, want_hard), 0))


def test_memory_cap_is_the_memory_held_in_bytes() -> None:
    assert rlimits.memory_cap(2000) == 2000 * 1024 * 1024
    assert rlimits.memory_cap(0) == 0


def test_exec_argument_puts_the_memory_cap_last_marked_hard() -> None:
    limits = {"RSS": (4096, False), "NOFILE": (1024, True)}
    rss, nofile = resource.RLIMIT_RSS, resource.RLIMIT_NOFILE
    assert rlimits.exec_argument(limits) == f"{rss}=4096,{nofile}=1024:u"
    assert rlimits.exec_argument(limits, 2048) == f"{rss}=4096,{nofile}=1024:u,{rss}=2048:h"
    assert rlimits.exec_argument({}, 2048) == f"{rss}=2048:h"


def _in_child(limits: dict[str, tuple[int, bool]], memory: int) -> tuple[int, int]:
    """RSS's (soft, hard) after apply() in a forked child (a hard limit, once lowered, stays so)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        rlimits.apply(limits, memory)
        soft, hard = resource.getrlimit(resource.RLIMIT_RSS)
        os.write(write_fd, f"{soft} {hard}".encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        text = fh.read()
    os.waitpid(pid, 0)
    soft, hard = (int(v) for v in text.split())
    return soft, hard


def test_apply_sets_the_memory_cap_soft_and_hard_over_a_propagated_rss() -> None:
    """22.05: the submitting shell's `ulimit -S -m 500000` or 5000000 -> 2048000 soft and hard
    for --mem=2000; no memory held -> the propagated soft limit."""
    hard = resource.getrlimit(resource.RLIMIT_RSS)[1]
    cap = rlimits.memory_cap(2000)
    expected = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    assert _in_child({"RSS": (500000 * 1024, False)}, cap) == (expected, expected)
    assert _in_child({"RSS": (5000000 * 1024, False)}, cap) == (expected, expected)
    low = min(500000 * 1024, hard) if hard != resource.RLIM_INFINITY else 500000 * 1024
    assert _in_child({"RSS": (500000 * 1024, False)}, 0) == (low, hard)
