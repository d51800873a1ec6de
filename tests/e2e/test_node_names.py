"""Node names resolve inside the jobs of a local cluster, and each emulated node's hostname is its name.

The script every guide shows computes the rendezvous host as
`$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)`; torchrun then resolves it and compares
it with `hostname` to decide who hosts the c10d store. On a local cluster (one host, nodes on
loopback addresses) noded gives each emulated node's batch script and tasks a private /etc/hosts
(the cluster's node lines, then the host's) and hostname; the host's own stay as they were.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster
from tests.e2e.test_torch import DDP

pytestmark = pytest.mark.e2e

SCRIPT = """#!/bin/bash
echo "batch hostname: $(hostname)"
first=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
echo "first: $first"
getent hosts $first | sed 's/^/resolved: /'
srun bash -c 'echo "task $SLURMD_NODENAME: $(hostname) $(getent hosts $(hostname) | tr -s " \\t" " ")"'
"""

# The guides' script, unchanged but for PATH (torchrun lives in this test's virtualenv).
TORCHRUN = """#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=1
export PATH={bindir}:$PATH
srun torchrun --nnodes 2 --nproc_per_node 2 --rdzv_id $SLURM_JOB_ID --rdzv_backend c10d \\
    --rdzv_endpoint=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1):29500 {dir}/ddp.py
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("names"), nodes=2)
    yield c
    stop_cluster(c)


def _addrs(cluster: Cluster) -> dict[str, str]:
    return dict(re.findall(r"^NodeName=(node\d+) NodeAddr=(\S+)", cluster.conf.read_text(), re.M))


def _run(
    cluster: Cluster, workdir: Path, script: str, *sbatch: str, user: int | None = None, timeout: float = 60
) -> str:
    path = workdir / f"job-{user}.sh"
    path.write_text(script)
    path.chmod(0o755)
    out = workdir / f"job-{user}.out"
    job = cluster.submit(*sbatch, "-o", str(out), str(path), user=user, cwd=workdir)
    state = cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=timeout)
    text = out.read_text() if out.exists() else ""
    assert state == "COMPLETED", f"job {job} {state}:\n{text}"
    return text


def _others_may_run(path: str) -> bool:
    """Whether a user other than its owner can execute `path` (every directory on the way searchable)."""
    real = Path(os.path.realpath(path))
    return all(p.stat().st_mode & 0o001 for p in (real, *real.parents))


@pytest.mark.parametrize("user", [None, NOBODY], ids=["root", "nobody"])
def test_the_guides_rendezvous_line_resolves_and_each_node_is_named(
    cluster: Cluster, workdir: Path, user: int | None
) -> None:
    addrs = _addrs(cluster)
    host_name, host_hosts = socket.gethostname(), Path("/etc/hosts").read_text()
    script = SCRIPT
    if user is not None and not _others_may_run(sys.executable):
        # srun is Python: nobody cannot start this interpreter (it lives under /root); the batch
        # script alone then shows each node's view, one job per node
        script = SCRIPT.replace("srun bash -c", "bash -c")
        text = _run(cluster, workdir, script, "-N1", "-w", "node2", user=user)
        assert "batch hostname: node2\n" in text and "first: node2\n" in text, text
        assert re.findall(r"^resolved: (\S+)\s+(\S+)", text, re.M) == [(addrs["node2"], "node2")], text
    text = _run(cluster, workdir, script, "-N2", "--ntasks-per-node=1", user=user)
    assert "batch hostname: node1\n" in text, text
    assert "first: node1\n" in text, text
    resolved = re.findall(r"^resolved: (\S+)\s+(\S+)", text, re.M)
    assert resolved == [(addrs["node1"], "node1")], text
    tasks = sorted(re.findall(r"^task (\S+): (.*)$", text, re.M))
    nodes = ("node1", "node2") if script == SCRIPT else ("node1",)
    assert tasks == [(n, f"{n} {addrs[n]} {n}") for n in nodes], text
    # the host keeps its own name and file
    assert (socket.gethostname(), Path("/etc/hosts").read_text()) == (host_name, host_hosts)


def test_a_step_from_the_host_sees_its_node_name(cluster: Cluster) -> None:
    out = cluster.ok("srun", "-N2", "-l", "hostname")
    assert sorted(out.split()) == ["0:", "1:", "node1", "node2"], out


def test_torchrun_c10d_rendezvous_on_the_first_node_name_2x2(cluster: Cluster, workdir: Path) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip(
            "torch is not installed (pip install -e '.[torch]'): the 2x2 gloo rendezvous part is skipped"
        )
    (workdir / "ddp.py").write_text(DDP)
    text = _run(
        cluster, workdir, TORCHRUN.format(bindir=Path(sys.executable).parent, dir=workdir), timeout=240
    )
    found = sorted(
        (int(r), int(w), float(v)) for r, w, v in re.findall(r"rank (\d+)/(\d+) on \S+: ([\d.]+)", text)
    )
    assert found == [(r, 4, 10.0) for r in range(4)], text
