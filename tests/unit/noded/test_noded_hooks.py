"""noded.hooks and noded.healthcheck: the script runner and what picks a node for a health check."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from noded import hooks
from noded.healthcheck import selected


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_glob_runs_its_matches_in_sorted_order_and_a_plain_path_as_given(tmp_path: Path) -> None:
    for name in ("20-b", "10-a", "30-c"):
        _script(tmp_path / name, "")
    assert hooks.expand([f"{tmp_path}/*", "/etc/x"]) == [
        f"{tmp_path}/10-a",
        f"{tmp_path}/20-b",
        f"{tmp_path}/30-c",
        "/etc/x",
    ]
    assert hooks.expand([f"{tmp_path}/none-*"]) == []  # a glob that matches nothing runs nothing


def test_the_scripts_run_in_order_and_the_first_failure_stops_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "log"
    _script(tmp_path / "1", f"echo one >> {log}\n")
    _script(tmp_path / "2", f"echo two >> {log}\necho 'disk gone' >&2\nexit 4\n")
    _script(tmp_path / "3", f"echo three >> {log}\n")
    result = hooks.run_all([f"{tmp_path}/[0-9]"], {}, None, "prolog")
    assert not result.ok
    assert result.message == f"prolog {tmp_path}/2 failed (exit code 4): disk gone"
    assert log.read_text() == "one\ntwo\n"


@pytest.mark.parametrize("make", ["missing", "not executable"], ids=str)
def test_a_missing_or_not_executable_script_fails_clearly(tmp_path: Path, make: str) -> None:
    path = tmp_path / "prolog"
    if make == "not executable":
        path.write_text("#!/bin/sh\n")
        path.chmod(0o644)
    result = hooks.run_all([str(path)], {}, None, "prolog")
    assert (result.ok, result.message) == (False, f"prolog {path} can not be executed")


def test_a_script_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    path = _script(tmp_path / "hang", f"/bin/sleep 300 &\necho $! > {pids}\nwait\n")
    result = hooks.run_script(path, {}, 0.5, "epilog")
    assert (result.ok, result.message) == (False, f"epilog {path} killed after 0.5 s (timeout)")
    child = int(pids.read_text())
    for _ in range(50):  # the kill is sent; the child may take a moment to be reaped by init
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the prolog's child outlived it")


def test_the_script_gets_only_the_environment_it_is_given(tmp_path: Path) -> None:
    out = tmp_path / "env"
    path = _script(tmp_path / "p", f"/usr/bin/env > {out}\n")
    assert hooks.run_script(path, {"SLURM_JOB_ID": "7"}, None, "prolog").ok
    names = {line.split("=", 1)[0] for line in out.read_text().splitlines()}
    assert names - {"PWD", "SHLVL", "_"} == {"SLURM_JOB_ID"}


@pytest.mark.parametrize(
    ("output", "env", "printed"),
    [
        ("export A=1\nexport B=x=y\n", {"A": "1", "B": "x=y", "KEEP": "k", "GONE": "g"}, []),
        ("unset GONE\nprint hello world\n", {"KEEP": "k"}, ["hello world"]),
        ("junk line\nexport\nexport =v\n", {"KEEP": "k", "GONE": "g"}, []),
    ],
    ids=["export", "unset-print", "ignored"],
)
def test_task_prolog_lines(output: str, env: dict[str, str], printed: list[str]) -> None:
    task_env = {"KEEP": "k", "GONE": "g"}
    assert hooks.apply_task_prolog(output, task_env) == printed
    assert task_env == env


@pytest.mark.parametrize(
    ("states", "node", "picked"),
    [
        (("ANY",), "ALLOCATED+DRAIN", True),
        (("IDLE",), "IDLE", True),
        (("IDLE",), "IDLE+DRAIN", True),
        (("IDLE",), "MIXED", False),
        (("NONDRAINED_IDLE",), "IDLE+DRAIN", False),
        (("NONDRAINED_IDLE",), "IDLE", True),
        (("ALLOC", "MIXED"), "MIXED", True),
        (("ALLOC", "MIXED"), "ALLOCATED", True),
        (("ALLOC",), "IDLE", False),
        (("IDLE", "CYCLE"), "DOWN*", False),
        (("IDLE",), "", True),  # ctld did not answer: checked
    ],
    ids=lambda v: str(v),
)
def test_health_check_node_state(states: tuple[str, ...], node: str, picked: bool) -> None:
    assert selected(states, node) is picked


def test_serial_runs_one_script_at_a_time_on_the_node(tmp_path: Path) -> None:
    """PrologFlags=Serial: the node's Prologs and Epilogs (noded's and every stepd's) wait for each other."""
    log = tmp_path / "log"
    script = _script(tmp_path / "p.sh", f"echo start >> {log}\n/bin/sleep 0.3\necho end >> {log}\n")

    def one() -> None:
        with hooks.serial(tmp_path, True):
            assert hooks.run_all([script], {}, 10, "prolog").ok

    runs = [threading.Thread(target=one) for _ in range(3)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert log.read_text().split() == ["start", "end"] * 3  # never two at once
