"""srun's pure pieces: exit messages and status, --export with quotes, task patterns."""

from __future__ import annotations

import pytest

from cli.srun import exit_messages, force_terminated, split_export, step_exit_status, task_export
from cli.stepio import TaskExit
from noded.tasks import expand_pattern


def test_exit_messages_group_tasks_per_node() -> None:
    exits = {
        0: TaskExit("node1", 3, 0),
        1: TaskExit("node1", 3, 0),
        2: TaskExit("node2", 0, 9),
        3: TaskExit("node2", 0, 0),
    }
    assert exit_messages(exits) == [
        "srun: error: node1: tasks 0-1: Exited with exit code 3",
        "srun: error: node2: task 2: Killed",
    ]
    assert step_exit_status(exits) == 137


def test_an_oom_killed_task_is_reported_as_slurm_does() -> None:
    exits = {0: TaskExit("node1", 0, 9, oom=True), 1: TaskExit("node1", 0, 0)}
    assert exit_messages(exits) == ["srun: error: node1: task 0: Out Of Memory"]
    assert step_exit_status(exits) == 253  # 128 + 125, Slurm's SIG_OOM as a signal number


@pytest.mark.parametrize(
    ("sig", "oom", "lines"),
    [
        (9, False, ["srun: Force Terminated StepId=5.0"]),  # 125: kill -9 $$
        (15, False, ["srun: Force Terminated StepId=5.0"]),
        (10, False, []),
        (11, False, []),
        (2, False, []),  # USR1, SEGV, INT: only the task's line (22.05)
        (9, True, []),
        (0, False, []),
    ],
    ids=["KILL", "TERM", "USR1", "SEGV", "INT", "oom", "exit"],
)
def test_force_terminated_after_a_kill_or_term(sig: int, oom: bool, lines: list[str]) -> None:
    exits = {0: TaskExit("node1", 0 if sig else 3, sig, oom=oom), 1: TaskExit("node1", 0, 0)}
    assert force_terminated(exits, "StepId=5.0") == lines


@pytest.mark.parametrize(
    ("spec", "env", "want"),
    [
        ('ALL,K="v"', {"A": "1"}, {"A": "1", "K": "v"}),
        ("ALL,K='a,b'", {}, {"K": "a,b"}),
        ("NONE,K=v", {"A": "1", "SLURM_X": "2"}, {"SLURM_X": "2", "K": "v"}),
        ("K=v", {"A": "1"}, {"K": "v"}),
        (None, {"A": "1"}, {"A": "1"}),
    ],
    ids=["deepspeed-quotes", "comma-in-quotes", "none", "list-without-all", "default-all"],
)
def test_task_export(spec: str | None, env: dict[str, str], want: dict[str, str]) -> None:
    assert task_export(spec, env) == want


def test_split_export_keeps_quoted_commas() -> None:
    assert split_export('ALL,A="x,y",B=z') == ["ALL", 'A="x,y"', "B=z"]


def test_task_patterns() -> None:
    fields = {"j": "12", "t": "3", "n": "1", "N": "node2", "s": "0", "u": "alice", "x": "train"}
    assert expand_pattern("out-%j-%t-%N-%s-%u-%x-%n.txt", fields) == "out-12-3-node2-0-alice-train-1.txt"
    assert expand_pattern("o-%4t", fields) == "o-0003"


CTRL_C_WHILE_SRUN_HOLDS_ITS_LOCK = """
import signal, sys
from cli.srun import Interrupts
from cli.stepio import StepIO

io = StepIO(label=False, stdin_targets="none")
interrupts = Interrupts(io, "StepId=1.0", 2)
with io.lock:  # where srun's main thread is when it checks whether the step has ended
    interrupts.on_sigint(signal.SIGINT, None)  # Ctrl-C: the handler runs in that same thread
    interrupts.on_sigint(signal.SIGINT, None)  # and again within a second: abort
print("aborted" if interrupts.cancelled else "not aborted")
"""


def test_ctrl_c_while_srun_holds_its_io_lock_does_not_hang_srun() -> None:
    """A Ctrl-C handler runs in srun's main thread, which may hold the step I/O lock at that moment."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_SRUN_HOLDS_ITS_LOCK],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.stdout.strip() == "aborted"
    assert "srun: interrupt (one more within 1 sec to abort)" in out.stderr
