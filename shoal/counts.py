"""Slurm's run-length form of per-node counts: [2, 2, 1] <-> "2(x2),1".

Used for SLURM_JOB_CPUS_PER_NODE, SLURM_TASKS_PER_NODE and SLURM_STEP_TASKS_PER_NODE by ctld, noded
and the commands alike, so every process writes the same text.
"""

from __future__ import annotations

from collections.abc import Sequence


def compress_counts(counts: Sequence[int]) -> str:
    """[2, 2, 1] -> '2(x2),1'."""
    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        run = j - i
        parts.append(f"{counts[i]}(x{run})" if run > 1 else str(counts[i]))
        i = j
    return ",".join(parts)
