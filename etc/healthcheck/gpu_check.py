#!/usr/bin/env python3
"""HealthCheckProgram example: drain this node when a GPU that gres.conf/slurm.conf promise is gone.

Run with shoal's Python (point the first line at it, e.g. #!/opt/shoal/bin/python). shoal-noded
runs it as root every HealthCheckInterval with SLURMD_NODENAME and SLURM_CONF set. It asks NVML
(pynvml; the fake NVML of $SHOAL_FAKE_NVML where there is no driver) for the node's GPUs, compares
them with the node's configured Gres=gpu count and gres.conf's File= devices, and when one is
missing runs `scontrol update nodename=NODE state=drain reason="gpu_check: ..."` and exits 1.
A node that is healthy again is not resumed: an admin does that (`scontrol update ... state=resume`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from noded.gpu.discovery import load_backend, nvml_gpus
from shoal.conf import ConfigError, load_slurm_conf


def problems(node: str) -> list[str]:
    """What is wrong with the node's GPUs (empty: nothing)."""
    cfg = load_slurm_conf(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    conf = cfg.node(node)
    if conf is None:
        return [f"node {node} is not in {cfg.path}"]
    expected = conf.gres_count("gpu")
    files = [f for line in cfg.gres_conf.for_node(node) if line.name == "gpu" for f in line.files]
    if not expected and not files:
        return []
    nvml = load_backend()
    if nvml is None:
        return [f"NVML unavailable, {expected} GPU(s) configured"]
    try:
        found = nvml_gpus(nvml)
    except Exception as exc:  # noqa: BLE001 - any NVML error means the GPUs cannot be trusted
        return [f"NVML error: {exc}"]
    out = []
    if len(found) < expected:
        out.append(f"{len(found)} of {expected} GPUs found")
    minors = {g.index for g in found}
    missing = [
        f
        for f in files
        if f.rsplit("nvidia", 1)[-1].isdigit() and int(f.rsplit("nvidia", 1)[-1]) not in minors
    ]
    if missing:
        out.append("missing " + ",".join(os.path.basename(f) for f in missing))
    return out


def main() -> int:
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    try:
        found = problems(node)
    except (ConfigError, OSError) as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 1
    if not found:
        return 0
    reason = "gpu_check: " + "; ".join(found)
    print(f"{node}: {reason}", file=sys.stderr)
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"], check=False)
    return 1


if __name__ == "__main__":
    sys.exit(main())
