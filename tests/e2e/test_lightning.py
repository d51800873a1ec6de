"""PyTorch Lightning on a shoal cluster: its SLURMEnvironment (lightning_fabric's, the class Lightning's
Trainer uses), unchanged, inside a 2-node x 2-task srun step; and the path its auto-requeue takes on
Slurm: `--signal=USR1@90` reaches every task of the step, rank 0 runs `scontrol requeue $SLURM_JOB_ID`,
and the requeued job's next run resumes (here with plain Python, so it runs without torch).
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._tools import put_commands_on_path
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

PROBE = """\
import json, os, socket
from lightning_fabric.plugins.environments import SLURMEnvironment

assert SLURMEnvironment.detect()
env = SLURMEnvironment()
env.validate_settings(num_devices=2, num_nodes=2)
print(json.dumps({"world_size": env.world_size(), "global_rank": env.global_rank(),
                  "local_rank": env.local_rank(), "node_rank": env.node_rank(),
                  "main_address": env.main_address, "main_port": env.main_port,
                  "job_id": env.job_id(), "node": os.environ["SLURMD_NODENAME"]}), flush=True)
"""

# Lightning's SIGUSR1 handler, in plain Python: every rank catches the signal; rank 0 requeues the
# job (scontrol requeue $SLURM_JOB_ID) and the others wait to be ended by the requeue.
REQUEUE = """\
import os, signal, subprocess, sys, time
d, rank = sys.argv[1], os.environ["SLURM_PROCID"]
if os.path.exists(os.path.join(d, "ckpt")):
    with open(os.path.join(d, f"resumed.{rank}"), "w") as f:
        f.write(os.environ.get("SLURM_RESTART_COUNT", "") + "\\n")
    sys.exit(0)
def on_usr1(signum, frame):
    with open(os.path.join(d, f"usr1.{rank}"), "w") as f:
        f.write("USR1\\n")
    if rank == "0":
        open(os.path.join(d, "ckpt"), "w").close()
        rc = subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]]).returncode
        with open(os.path.join(d, "requeue_rc"), "w") as f:
            f.write(f"{rc}\\n")
signal.signal(signal.SIGUSR1, on_usr1)
signal.signal(signal.SIGTERM, lambda s, f: None)  # as Lightning: the requeue's SIGTERM is not the end
open(os.path.join(d, f"up.{rank}"), "w").close()
time.sleep(120)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("lightning"), nodes=2)
    yield c
    stop_cluster(c)


def test_slurm_environment_in_a_two_node_step(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")
    pytest.importorskip(
        "lightning_fabric", reason="lightning-fabric is not installed (pip install -e '.[torch]')"
    )
    put_commands_on_path(cluster, tmp_path / "bin", monkeypatch)
    (tmp_path / "probe.py").write_text(PROBE)
    job = cluster.submit(
        "-N2",
        "--ntasks-per-node=2",
        "-o",
        str(tmp_path / "out"),
        "--wrap",
        f"srun {sys.executable} {tmp_path}/probe.py",
        cwd=tmp_path,
    )
    assert (
        cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=120) == "COMPLETED"
    ), (tmp_path / "out").read_text()
    ranks = [json.loads(line) for line in (tmp_path / "out").read_text().splitlines() if line.startswith("{")]
    assert sorted(r["global_rank"] for r in ranks) == [0, 1, 2, 3]
    assert {r["world_size"] for r in ranks} == {4}
    assert {r["job_id"] for r in ranks} == {job}
    nodes = cluster.ok("scontrol", "show", "hostnames", cluster.job_field(job, "%N")).split()
    for r in ranks:  # block layout: ranks 0,1 on the first node, 2,3 on the second
        assert (r["node_rank"], r["local_rank"]) == divmod(r["global_rank"], 2)
        assert r["node"] == nodes[r["node_rank"]]
    # one rendezvous point for all: the first node's address, which resolves, and one port
    first = cluster.ok("scontrol", "show", "node", nodes[0]).split("NodeAddr=")[1].split()[0]
    assert {r["main_address"] for r in ranks} == {first}
    assert socket.getaddrinfo(first, None)
    assert len({r["main_port"] for r in ranks}) == 1


def test_usr1_before_the_limit_reaches_every_task_and_rank_0_requeues(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_commands_on_path(cluster, tmp_path / "bin", monkeypatch)
    (tmp_path / "step.py").write_text(REQUEUE)
    # Lightning's advice: `#SBATCH --signal=USR1@90`; with a 2-minute limit it comes after ~30 s
    job = cluster.submit(
        "-N2",
        "--ntasks-per-node=2",
        "-t",
        "2",
        "--signal=USR1@90",
        "--open-mode=append",
        "-o",
        str(tmp_path / "out"),
        "--wrap",
        f"srun {sys.executable} {tmp_path}/step.py {tmp_path}",
        cwd=tmp_path,
    )
    wait_until("every rank to start", lambda: all((tmp_path / f"up.{r}").exists() for r in range(4)))
    assert (
        cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=150) == "COMPLETED"
    ), (tmp_path / "out").read_text()
    assert [(tmp_path / f"usr1.{r}").exists() for r in range(4)] == [True] * 4  # the whole step, both nodes
    assert (tmp_path / "requeue_rc").read_text() == "0\n"
    assert [(tmp_path / f"resumed.{r}").read_text() for r in range(4)] == ["1\n"] * 4
    assert "Restarts=1" in cluster.ok("scontrol", "show", "job", str(job))
