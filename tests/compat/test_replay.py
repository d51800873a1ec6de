"""Replay every captured real-Slurm scenario against one shoal cluster of the same shape and compare.

One cluster (`shoal up --realslurm-shape`: 4 x 16 CPUs, 64000 MB, 8 gpu:h100, batch and debug, accounts
research and physics) serves every scenario; each one's own jobs are cancelled after it, by id. A
scenario whose difference is known and tracked is listed in known_differences.toml and runs as a strict
xfail: when shoal is fixed it XPASSes, which fails the suite until its entry is removed.
"""

from __future__ import annotations

import difflib
import shutil
import socket
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.scenario import (
    HERE,
    Facts,
    Run,
    Scenario,
    Side,
    cancel,
    cluster_jobs,
    load_all,
    normalise,
    play,
    shoal_bin,
    shoal_pythonpath,
)
from tests.e2e.conftest import _let_everyone_through, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e

REAL_CONF = "/etc/slurm/slurm.conf"
KNOWN_FILE = HERE / "known_differences.toml"
SCENARIOS = load_all()


def known() -> dict[str, dict[str, str]]:
    with open(KNOWN_FILE, "rb") as f:
        return tomllib.load(f)


def _param(sc: Scenario) -> object:
    entry = known().get(sc.id)
    if entry is None:
        return pytest.param(sc, id=sc.id)
    reason = f"{entry['reason']} (tracked by {entry['issue']})"
    return pytest.param(sc, id=sc.id, marks=pytest.mark.xfail(strict=True, reason=reason))


@pytest.fixture(scope="module")
def shoal() -> Iterator[Side]:
    # not under pytest's basetemp: any pytest run of the same user makes /tmp/pytest-of-USER 0700 again,
    # and alice must reach the agent socket and the work directory for the whole run
    base = Path(tempfile.mkdtemp(prefix="shoal-compat-", dir="/tmp"))
    base.chmod(0o755)
    cluster = start_cluster(
        base / "cluster", nodes=4, cpus=16, mem=64000, accounting=True, up_args=("--realslurm-shape",)
    )
    work = base / "work"
    work.mkdir()
    _let_everyone_through(work)
    side = Side(
        name="shoal",
        path=f"{shoal_bin(base / 'bin')}:/usr/bin:/bin",
        conf=str(cluster.conf),
        workdir=work,
        extra_env={"PYTHONPATH": shoal_pythonpath()},
        paths=(str(cluster.dir),),
        settles=True,
    )
    ready(side)
    try:
        yield side
    finally:
        stop_cluster(cluster)
        shutil.rmtree(base, ignore_errors=True)


def ready(side: Side, timeout: float = 60) -> None:
    """Until alice and bob can submit three times running: the account tree has reached ctld."""
    deadline = time.monotonic() + timeout
    streak = 0
    while streak < 3:
        ok = all(side.shell(u, "sbatch --test-only --wrap true").returncode == 0 for u in ("alice", "bob"))
        streak = streak + 1 if ok else 0
        if time.monotonic() > deadline:
            raise AssertionError("alice and bob cannot submit to the compat cluster")
        time.sleep(0.5)


def facts(
    sc: Scenario,
    jobs: list[int],
    workdir: str,
    conf: str,
    paths: tuple[str, ...] = (),
    foreign: frozenset[int] | None = None,
) -> Facts:
    return Facts(
        jobs=tuple(jobs),
        workdir=workdir,
        conf=conf,
        hostname=socket.gethostname().split(".")[0],
        paths=paths,
        all_rows=sc.all_rows,
        foreign=foreign,
    )


def shown(stdout: str, stderr: str, exit: int, f: Facts) -> str:
    """One text of what a user saw, normalised: the three parts a scenario compares."""
    return (
        f"--- stdout ---\n{normalise(stdout, f)}--- stderr ---\n{normalise(stderr, f)}--- exit: {exit} ---\n"
    )


def wait_idle(side: Side, timeout: float = 90) -> None:
    """Until no job is pending, running or completing, so the next scenario starts from idle nodes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queued = side.shell("root", "squeue -h -o %i").stdout.strip()
        states = set(side.shell("root", "sinfo -h -N -o %t").stdout.split())
        if not queued and states == {"idle"}:  # nodes released too (a completing job holds its node)
            return
        time.sleep(0.3)
    raise AssertionError(f"jobs still queued after {timeout}s: {side.shell('root', 'squeue').stdout}")


@pytest.mark.parametrize("sc", [_param(s) for s in SCENARIOS])
def test_replay(sc: Scenario, shoal: Side) -> None:
    run: Run | None = None
    try:
        run = play(sc, shoal)
        want = shown(sc.stdout, sc.stderr, sc.exit, facts(sc, sc.jobs, sc.cwd or "", REAL_CONF))
        got = shown(
            run.stdout,
            run.stderr,
            run.exit,
            facts(sc, run.jobs, str(shoal.workdir), shoal.conf, shoal.paths, cluster_jobs(shoal)),
        )
        if want != got:
            diff = "".join(
                difflib.unified_diff(want.splitlines(True), got.splitlines(True), "real 22.05", "shoal")
            )
            setup = "\n".join(run.log)
            pytest.fail(f"{sc.id}: shoal differs from real Slurm\n{diff}\nsetup:\n{setup}", pytrace=False)
    finally:
        if run is not None:
            cancel(shoal, run.all_jobs)
        wait_idle(shoal)


def test_known_differences_name_real_scenarios() -> None:
    """Every allow-list entry names a scenario and says why and where it is tracked (no rotting entries)."""
    ids = {s.id for s in SCENARIOS}
    for name, entry in known().items():
        assert name in ids, f"known_differences.toml: {name} is not a scenario"
        assert entry.get("reason") and entry.get("issue"), (
            f"known_differences.toml: {name} lacks reason or issue"
        )


def test_enough_scenarios() -> None:
    """The shared captures plus at least 40 of our own (issue 13)."""
    shared = {p.stem for p in Path("/work/shared/reference/slurm-22.05").glob("[0-9]*.txt")}
    ours = [s for s in SCENARIOS if not any(n.startswith("from /work/shared") for n in s.notes)]
    assert len(ours) >= 40, len(ours)
    if shared:
        assert shared <= {s.id for s in SCENARIOS}
