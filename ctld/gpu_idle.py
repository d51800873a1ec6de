"""Idle-GPU detection (beyond Slurm): the policy from SchedulerParameters and the pure decision.

A running job whose allocated GPUs all stay under `shoal_gpu_idle_threshold` percent for
`shoal_gpu_idle_time` seconds is flagged idle; the site's `shoal_gpu_idle_notify` command then runs
once for it, and with `shoal_gpu_idle_cancel=S` the job is cancelled S seconds after it was flagged,
unless its GPUs got busy meanwhile (which clears the flag). `decide()` takes the job's latest sample
and `now` and returns the new state and what to do: no clock, no I/O (ctld/live_usage.py applies it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum

OPTION_THRESHOLD = "shoal_gpu_idle_threshold"  # percent; 0 = off
OPTION_TIME = "shoal_gpu_idle_time"  # seconds under the threshold before the flag
OPTION_NOTIFY = "shoal_gpu_idle_notify"  # a program run once per flagged job
OPTION_CANCEL = "shoal_gpu_idle_cancel"  # seconds after the flag before the cancel; 0 = never
DEFAULT_TIME_S = 3600
REASON = "GpuIdle"  # the cancelled job's Reason (scontrol show job, sacct -o Reason)


@dataclass(frozen=True)
class IdlePolicy:
    threshold: int = 0  # a GPU under this utilization (percent) is idle; 0 = detection off
    idle_time_s: int = DEFAULT_TIME_S
    notify: str = ""  # program to run once a job is flagged ("" = none)
    cancel_after_s: int = 0  # grace between the flag and the cancel; 0 = never cancel

    @property
    def enabled(self) -> bool:
        return self.threshold > 0


def policy_from(params: dict[str, str]) -> IdlePolicy:
    """SchedulerParameters (as `ctld.sched_config.scheduler_parameters` splits them) -> the policy;
    slurm.conf has refused values that are not whole numbers already."""

    def number(option: str, default: int) -> int:
        value = params.get(option, "")
        return int(value) if value.isdigit() else default

    return IdlePolicy(
        threshold=min(number(OPTION_THRESHOLD, 0), 100),
        idle_time_s=number(OPTION_TIME, DEFAULT_TIME_S),
        notify=params.get(OPTION_NOTIFY, ""),
        cancel_after_s=number(OPTION_CANCEL, 0),
    )


@dataclass(frozen=True)
class Sample:
    """A job's GPUs in one report: the busiest one's utilization, and when it was read."""

    max_utilization: int
    at: int


def job_sample(utilizations: Iterable[int], at: int) -> Sample | None:
    """The job's sample from its GPUs' utilizations (those NVML could not read, -1, left out);
    None when none could be read: nothing is known, nothing changes."""
    known = [u for u in utilizations if u >= 0]
    return Sample(max(known), at) if known else None


@dataclass(frozen=True)
class IdleState:
    idle_since: int = 0  # first sample under the threshold of the current idle stretch (0 = busy)
    flagged_at: int = 0  # when the job was flagged (0 = not flagged)
    notified: bool = False  # the notify command ran (once per job, however often it idles)
    last_sample: int = 0  # `at` of the latest sample taken into account


class Action(Enum):
    FLAG = "flag"
    UNFLAG = "unflag"
    NOTIFY = "notify"
    CANCEL = "cancel"


def decide(
    policy: IdlePolicy, state: IdleState, sample: Sample | None, now: int
) -> tuple[IdleState, list[Action]]:
    """The job's idle state after `sample` (None: no new one) at `now`, and what to do about it."""
    if not policy.enabled:
        return state, []
    actions: list[Action] = []
    if sample is not None and sample.at > state.last_sample:
        if sample.max_utilization >= policy.threshold:
            if state.flagged_at:
                actions.append(Action.UNFLAG)
            state = replace(state, idle_since=0, flagged_at=0, last_sample=sample.at)
        else:
            state = replace(state, idle_since=state.idle_since or sample.at, last_sample=sample.at)
    if not state.idle_since:
        return state, actions
    if not state.flagged_at and now - state.idle_since >= policy.idle_time_s:
        state = replace(state, flagged_at=now)
        actions.append(Action.FLAG)
    if state.flagged_at and policy.notify and not state.notified:
        state = replace(state, notified=True)
        actions.append(Action.NOTIFY)
    if state.flagged_at and policy.cancel_after_s and now - state.flagged_at >= policy.cancel_after_s:
        actions.append(Action.CANCEL)
    return state, actions
