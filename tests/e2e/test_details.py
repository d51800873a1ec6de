"""What scontrol shows and when accounting changes take effect, end to end (issue 13, compared with
the real Slurm 22.05 of this machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def acct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("details"), accounting=True,
                      extra=("AccountingStorageEnforce=associations,limits,qos",))
    yield c
    stop_cluster(c)


def test_a_qos_added_to_a_user_is_usable_the_moment_sacctmgr_returns(acct: Cluster, workdir: Path) -> None:
    """dbd hands the change to ctld before sacctmgr returns (slurmdbd does the same for slurmctld):
    `sacctmgr -i modify user ... set qos+=X` then at once `sbatch -q X` never fails, 20 times over."""
    acct.ok("sacctmgr", "-i", "add", "account", "racing")
    acct.ok("sacctmgr", "-i", "add", "user", "root", "account=racing")
    for i in range(20):
        acct.ok("sacctmgr", "-i", "add", "qos", f"race{i}")
        acct.ok("sacctmgr", "-i", "modify", "user", "root", "set", f"qos+=race{i}")
        out = acct.run("sbatch", "-A", "racing", "-q", f"race{i}", "--hold", "--wrap", "true", cwd=workdir)
        assert out.returncode == 0, f"round {i}: {out.stderr}"
        acct.ok("scancel", out.stdout.split()[-1])
    # and a QOS the user was never given is still refused (the check is real)
    acct.ok("sacctmgr", "-i", "add", "qos", "notmine")
    out = acct.run("sbatch", "-A", "racing", "-q", "notmine", "--wrap", "true", cwd=workdir)
    assert out.returncode != 0 and "Invalid qos specification" in out.stderr
