"""The scheduler core's knobs from slurm.conf (SchedulerType, SchedulerParameters, memory defaults).

One translation, used by the controller and by `shoal sim`, so both schedule with the same settings.
A SchedulerParameters value that is not a number is ignored (the default stays), as Slurm does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ctld.priority_config import priority_config
from ctld.sched.model import Config, Partition, PreemptConfig, Switch, Topology
from shoal.conf.slurm import SlurmConfig

# SchedulerParameters option -> Config field (all integers)
_NUMERIC = {
    "bf_window": "bf_window_min",
    "bf_resolution": "bf_resolution_s",
    "bf_max_job_test": "bf_max_job_test",
    "bf_max_job_user": "bf_max_job_user",
    "bf_max_job_array_resv": "bf_max_job_array_resv",
    "default_queue_depth": "max_job_test",
    "bf_reservations": "bf_reservations",  # shoal's own: 1 = EASY, 0 = every tested job (Slurm)
    "max_switch_wait": "max_switch_wait_s",
    # shoal's own (ctld/sched/starve.py; slurm.conf refuses a value that is not a whole number)
    "shoal_short_first": "short_first_min",
    "shoal_starve_wait": "starve_wait_min",
    "shoal_starve_xfactor": "starve_xfactor",
    "shoal_starve_max": "starve_max",
    "shoal_wait_target": "wait_target_min",
}


def scheduler_parameters(words: Iterable[str]) -> dict[str, str]:
    """`bf_window=2880,bf_continue` (already split on commas) -> {"bf_window": "2880", "bf_continue": ""}."""
    params: dict[str, str] = {}
    for word in words:
        key, _, value = word.partition("=")
        params[key.strip().lower()] = value.strip()
    return params


def numeric_parameters(text: str) -> dict[str, int]:
    """`shoal_starve_wait=1440,bf_max_job_test=200` -> Config fields and values, for `shoal sim
    --sched-params`; an option that is not one of the numeric ones, or a value that is not a whole
    number, is a ValueError naming it."""
    fields: dict[str, int] = {}
    for option, value in scheduler_parameters(w for w in text.split(",") if w.strip()).items():
        name = _NUMERIC.get(option)
        if name is None:
            raise ValueError(
                f"--sched-params: unknown option {option!r} (known: {', '.join(sorted(_NUMERIC))})"
            )
        if not value.isdigit():
            raise ValueError(f"--sched-params: {option} needs a whole number, not {value!r}")
        fields[name] = int(value)
    return fields


SCHED_MIN_INTERVAL_US = 2  # 22.05's default: in effect, no throttle


def sched_min_interval_s(cfg: SlurmConfig) -> float:
    """SchedulerParameters sched_min_interval (microseconds, 22.05's default 2; 0 = no throttle): the
    least time from the end of one scheduling cycle to the start of the next, in seconds. Events
    (submissions, completions) that arrive meanwhile are served together by the next cycle."""
    value = scheduler_parameters(cfg.scheduler_parameters).get("sched_min_interval", "")
    return (int(value) if value.isdigit() else SCHED_MIN_INTERVAL_US) / 1_000_000


BF_INTERVAL_S = 1  # shoal's default (Slurm's is 30): see bf_interval_s
BF_INTERVAL_MAX_S = 10800  # 22.05's documented range is 1 to 10800 seconds; -1 turns backfill off


def bf_interval_s(cfg: SlurmConfig) -> int | None:
    """SchedulerParameters bf_interval: the least seconds from one backfill pass to the next (the main
    pass still runs on every event); None for -1, which turns the backfill pass off. Outside 22.05's
    range (1 to 10800) or not a number: the default.

    The default is 1 s where Slurm's is 30: a job that only backfill can start waits up to that long,
    and at 1 s that wait stays within the scheduler loop's own period, while a burst of events (a
    1,001-task array's completions) still gets one backfill pass a second instead of one per event.
    """
    value = scheduler_parameters(cfg.scheduler_parameters).get("bf_interval", "")
    try:
        seconds = int(value)
    except ValueError:
        return BF_INTERVAL_S
    if seconds == -1:
        return None
    return seconds if 1 <= seconds <= BF_INTERVAL_MAX_S else BF_INTERVAL_S


BATCH_SCHED_DELAY_S = 1  # shoal's default (Slurm's: 3 s): see batch_sched_delay_s


def batch_sched_delay_s(cfg: SlurmConfig) -> int:
    """SchedulerParameters batch_sched_delay: how many seconds the scheduling of a newly submitted batch
    job may wait, so that a burst of submissions is served by a few cycles (ctld/state.py
    `submitted`); not a number: the default. 0: every submission wakes the scheduler at once.

    shoal's default is 1 s where Slurm's is 3: the first submission of a burst is scheduled at once
    either way (an idle cluster starts a job promptly), and ctld's scheduler loop runs a cycle every
    second anyway, so a deferred job waits at most about a second whatever the delay, while a longer
    delay only defers more of a steady submitter's jobs (bench/README.md, issue 19)."""
    value = scheduler_parameters(cfg.scheduler_parameters).get("batch_sched_delay", "")
    return int(value) if value.isdigit() else BATCH_SCHED_DELAY_S


def sched_config(cfg: SlurmConfig) -> Config:
    """The core's Config for this slurm.conf."""
    numbers: dict[str, Any] = {}  # Config's integer fields only (_NUMERIC)
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
        preempt=PreemptConfig(cfg.preempt_type, cfg.preempt_mode, cfg.preempt_exempt_time, cfg.preempt_gang),
        **numbers,
    )


