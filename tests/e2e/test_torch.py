"""A real PyTorch job across 2 emulated nodes: gloo all-reduce through srun.

Once with the variables srun injects (MASTER_ADDR, RANK, WORLD_SIZE ...), once with the user's own
idiom (MASTER_ADDR from `scontrol show hostnames`, `srun torchrun` with a c10d rendezvous), which
works because the local cluster's jobs resolve node names and see their node's hostname (noded's
node namespaces; the guides' `--rdzv_endpoint=$(scontrol show hostnames ...)` line on 2x2 is in
test_node_names.py). Skipped, with the reason, when torch is not installed (`pip install -e '.[torch]'`).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster

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


def test_torchrun_with_c10d_rendezvous_on_the_first_node_name(cluster: Cluster, workdir: Path) -> None:
    _torch_or_skip()
    text = _run_job(cluster, workdir, TORCHRUN, "-N2", "--ntasks-per-node=1")
    assert _ranks(text) == [(0, 2, 3.0), (1, 2, 3.0)], text
