"""noded's stepd fork server: it starts supervisors, and a dead one is replaced at the next launch.

(Every test of tests/unit/noded/test_noded_stepd.py also runs with the fork server.)"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from noded import stepd_spawn
from tests.unit.noded.test_noded_stepd import submit, wait_status


@pytest.fixture
def fork_server() -> Iterator[None]:
    stepd_spawn.start_fork_server()
    yield
    stepd_spawn.stop_fork_server()


def test_the_fork_server_starts_supervisors_and_is_restarted_when_it_dies(
    open_dirs: tuple[Path, Path], fork_server: None
) -> None:
    spool_root, work = open_dirs
    server = stepd_spawn._server
    assert server._proc is not None
    first = server._proc.pid
    answered = server._next_id
    assert wait_status(submit(spool_root, work, "#!/bin/sh\necho one\n", job_id=21))["exit_code"] == 0
    assert server._next_id == answered + 1  # the fork server answered, not a new interpreter
    os.kill(first, signal.SIGKILL)
    server._proc.wait()
    assert wait_status(submit(spool_root, work, "#!/bin/sh\necho two\n", job_id=22))["exit_code"] == 0
    assert server._proc is not None and server._proc.pid != first and server._proc.poll() is None
    assert (work / "slurm-22.out").read_text() == "two\n"


def test_without_the_fork_server_supervisors_start_as_a_new_interpreter(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    assert stepd_spawn._server._proc is None
    assert wait_status(submit(spool_root, work, "#!/bin/sh\necho direct\n", job_id=23))["exit_code"] == 0
    assert (work / "slurm-23.out").read_text() == "direct\n"
