"""Idle-GPU detection: the pure decision as a table over a fake clock, then the controller applying it
(flag, the busy GPUs clearing it, the cancel with Reason=GpuIdle) through the harness's ping answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.gpu_idle import Action, IdlePolicy, IdleState, Sample, decide, job_sample, policy_from
from shoal.conf import ConfigError, parse_slurm_conf
from shoal.v1 import controller_pb2, jobs_pb2, node_pb2
from tests.unit.ctld.harness import Harness, Terminate, cluster, job

POLICY = IdlePolicy(threshold=10, idle_time_s=60, notify="/bin/true", cancel_after_s=30)
QUIET = IdlePolicy(threshold=10, idle_time_s=60)

# (policy, state before, sample (max utilization, at) or None, now) -> (state after, actions)
CASES = [
    ("off", IdlePolicy(), IdleState(), Sample(0, 100), 1000, IdleState(), []),
    ("busy stays busy", POLICY, IdleState(), Sample(50, 100), 100, IdleState(last_sample=100), []),
    ("first idle sample starts the clock", POLICY, IdleState(), Sample(3, 100), 100,
     IdleState(idle_since=100, last_sample=100), []),
    ("idle, not long enough", POLICY, IdleState(idle_since=100, last_sample=100), Sample(3, 150), 159,
     IdleState(idle_since=100, last_sample=150), []),
    ("idle for the time: flagged and notified", POLICY, IdleState(idle_since=100, last_sample=150), None, 160,
     IdleState(idle_since=100, flagged_at=160, notified=True, last_sample=150), [Action.FLAG, Action.NOTIFY]),
    ("without a notify program: flagged only", QUIET, IdleState(idle_since=100, last_sample=150), None, 160,
     IdleState(idle_since=100, flagged_at=160, last_sample=150), [Action.FLAG]),
    ("flagged, within the grace", POLICY,
     IdleState(idle_since=100, flagged_at=160, notified=True, last_sample=150), None, 189,
     IdleState(idle_since=100, flagged_at=160, notified=True, last_sample=150), []),
    ("grace over: cancelled", POLICY,
     IdleState(idle_since=100, flagged_at=160, notified=True, last_sample=150), None, 190,
     IdleState(idle_since=100, flagged_at=160, notified=True, last_sample=150), [Action.CANCEL]),
    ("no cancel policy: never cancelled", QUIET,
     IdleState(idle_since=100, flagged_at=160, last_sample=150), None, 10_000,
     IdleState(idle_since=100, flagged_at=160, last_sample=150), []),
    ("busy again: unflagged, notified stays", POLICY,
     IdleState(idle_since=100, flagged_at=160, notified=True, last_sample=150), Sample(80, 170), 170,
     IdleState(notified=True, last_sample=170), [Action.UNFLAG]),
    ("at the threshold is busy", POLICY, IdleState(idle_since=100, last_sample=150), Sample(10, 170), 170,
     IdleState(last_sample=170), []),
    ("an old sample again changes nothing", POLICY, IdleState(idle_since=100, last_sample=150),
     Sample(90, 150), 155, IdleState(idle_since=100, last_sample=150), []),
    ("idle again after busy: notified once only", POLICY, IdleState(notified=True, last_sample=170),
     Sample(0, 180), 240, IdleState(idle_since=180, flagged_at=240, notified=True, last_sample=180), [Action.FLAG]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "policy", "before", "sample", "now", "after", "actions"), CASES, ids=[c[0] for c in CASES]
)
def test_decide(
    name: str,
    policy: IdlePolicy,
    before: IdleState,
    sample: Sample | None,
    now: int,
    after: IdleState,
    actions: list[Action],
) -> None:
    assert decide(policy, before, sample, now) == (after, actions)


def test_a_job_sample_is_its_busiest_gpu_and_unreadable_ones_count_for_nothing() -> None:
    assert job_sample([3, 40, -1], 7) == Sample(40, 7)
    assert job_sample([-1, -1], 7) is None


def test_the_policy_from_scheduler_parameters() -> None:
    params = {
        "shoal_gpu_idle_threshold": "5",
        "shoal_gpu_idle_time": "600",
        "shoal_gpu_idle_notify": "/usr/local/sbin/idle-mail",
        "shoal_gpu_idle_cancel": "300",
    }
    assert policy_from(params) == IdlePolicy(5, 600, "/usr/local/sbin/idle-mail", 300)
    assert not policy_from({}).enabled


def _harness(tmp_path: Path) -> Harness:
    params = "shoal_gpu_idle_threshold=10,shoal_gpu_idle_time=60,shoal_gpu_idle_cancel=30"
    return Harness.of(cluster().nodes(1, gpus=4).set(SchedulerParameters=params), tmp_path)


def _live(h: Harness) -> controller_pb2.GetLiveUsageResponse:
    return h.ctl.live_usage(controller_pb2.GetLiveUsageRequest(gpus=True))


def test_a_job_left_idle_is_flagged_then_cancelled_with_reason_gpu_idle(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    j = h.submit(job().gpus("2"))
    h.schedule()
    held = list(h.ctl.jobs[j].allocation[0].gpu_indices)
    assert len(held) == 2
    h.gpu_load["n1"] = dict.fromkeys(range(4), 0)
    h.tick()
    start = int(h.clock())
    gpus = _live(h).gpus
    assert [(g.node, g.index, g.job_id) for g in gpus] == [("n1", i, j if i in held else 0) for i in range(4)]
    assert not any(g.idle for g in gpus)

    h.advance(61)
    h.tick()
    info = h.ctl.jobs[j]
    assert info.gpu_idle_since == start and info.state == jobs_pb2.RUNNING
    assert [g.idle_since for g in _live(h).gpus if g.job_id == j] == [start, start]

    h.gpu_load["n1"] = {i: 90 for i in held}  # busy again: the flag goes
    h.advance(5)
    h.tick()
    assert h.ctl.jobs[j].gpu_idle_since == 0

    h.gpu_load["n1"] = dict.fromkeys(range(4), 1)
    h.advance(1)  # (a node's answers are told apart by the second they came in)
    h.tick()
    h.advance(61)
    h.tick()
    assert h.ctl.jobs[j].gpu_idle_since and not h.nodes.effects[1:]
    h.advance(30)
    h.tick()
    assert Terminate("n1", j, "gpu_idle") in h.nodes.effects
    h.finish(j, 0, 15)
    info = h.ctl.jobs[j]
    assert (info.state, info.state_reason) == (jobs_pb2.CANCELLED, "GpuIdle")


def test_without_the_policy_nothing_is_flagged(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1, gpus=2), tmp_path)
    j = h.submit(job().gpus("2"))
    h.schedule()
    h.gpu_load["n1"] = {0: 0, 1: 0}
    for _ in range(3):
        h.tick()
        h.advance(3600)
    assert h.ctl.jobs[j].gpu_idle_since == 0 and h.ctl.jobs[j].state == jobs_pb2.RUNNING


@pytest.mark.parametrize(
    "option", ["shoal_gpu_idle_threshold=5%", "shoal_gpu_idle_time=1h", "shoal_gpu_idle_cancel=-1"], ids=str
)
def test_slurm_conf_refuses_a_bad_number_at_file_line(option: str, tmp_path: Path) -> None:
    text = cluster().nodes(1).set(SchedulerParameters=option).text(tmp_path)
    with pytest.raises(
        ConfigError, match=f"invalid value for SchedulerParameters option {option.split('=')[0]}"
    ):
        parse_slurm_conf(text)


def test_live_usage_gives_each_step_its_jobs_gpus_and_the_asked_jobs_states(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1, gpus=4), tmp_path)
    j = h.submit(job().gpus("2"))
    pending = h.submit(job().gpus("4"))
    h.schedule()
    held = sorted(h.ctl.jobs[j].allocation[0].gpu_indices)
    reply = node_pb2.NodePingResponse(running_jobs=[j])
    for index in range(4):
        reply.gpus.add(index=index, utilization=40 if index == held[0] else 10 if index in held else 90)
        reply.gpus[-1].memory_used_mb = 1000
    reply.steps.add(job_id=j, step_id=-4, rss_kb=512, ntasks=1)
    h.ctl.node_contact("n1", True, [j], reply)
    live = h.ctl.live_usage(controller_pb2.GetLiveUsageRequest(job_ids=[j, pending, 999], steps=True))
    (step,) = live.steps
    assert (step.node, step.step_id, step.rss_kb, step.gpu_util, step.gpu_mem_mb) == ("n1", -4, 512, 25, 2000)
    assert dict(live.job_states) == {j: jobs_pb2.RUNNING, pending: jobs_pb2.PENDING}  # 999: unknown
    assert not live.gpus  # not asked for


def test_the_flag_survives_a_restart_and_busy_gpus_clear_it_after(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    j = h.submit(job().gpus("2").time(600))
    h.schedule()
    h.gpu_load["n1"] = dict.fromkeys(range(4), 0)
    h.tick()
    h.advance(61)
    h.tick()
    since = h.ctl.jobs[j].gpu_idle_since
    assert since
    h = h.restart()
    h.gpu_load["n1"] = dict.fromkeys(range(4), 0)
    h.tick()
    assert h.ctl.jobs[j].gpu_idle_since == since  # ctld's samples are gone; the job's flag is not
    h.gpu_load["n1"] = dict.fromkeys(range(4), 95)
    h.advance(1)
    h.tick()
    assert h.ctl.jobs[j].gpu_idle_since == 0