def partitions(
    cfg: SlurmConfig, group_members: Callable[[str], Iterable[int]] | None = None
) -> tuple[Partition, ...]:
    """slurm.conf's partitions as the core sees them (the controller and the simulator alike).

    `group_members` resolves an AllowGroups name to its users' uids (the controller reads the group
    database; without it AllowGroups is not enforced, as in `shoal sim`).
    """
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
            allow_accounts=_names(p.allow_accounts),
            deny_accounts=_names(p.deny_accounts) or frozenset(),
            allow_uids=_uids(p.allow_groups, group_members),
            allow_qos=_names(p.allow_qos),
            deny_qos=_names(p.deny_qos) or frozenset(),
            root_only=p.root_only,
            exclusive_user=p.exclusive_user,
            preempt_mode=p.preempt_mode,
            grace_time_s=p.grace_time,
            total_cpus=sum(node.cpus for node in (cfg.node(name) for name in p.nodes) if node is not None),
        )
        for p in cfg.partitions
    )


def _names(text: str) -> frozenset[str] | None:
    """ "a,B" -> {"a", "b"}; "ALL" or nothing -> None (no restriction)."""
    names = frozenset(item.strip().lower() for item in text.split(",") if item.strip())
    return None if not names or "all" in names else names


def _uids(groups: str, members: Callable[[str], Iterable[int]] | None) -> frozenset[int] | None:
    names = _names(groups)
    if names is None or members is None:
        return None
    return frozenset(uid for name in names for uid in members(name))


def topology(cfg: SlurmConfig) -> Topology | None:
    """topology.conf's switch tree as the core sees it (None without TopologyPlugin=topology/tree)."""
    conf = cfg.topology
    if conf is None or not conf.switches:
        return None
    switches = []
    for switch in conf.switches:
        nodes = conf.nodes_under(switch.name)
        leaves = tuple(dict.fromkeys(leaf for node in nodes if (leaf := conf.leaf_of(node)) is not None))
        switches.append(Switch(name=switch.name, level=switch.level, nodes=frozenset(nodes), leaves=leaves))
    leaf_nodes = {s.name: frozenset(s.nodes) for s in conf.switches if not s.switches}
    return Topology(switches=tuple(switches), leaf_nodes=leaf_nodes)
