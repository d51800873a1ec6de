"""slurm.conf's priority keys (PriorityType, PriorityWeight*, PriorityMaxAge, PriorityFlags, ...) for the core.

Used by the controller and by `shoal sim` through sched_config(). A value that does not parse keeps
the default, as SchedulerParameters does.
"""

from __future__ import annotations

from ctld.sched.model import PriorityConfig
from ctld.sched.priority import NO_NORMAL
from shoal.conf.slurm import SlurmConfig
from shoal.timefmt import parse_time_limit

_WEIGHTS = {
    "PriorityWeightAge": "weight_age",
    "PriorityWeightAssoc": "weight_assoc",
    "PriorityWeightFairshare": "weight_fairshare",
    "PriorityWeightJobSize": "weight_job_size",
    "PriorityWeightPartition": "weight_partition",
    "PriorityWeightQOS": "weight_qos",
}


def priority_config(cfg: SlurmConfig) -> PriorityConfig:
    """The PriorityConfig a slurm.conf describes."""
    weights = {field: _int(cfg.get(key)) for key, field in _WEIGHTS.items()}
    max_age = _minutes(cfg.get("PriorityMaxAge"), 7 * 1440)
    return PriorityConfig(
        type=cfg.priority_type,
        max_age_s=max_age * 60,
        favor_small=(cfg.get("PriorityFavorSmall") or "").strip().upper() in ("YES", "1", "TRUE"),
        flags=priority_flags(cfg.get("PriorityFlags") or ""),
        weight_tres=tres_weights(cfg.get("PriorityWeightTRES") or ""),
        **weights,
    )


def priority_flags(text: str) -> frozenset[str]:
    """`PriorityFlags=MAX_TRES,NO_NORMAL_ALL` -> the flag names, NO_NORMAL_ALL expanded."""
    flags = {word.strip().upper() for word in text.split(",") if word.strip()}
    if "NO_NORMAL_ALL" in flags:
        flags.update(NO_NORMAL)
    return frozenset(flags)


def tres_weights(text: str) -> tuple[tuple[str, float], ...]:
    """`CPU=1000,Mem=2000,GRES/gpu=3000` -> (("cpu", 1000.0), ("mem", 2000.0), ("gres/gpu", 3000.0)).

    Mem's weight may carry a unit suffix in Slurm's billing syntax; it is ignored here (per MB).
    """
    out: list[tuple[str, float]] = []
    for word in text.split(","):
        name, sep, value = word.partition("=")
        if not sep:
            continue
        try:
            weight = float(value.strip().rstrip("KMGTkmgt"))
        except ValueError:
            continue
        out.append((name.strip().lower(), weight))
    return tuple(out)


def _int(text: str | None) -> int:
    try:
        return max(0, int((text or "0").strip()))
    except ValueError:
        return 0


def _minutes(text: str | None, default: int) -> int:
    if not text:
        return default
    try:
        return max(0, parse_time_limit(text.strip()))
    except ValueError:
        return default
