"""The scheduler core's knobs from slurm.conf (SchedulerType, SchedulerParameters, memory defaults).

One translation, used by the controller and by `shoal sim`, so both schedule with the same settings.
A SchedulerParameters value that is not a number is ignored (the default stays), as Slurm does.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctld.priority_config import priority_config
from ctld.sched.model import Config, Partition
from shoal.conf.slurm import SlurmConfig

# SchedulerParameters option -> Config field (all integers)
_NUMERIC = {
    "bf_window": "bf_window_min",
    "bf_resolution": "bf_resolution_s",
    "bf_max_job_test": "bf_max_job_test",
    "bf_max_job_user": "bf_max_job_user",
    "default_queue_depth": "max_job_test",
    "bf_reservations": "bf_reservations",  # shoal's own: 1 = EASY, 0 = every tested job (Slurm)
}


def scheduler_parameters(words: Iterable[str]) -> dict[str, str]:
    """`bf_window=2880,bf_continue` (already split on commas) -> {"bf_window": "2880", "bf_continue": ""}."""
    params: dict[str, str] = {}
    for word in words:
        key, _, value = word.partition("=")
        params[key.strip().lower()] = value.strip()
    return params


def sched_config(cfg: SlurmConfig) -> Config:
    """The core's Config for this slurm.conf."""
    numbers: dict[str, int] = {}
    for option, value in scheduler_parameters(cfg.scheduler_parameters).items():
        name = _NUMERIC.get(option)
        if name is not None and value.isdigit():
            numbers[name] = int(value)
    return Config(
        def_mem_per_cpu_mb=cfg.def_mem_per_cpu,
        def_mem_per_node_mb=getattr(cfg, "def_mem_per_node", 0) or 0,
        def_mem_per_gpu_mb=cfg.def_mem_per_gpu,
        enforce_part_limits=cfg.enforce_part_limits,
        scheduler=cfg.scheduler_type,
        priority=priority_config(cfg),
        **numbers,
    )


def partitions(cfg: SlurmConfig) -> tuple[Partition, ...]:
    """slurm.conf's partitions as the core sees them (the controller and the simulator alike)."""
    return tuple(
        Partition(
            name=p.name,
            nodes=tuple(p.nodes),
            state=p.state,
            max_time_min=p.max_time,
            default_time_min=p.default_time,
            max_nodes=p.max_nodes,
            min_nodes=p.min_nodes,
            priority_tier=p.priority_tier,
            priority_job_factor=p.priority_job_factor,
            exclusive=p.oversubscribe.upper().startswith("EXCLUSIVE"),
            def_mem_per_cpu_mb=p.def_mem_per_cpu or 0,
            def_mem_per_gpu_mb=p.def_mem_per_gpu or 0,
        )
        for p in cfg.partitions
    )
