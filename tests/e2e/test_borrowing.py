"""Quota borrowing end to end (beyond Slurm): one node of 4 GPUs, account `lab` with `teama` and
`teamb` guaranteeing 2 GPUs each (GrpTRES) and lending up to 2 (MaxBorrowTRES); the same user runs
in both (`-A`). teamb borrows teama's idle GPUs; when teama's job comes, the borrowed job is
requeued within its GraceTime and teama's job starts; the borrowed job runs again afterwards."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e
GRACE = 2  # seconds: the QOS GraceTime of the borrowed job


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("borrow"),
        nodes=1,
        accounting=True,
        extra=("AccountingStorageEnforce=associations,limits,qos",),
        up_args=("--gpus-per-node", "4", "--no-cgroups"),
    )
    c.ok("sacctmgr", "-i", "add", "account", "lab")
    for team in ("teama", "teamb"):
        c.ok(
            "sacctmgr",
            "-i",
            "add",
            "account",
            team,
            "parent=lab",
            "GrpTRES=gres/gpu=2",
            "MaxBorrowTRES=gres/gpu=2",
        )
    c.ok("sacctmgr", "-i", "add", "user", "nobody", "account=teama,teamb")
    c.ok("sacctmgr", "-i", "modify", "qos", "normal", "set", f"GraceTime={GRACE}")
    time.sleep(2.5)  # ctld polls the association version every second
    yield c
    stop_cluster(c)


def test_sacctmgr_shows_the_borrowing_limit(lab: Cluster) -> None:
    out = lab.ok("sacctmgr", "-P", "-n", "show", "assoc", "format=Account,User,GrpTRES,MaxBorrowTRES")
    rows = [line.split("|") for line in out.splitlines()]
    assert ["teama", "", "gres/gpu=2", "gres/gpu=2"] in rows and [
        "teamb",
        "",
        "gres/gpu=2",
        "gres/gpu=2",
    ] in rows
    assert ["lab", "", "", ""] in rows


def submit(c: Cluster, workdir: Path, account: str, seconds: int | str) -> int:
    return c.submit(
        "-A",
        account,
        "--gres=gpu:2",
        "-o",
        "/dev/null",
        "--wrap",
        f"sleep {seconds}",
        user=NOBODY,
        cwd=workdir,
    )


def test_a_sibling_borrows_idle_gpus_up_to_its_limit(lab: Cluster, workdir: Path) -> None:
    own = submit(lab, workdir, "teamb", 60)
    lab.wait_state(own, {"RUNNING"})
    borrowed = submit(lab, workdir, "teamb", 60)  # past teamb's 2 GPUs: borrows teama's idle ones
    lab.wait_state(borrowed, {"RUNNING"}, timeout=20)
    third = submit(lab, workdir, "teamb", 1)  # MaxBorrowTRES=2 is used up
    wait_until("AssocGrpGRES", lambda: lab.job_field(third, "%r") == "AssocGrpGRES", timeout=10)
    lab.ok("scancel", str(own), str(borrowed), str(third))
    for job in (own, borrowed, third):
        lab.wait_state(job, {"CANCELLED"})


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_borrowed_gpus_are_reclaimed_for_their_owner(lab: Cluster, workdir: Path) -> None:
    runs, terms = workdir / "runs", workdir / "terms"
    script = workdir / "borrower.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"echo run >> {runs}\n"
        f'if [ "$(wc -l < {runs})" -ge 2 ]; then sleep 1; exit 0; fi\n'  # the run after the requeue completes
        f"trap 'echo term >> {terms}' TERM\n"  # the first ignores SIGTERM: SIGKILL ends it after GraceTime
        "while true; do sleep 0.2; done\n"
    )
    script.chmod(0o755)
    own = submit(lab, workdir, "teamb", 120)
    lab.wait_state(own, {"RUNNING"})
    borrowed = lab.submit(
        "-A", "teamb", "--gres=gpu:2", "-o", "/dev/null", str(script), user=NOBODY, cwd=workdir
    )
    lab.wait_state(borrowed, {"RUNNING"}, timeout=20)
    wait_until("the borrowed job's first run", lambda: lines(runs) == ["run"])

    asked = time.monotonic()
    owner = submit(lab, workdir, "teama", 3)  # within teama's guarantee: takes its GPUs back
    lab.wait_state(owner, {"RUNNING"}, timeout=GRACE + 15)
    waited = time.monotonic() - asked
    assert lines(terms) == ["term"]  # SIGTERM first, SIGKILL after the QOS's GraceTime
    assert GRACE - 1 <= waited <= GRACE + 10
    assert lab.state(own) == "RUNNING"  # within teamb's own guarantee: never reclaimed
    assert lab.state(borrowed) == "PENDING"
    assert "Restarts=1" in lab.ok("scontrol", "show", "job", str(borrowed))

    assert lab.wait_state(owner, {"COMPLETED"}, timeout=30) == "COMPLETED"
    # teama is idle again: the requeued job borrows once more and completes
    assert lab.wait_state(borrowed, {"COMPLETED"}, timeout=60) == "COMPLETED"
    assert lines(runs) == ["run", "run"]
    wait_until(
        "sacct to show the reclaimed run",
        lambda: (
            lab.ok("sacct", "-D", "-X", "-P", "-n", "-o", "JobID,Account,State", "-j", str(borrowed)).split()
            == [f"{borrowed}|teamb|PREEMPTED", f"{borrowed}|teamb|COMPLETED"]
        ),
    )
    lab.ok("scancel", str(own))
