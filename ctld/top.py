"""`scontrol top`: move jobs ahead of their owner's other pending jobs by trading nice values.

As Slurm does, the listed jobs take the highest priorities of their group (same user, partition,
account and QOS), in the order listed, and the group's other jobs keep their relative order below
them. Only nice values change, and their sum over the group stays the same, so the user gains
nothing over other users. Priority moves one for one with nice under both priority/basic and
priority/multifactor, so the new order holds until the ages move it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Queued:
    job_id: int
    priority: int
    nice: int


def top_nice(targets: list[Queued], peers: list[Queued]) -> dict[int, int]:
    """The new nice value of every job of the group (targets in the order wanted first)."""
    group = targets + sorted(peers, key=lambda q: (-q.priority, q.job_id))
    slots = sorted((q.priority for q in group), reverse=True)
    return {q.job_id: q.nice + (q.priority - slot) for q, slot in zip(group, slots, strict=True)}
