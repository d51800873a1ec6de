"""Job array index specifications (sbatch --array), shared by sbatch, ctld and noded.

Slurm's forms: "0-15", "0-15%4", "1,3,5", "0-9:2", "1-5,10%2". The optional "%N" suffix throttles
how many tasks may run at once. Pure and stdlib only, so every process can parse the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_MAX_ARRAY_SIZE = 1001  # slurm.conf MaxArraySize default: task ids 0..1000

INVALID = "Invalid job array specification"
TOO_BIG = "Invalid job array specification (task id exceeds MaxArraySize)"

_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """The task ids of an array job (sorted, unique) and its throttle (0 = none)."""

    task_ids: tuple[int, ...]
    max_running: int = 0

    @property
    def count(self) -> int:
        """SLURM_ARRAY_TASK_COUNT."""
        return len(self.task_ids)

    @property
    def min_id(self) -> int:
        """SLURM_ARRAY_TASK_MIN."""
        return self.task_ids[0]

    @property
    def max_id(self) -> int:
        """SLURM_ARRAY_TASK_MAX."""
        return self.task_ids[-1]

    @property
    def step(self) -> int:
        """SLURM_ARRAY_TASK_STEP: the common stride of evenly spaced ids, else 1."""
        return task_step(self.task_ids)


def parse_array(text: str, max_size: int = DEFAULT_MAX_ARRAY_SIZE) -> ArraySpec:
    """Parse an --array value; raise ValueError with Slurm's message on anything invalid."""
    body = text.strip()
    max_running = 0
    if "%" in body:
        body, _, throttle = body.partition("%")
        if not throttle.isdigit() or int(throttle) < 1:
            raise ValueError(INVALID)
        max_running = int(throttle)
    if not body:
        raise ValueError(INVALID)
    ids: set[int] = set()
    for item in body.split(","):
        ids.update(_parse_item(item.strip()))
    if not ids:
        raise ValueError(INVALID)
    if max(ids) >= max_size:
        raise ValueError(TOO_BIG)
    return ArraySpec(task_ids=tuple(sorted(ids)), max_running=max_running)


def _parse_item(item: str) -> range:
    """One comma-separated element: "N", "A-B" or "A-B:S"."""
    match = _ITEM.match(item)
    if match is None:
        raise ValueError(INVALID)
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    step = int(match.group(3)) if match.group(3) is not None else 1
    if step < 1 or last < first:
        raise ValueError(INVALID)
    return range(first, last + 1, step)


def format_task_ids(ids: Iterable[int]) -> str:
    """Compress ids the way squeue shows them: "1-3,5,7-9" (ranges and commas only)."""
    ordered = sorted(set(ids))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def task_step(ids: Iterable[int]) -> int:
    """The stride of evenly spaced ids (for SLURM_ARRAY_TASK_STEP); 1 when uneven or single."""
    ordered = sorted(set(ids))
    if len(ordered) < 2:
        return 1
    stride = ordered[1] - ordered[0]
    if all(b - a == stride for a, b in zip(ordered, ordered[1:], strict=False)):
        return stride
    return 1
