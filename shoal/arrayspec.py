"""Job array index specifications (sbatch --array), shared by sbatch, ctld and noded.

Slurm's forms: "0-15", "0-15%4", "1,3,5", "0-9:2", "1-5,10%2". The optional "%N" suffix throttles
how many tasks may run at once. Pure and stdlib only, so every process can parse the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress

DEFAULT_MAX_ARRAY_SIZE = 1001  # slurm.conf MaxArraySize default: task ids 0..1000
MAX_ARRAY_SIZE_LIMIT = 4000001  # the largest MaxArraySize Slurm accepts; nothing expands beyond it

INVALID = "Invalid job array specification"
TOO_BIG = INVALID  # 22.05 says the same words when a task id reaches MaxArraySize

# ASCII digits only (Python's \d and int() also take fullwidth and other scripts' digits)
_NUM = r"([0-9]+)"
_ITEM = re.compile(rf"^{_NUM}(?:-{_NUM}(?::{_NUM})?)?$")
_THROTTLE = re.compile(r"^[0-9]+$")
_HUGE = 10**18  # any longer number is beyond every MaxArraySize: read it as this, never as 5000 digits


def _number(digits: str) -> int:
    return int(digits) if len(digits) < 19 else _HUGE


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


def check_array(text: str) -> tuple[list[range], int]:
    """The ranges and throttle of an --array value, checked for syntax only: nothing is expanded, so
    "1-99999999999" costs no more than "1-3". Raises ValueError(INVALID)."""
    body = text.strip()
    max_running = 0
    if "%" in body:
        body, _, throttle = body.partition("%")
        if not _THROTTLE.match(throttle) or _number(throttle) < 1:
            raise ValueError(INVALID)
        max_running = min(_number(throttle), 2**31 - 1)
    if not body:
        raise ValueError(INVALID)
    return [_parse_item(item.strip()) for item in body.split(",")], max_running


def parse_array(text: str, max_size: int = DEFAULT_MAX_ARRAY_SIZE) -> ArraySpec:
    """Parse an --array value; raise ValueError with Slurm's message on anything invalid.

    The largest id is checked against `max_size` (at most MAX_ARRAY_SIZE_LIMIT) before any id is made,
    so a huge range is refused at once instead of being built first."""
    ranges, max_running = check_array(text)
    limit = min(max_size, MAX_ARRAY_SIZE_LIMIT)
    top = max(r[-1] for r in ranges)
    if top >= limit:
        raise ValueError(TOO_BIG)
    marks = bytearray(top + 1)  # one byte per possible id: the union costs at most limit bytes
    for r in ranges:
        marks[r.start : r.stop : r.step] = b"\x01" * len(r)
    return ArraySpec(task_ids=tuple(compress(range(top + 1), marks)), max_running=max_running)


def _parse_item(item: str) -> range:
    """One comma-separated element: "N", "A-B" or "A-B:S"."""
    match = _ITEM.match(item)
    if match is None:
        raise ValueError(INVALID)
    first = _number(match.group(1))
    last = _number(match.group(2)) if match.group(2) is not None else first
    step = _number(match.group(3)) if match.group(3) is not None else 1
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
