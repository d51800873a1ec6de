"""Reading --gpu-bind (sbatch, srun and the node that applies it share one reading)."""

from __future__ import annotations


class GpuBindError(ValueError):
    """An unreadable --gpu-bind value; str() is the user-facing message."""


def parse_gpu_bind(text: str) -> tuple[str, list[int]]:
    """'single:2' -> ("single", [2]); 'map_gpu:0,1' -> ("map_gpu", [0, 1]); 'closest' -> ("closest", [])."""
    value = text.strip().lower()
    if value.startswith("verbose,"):
        value = value[len("verbose,") :]
    kind, _, args = value.partition(":")
    if kind in ("", "none", "closest") and not args:
        return kind or "none", []
    if kind in ("single", "per_task", "map_gpu") and args:
        try:
            numbers = [n for a in args.split(",") for n in _repeated(a)]
        except ValueError:
            raise GpuBindError(f"Invalid --gpu-bind argument: {text}") from None
        if kind != "map_gpu" and (len(numbers) != 1 or numbers[0] < 1):
            raise GpuBindError(f"Invalid --gpu-bind argument: {text}")
        if any(n < 0 for n in numbers):
            raise GpuBindError(f"Invalid --gpu-bind argument: {text}")
        return kind, numbers
    raise GpuBindError(f"Invalid --gpu-bind argument: {text}")


def _repeated(item: str) -> list[int]:
    """'3' -> [3]; '0*4' -> [0, 0, 0, 0] (Slurm's repetition in map lists)."""
    value, star, count = item.partition("*")
    return [int(value, 0)] * (int(count) if star else 1)
