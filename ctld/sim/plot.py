"""PNG plots of a replay (matplotlib, the optional `plot` extra): utilization over time, waits."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ctld.sim.run import Outcome  # noqa: E402
from ctld.sim.swf import Trace  # noqa: E402


def write_plots(directory: str, outcome: Outcome, trace: Trace) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    results = outcome.results
    paths = []
    if results:
        changes: dict[int, int] = {}
        for r in results:
            changes[r.start] = changes.get(r.start, 0) + r.cpus
            changes[r.end] = changes.get(r.end, 0) - r.cpus
        times, used, busy = [], [], 0
        for t in sorted(changes):
            busy += changes[t]
            times.append(t / 3600)
            used.append(busy / max(1, trace.max_procs))
        fig, ax = plt.subplots(figsize=(10, 3))
        ax.step(times, used, where="post")
        ax.set_xlabel("hours")
        ax.set_ylabel("utilization")
        ax.set_title(f"{trace.name} — {outcome.label}")
        paths.append(_save(fig, directory, "utilization.png"))
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.hist([r.wait / 3600 for r in results], bins=50)
        ax.set_xlabel("wait (hours)")
        ax.set_ylabel("jobs")
        ax.set_yscale("log")
        paths.append(_save(fig, directory, "wait.png"))
    return paths


def _save(fig: Figure, directory: str, name: str) -> str:
    path = os.path.join(directory, name)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
