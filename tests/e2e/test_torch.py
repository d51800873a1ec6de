"""A real PyTorch job across 2 emulated nodes: gloo all-reduce through srun.

Once with the variables srun injects (MASTER_ADDR, RANK, WORLD_SIZE ...), once with the user's own
idiom (MASTER_ADDR from `scontrol show hostnames`, `srun torchrun` with a c10d rendezvous). Node
names must resolve for the second, so that cluster runs inside a private mount namespace
(`unshare -m`) whose /etc/hosts maps them to their 127.x addresses; the machine's /etc/hosts is
never touched. In that namespace the machine's own hostname is also an alias of the first node,
because emulated nodes share one host name and torchrun decides who hosts the rendezvous store by
comparing addresses. Skipped, with the reason, when torch is not installed (`pip install -e '.[torch]'`).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e

DDP = """\
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} on {os.environ['SLURMD_NODENAME']}: {value.item():g}",
      flush=True)
dist.destroy_process_group()
"""

INJECTED = """#!/bin/bash
export GLOO_SOCKET_IFNAME=lo
srun {python} {dir}/ddp.py
"""

TORCHRUN = """#!/bin/bash
export GLOO_SOCKET_IFNAME=lo
export PATH={bindir}:$PATH
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:29500 {dir}/ddp.py
"""


def _torch_or_skip() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (pip install -e '.[torch]'): PyTorch e2e test skipped")


def _run_job(cluster: Cluster, workdir: Path, script: str, *sbatch: str, timeout: float = 240) -> str:
    (workdir / "ddp.py").write_text(DDP)
    path = workdir / "job.sh"
    path.write_text(script.format(python=sys.executable, dir=workdir, bindir=os.path.dirname(sys.executable)))
    out = workdir / "job.out"
    job = cluster.submit(*sbatch, "-o", str(out), str(path))
    cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=timeout)
    return out.read_text()


def _ranks(text: str) -> list[tuple[int, int, float]]:
    found = re.findall(r"rank (\d+)/(\d+) on \S+: ([\d.]+)", text)
    return sorted((int(r), int(w), float(v)) for r, w, v in found)


def test_ddp_with_injected_variables(cluster: Cluster, workdir: Path) -> None:
    _torch_or_skip()
    text = _run_job(cluster, workdir, INJECTED, "-N2", "--ntasks-per-node=2")
    assert _ranks(text) == [(r, 4, 10.0) for r in range(4)], text


def test_torchrun_with_c10d_rendezvous_in_a_private_namespace(tmp_path: Path) -> None:
    _torch_or_skip()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private /etc/hosts")
    workdir = tmp_path / "work"
    workdir.mkdir()
    cmd = [sys.executable, "-m", "tests.e2e.test_torch", str(tmp_path / "cluster"), str(workdir)]
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", *cmd], capture_output=True, text=True,
                          timeout=280, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert _ranks(proc.stdout) == [(0, 2, 3.0), (1, 2, 3.0)], proc.stdout + proc.stderr


def _private_hosts(cluster: Cluster, directory: Path) -> None:
    """Bind-mount an /etc/hosts naming the emulated nodes (this process is in its own mount namespace)."""
    conf = cluster.conf.read_text()
    pairs = re.findall(r"NodeName=(\S+)\s.*?NodeAddr=(\S+)", conf)
    if not pairs:
        raise RuntimeError("no NodeName/NodeAddr lines in slurm.conf")
    lines = [f"{addr} {name}" + (f" {socket.gethostname()}" if i == 0 else "")
             for i, (name, addr) in enumerate(pairs)]
    original = [ln for ln in Path("/etc/hosts").read_text().splitlines()
                if socket.gethostname() not in ln.split()[1:]]
    hosts = directory / "hosts"
    hosts.write_text("\n".join(original + lines) + "\n")
    hosts.chmod(0o644)
    subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)


def _namespace_main(cluster_dir: Path, workdir: Path) -> int:
    cluster = start_cluster(cluster_dir, nodes=2)
    try:
        _private_hosts(cluster, cluster_dir)
        workdir.chmod(0o1777)
        start = time.monotonic()
        text = _run_job(cluster, workdir, TORCHRUN, "-N2", "--ntasks-per-node=1")
        print(text)
        print(f"(job took {time.monotonic() - start:.1f}s)", file=sys.stderr)
        return 0
    finally:
        stop_cluster(cluster)


if __name__ == "__main__":
    sys.exit(_namespace_main(Path(sys.argv[1]), Path(sys.argv[2])))
