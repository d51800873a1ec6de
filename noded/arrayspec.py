"""Parse a job array specification ("0-15%4", "1,3,5", "0-9:2") for SLURM_ARRAY_TASK_* values."""

from __future__ import annotations

from dataclasses import dataclass


class ArraySpecError(ValueError):
    """An --array value that cannot be parsed; str() is the message for the user."""


@dataclass(frozen=True)
class ArrayShape:
    """What a batch script of an array task learns about its array."""

    task_ids: tuple[int, ...]
    step: int  # SLURM_ARRAY_TASK_STEP

    @property
    def count(self) -> int:
        return len(self.task_ids)

    @property
    def min(self) -> int:
        return min(self.task_ids)

    @property
    def max(self) -> int:
        return max(self.task_ids)


def _int(text: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ArraySpecError(f"Invalid job array specification: {spec}") from None
    if value < 0:
        raise ArraySpecError(f"Invalid job array specification: {spec}")
    return value


def parse_array_spec(spec: str) -> ArrayShape:
    """'0-9:2%3' -> ids (0, 2, 4, 6, 8), step 2. The %N throttle does not change the ids."""
    body = spec.split("%", 1)[0].strip()
    if not body:
        raise ArraySpecError(f"Invalid job array specification: {spec}")
    ids: set[int] = set()
    for part in body.split(","):
        rng, _, step_text = part.partition(":")
        step = _int(step_text, spec) if step_text else 1
        if step == 0:
            raise ArraySpecError(f"Invalid job array specification: {spec}")
        first_text, dash, last_text = rng.partition("-")
        first = _int(first_text, spec)
        last = _int(last_text, spec) if dash else first
        if last < first:
            raise ArraySpecError(f"Invalid job array specification: {spec}")
        ids.update(range(first, last + 1, step))
    ordered = tuple(sorted(ids))
    gaps = {b - a for a, b in zip(ordered, ordered[1:], strict=False)}
    # The step a script sees: the common difference when the ids are evenly spaced, else 1.
    step = gaps.pop() if len(gaps) == 1 else 1
    return ArrayShape(task_ids=ordered, step=step)
