"""SchedulerParameters bf_interval: the main pass runs on every event, the backfill pass only once
bf_interval seconds have passed since the last one (22.05's meaning; -1 turns it off). shoal's
default is 1 s where Slurm's is 30 (README's differences). The controller with a steppable clock.

The cluster: one 4-CPU node. `first` takes 2 CPUs for 10 minutes; `big` asks for all 4 and waits
for it (backfill plans its start); `small` (2 CPUs, 5 minutes) fits beside them and ends before
`big` could start, so only backfill may start it: the main pass keeps it behind `big`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctld.sched_config import batch_sched_delay_s, bf_interval_s
from shoal.conf.slurm import parse_slurm_conf
from tests.unit.ctld.harness import Harness, cluster, job

CONF = {
    "SchedulerType": "sched/backfill",
    "SelectType": "select/cons_tres",
    "SelectTypeParameters": "CR_Core_Memory",
    "DefMemPerCPU": 100,
}


def _queue(tmp_path: Path, params: str) -> tuple[Harness, int]:
    """`first` running and `big` waiting, after one cycle (the first backfill pass); `big`'s id."""
    conf = {**CONF, "SchedulerParameters": params} if params else CONF
    h = Harness.of(cluster().nodes(1, cpus=4, mem=8000).set(**conf), tmp_path)
    first = h.submit(job().cpus(2).time(10))
    big = h.submit(job().cpus(4).time(10))
    h.schedule()
    assert h.state(first) == "RUNNING"
    assert h.state(big) == "PENDING"
    return h, big


@pytest.mark.parametrize(
    ("params", "before", "after"),
    [
        ("", 0.5, 1.0),
        ("bf_interval=30", 29.0, 30.0),
        ("bf_interval=5,bf_resolution=1", 4.0, 5.0),
    ],
    ids=["shoal's default, 1 s", "Slurm's default, 30 s", "5 s"],
)
def test_only_backfill_starts_a_job_and_only_once_the_interval_has_passed(
    tmp_path: Path, params: str, before: float, after: float
) -> None:
    h, big = _queue(tmp_path, params)
    planned = h.ctl.jobs[big].start_time
    assert planned > 0  # the first pass backfilled: squeue --start shows big's expected start
    small = h.submit(job().cpus(2).time(5))
    h.advance(before)
    h.schedule()  # the main pass alone: small waits behind big; big's plan stands
    assert (h.state(small), h.reason(small)) == ("PENDING", "Priority")
    assert h.ctl.jobs[big].start_time == planned
    h.advance(after - before)
    h.schedule()  # bf_interval since the last backfill pass: this cycle backfills
    assert h.state(small) == "RUNNING"
    assert h.ctl.jobs[small].scheduler == "Backfill"
    assert h.state(big) == "PENDING"


def test_after_a_costly_backfill_pass_the_next_waits_ten_times_its_cpu(tmp_path: Path) -> None:
    """A backfill pass over a deep queue (10,000 pending tasks: ~0.3 s of CPU) at shoal's 1 s
    bf_interval would take a third of a core; after a cycle that backfilled for 0.3 s of CPU the next
    pass waits 3 s. A cheap pass brings bf_interval back."""
    from ctld.applier import backfill_wait_s

    h, big = _queue(tmp_path, "")
    h.ctl.state.cycle_ended(0.3, backfilled=True)
    small = h.submit(job().cpus(2).time(5))
    h.advance(1.5)  # past bf_interval=1
    h.schedule()  # the main pass alone: small waits behind big
    assert (h.state(small), h.reason(small)) == ("PENDING", "Priority")
    assert backfill_wait_s(h.ctl.state) == pytest.approx(1.5)
    h.advance(1.5)
    h.schedule()  # 3 s since: this cycle backfills
    assert h.state(small) == "RUNNING"
    h.ctl.state.cycle_ended(0.01, backfilled=True)
    assert h.ctl.state.backfill_gap_s() == 1.0


def test_main_pass_runs_on_every_event_whatever_bf_interval(tmp_path: Path) -> None:
    h, big = _queue(tmp_path, "bf_interval=30")
    h.cancel(big)
    fits = h.submit(job().cpus(2).time(20))  # no higher job waits: the main pass starts it at once
    h.schedule()
    assert h.state(fits) == "RUNNING"
    assert h.ctl.jobs[fits].scheduler == "Main"


def test_bf_interval_minus_one_turns_backfill_off(tmp_path: Path) -> None:
    h, big = _queue(tmp_path, "bf_interval=-1")
    assert h.ctl.jobs[big].start_time == 0  # no backfill pass: no expected start
    small = h.submit(job().cpus(2).time(5))
    for _ in range(3):
        h.advance(60)
        h.schedule()
    assert (h.state(small), h.reason(small)) == ("PENDING", "Priority")


@pytest.mark.parametrize(
    ("words", "seconds"),
    [
        ((), 1),
        (("bf_interval=30",), 30),
        (("bf_window=60", "bf_interval=1"), 1),
        (("bf_interval=-1",), None),
        (("bf_interval=10800",), 10800),
        (("bf_interval=0",), 1),
        (("bf_interval=10801",), 1),
        (("bf_interval=often",), 1),
    ],
    ids=[
        "shoal's default, 1 s",
        "30 s",
        "among other options",
        "-1: off",
        "22.05's maximum",
        "0: below the minimum, the default",
        "over the maximum: the default",
        "not a number: the default",
    ],
)
def test_bf_interval_parsing(words: tuple[str, ...], seconds: int | None, tmp_path: Path) -> None:
    params = f"SchedulerParameters={','.join(words)}\n" if words else ""
    cfg = parse_slurm_conf(
        f"ClusterName=t\nSlurmctldHost=h\nStateSaveLocation={tmp_path}\n{params}"
        "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1\n"
    )
    assert bf_interval_s(cfg) == seconds


# ---------------------------------------------------------------- batch_sched_delay


def test_batch_sched_delay_serves_a_burst_of_submissions_by_one_later_cycle(tmp_path: Path) -> None:
    """The first batch job of a burst wakes the scheduler at once (an idle cluster starts it
    promptly); those submitted within batch_sched_delay of it wait for one cycle that delay later."""
    conf = {**CONF, "SchedulerParameters": "batch_sched_delay=2"}
    h = Harness.of(cluster().nodes(1, cpus=4, mem=8000).set(**conf), tmp_path)
    wake, state = h.ctl.wake, h.ctl.state
    wake.clear()
    h.submit(job().cpus(1).time(5))
    assert wake.is_set() and state.submit_wait_s() is None
    wake.clear()
    state.cycle_starts()
    h.advance(0.5)
    later = [h.submit(job().cpus(1).time(5)) for _ in range(3)]
    assert not wake.is_set()
    assert state.submit_wait_s() == pytest.approx(1.5)
    h.advance(1.5)
    state.cycle_starts()  # the scheduler loop's cycle at the deadline serves them all
    h.schedule()
    assert [h.state(i) for i in later] == ["RUNNING"] * 3
    assert state.submit_wait_s() is None
    h.advance(2)
    h.submit(job().cpus(1).time(5))
    assert wake.is_set()  # the delay has passed since: at once again


@pytest.mark.parametrize(
    ("params", "delay"),
    [("", 1), ("batch_sched_delay=3", 3), ("batch_sched_delay=0", 0), ("batch_sched_delay=later", 1)],
    ids=["shoal's default, 1 s", "Slurm's default, 3 s", "0: at once", "not a number: the default"],
)
def test_batch_sched_delay_parsing(params: str, delay: int, tmp_path: Path) -> None:
    line = f"SchedulerParameters={params}\n" if params else ""
    cfg = parse_slurm_conf(
        f"ClusterName=t\nSlurmctldHost=h\nStateSaveLocation={tmp_path}\n{line}"
        "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1\n"
    )
    assert batch_sched_delay_s(cfg) == delay


# ---------------------------------------------------------------- batch job ends


def test_a_stream_of_batch_job_ends_is_served_by_one_cycle_a_window(tmp_path: Path) -> None:
    """The first end after a quiet spell wakes the scheduler at once (the job waiting for those CPUs
    starts promptly); ends within END_WAKE_WINDOW_S of the last cycle's start wait for one cycle at
    that start + the window, which starts every waiting job their CPUs let start."""
    from ctld.state import END_WAKE_WINDOW_S

    h = Harness.of(cluster().nodes(1, cpus=4, mem=8000).set(**CONF), tmp_path)
    wake, state = h.ctl.wake, h.ctl.state
    timers: list[tuple[float, Callable[[], None]]] = []  # the loop's wake at the window's end
    state.call_later = lambda delay, fn: timers.append((delay, fn))
    running = [h.submit(job().cpus(1).time(5)) for _ in range(4)]
    waiting = [h.submit(job().cpus(1).time(5)) for _ in range(3)]
    state.cycle_starts()
    h.schedule()
    assert [h.state(i) for i in running] == ["RUNNING"] * 4
    h.advance(10)
    wake.clear()
    h.finish(running[0])
    assert wake.is_set() and state.end_wait_s() is None  # quiet until now: at once
    wake.clear()
    state.cycle_starts()
    h.schedule()
    assert h.state(waiting[0]) == "RUNNING"
    h.advance(END_WAKE_WINDOW_S / 4)
    h.finish(running[1])
    h.finish(running[2])
    assert not wake.is_set()
    assert state.end_wait_s() == pytest.approx(END_WAKE_WINDOW_S * 3 / 4)
    assert [delay for delay, _ in timers] == [pytest.approx(END_WAKE_WINDOW_S * 3 / 4)]  # one for both
    h.advance(END_WAKE_WINDOW_S * 3 / 4)
    timers[0][1]()
    assert wake.is_set()  # however long the loop meant to sleep
    wake.clear()
    state.cycle_starts()  # the scheduler loop's cycle at the window's end serves both
    h.schedule()
    assert [h.state(i) for i in waiting[1:]] == ["RUNNING"] * 2
    assert state.end_wait_s() is None
    h.advance(END_WAKE_WINDOW_S)
    h.finish(running[3])
    assert wake.is_set()  # the window has passed since: at once again


def test_after_a_costly_cycle_ends_wait_four_times_its_cpu(tmp_path: Path) -> None:
    """A cycle over a deep queue (a 10,000-task array pending) costs a few hundred ms of CPU; a stream
    of ends then gets a cycle about every 4x that, not every 0.2 s, so scheduling takes at most ~1/5
    of a core. A cheap cycle brings the 0.2 s window back."""
    from ctld.state import END_WAKE_WINDOW_S

    h = Harness.of(cluster().nodes(1, cpus=4, mem=8000).set(**CONF), tmp_path)
    wake, state = h.ctl.wake, h.ctl.state
    timers: list[tuple[float, Callable[[], None]]] = []
    state.call_later = lambda delay, fn: timers.append((delay, fn))
    running = [h.submit(job().cpus(1).time(5)) for _ in range(4)]
    waiting = [h.submit(job().cpus(1).time(5)) for _ in range(2)]
    state.cycle_starts()
    h.schedule()
    state.cycle_ended(0.3)  # the cycle took 0.3 s of CPU
    h.advance(0.5)  # past 0.2 s, within 4 x 0.3 s
    wake.clear()
    h.finish(running[0])
    assert not wake.is_set()
    assert state.end_wait_s() == pytest.approx(0.7)
    assert [delay for delay, _ in timers] == [pytest.approx(0.7)]
    h.advance(0.7)
    timers[0][1]()
    assert wake.is_set()
    wake.clear()
    state.cycle_starts()
    h.schedule()
    state.cycle_ended(0.01)  # cheap again
    assert h.state(waiting[0]) == "RUNNING"
    h.advance(END_WAKE_WINDOW_S)
    h.finish(running[1])
    assert wake.is_set()  # 0.2 s after a cheap cycle: at once


def test_a_job_end_during_a_deferred_burst_waits_for_the_bursts_cycle(tmp_path: Path) -> None:
    """While a burst of batch submissions waits for its cycle (batch_sched_delay), a batch job's end
    asks for no cycle of its own: one would start the burst's jobs mid-burst, the work the delay keeps
    off the controller while it answers submissions. The burst's cycle serves both; once none is
    owed, an end wakes the scheduler at once again."""
    conf = {**CONF, "SchedulerParameters": "batch_sched_delay=2"}
    h = Harness.of(cluster().nodes(1, cpus=4, mem=8000).set(**conf), tmp_path)
    wake, state = h.ctl.wake, h.ctl.state
    timers: list[tuple[float, Callable[[], None]]] = []
    state.call_later = lambda delay, fn: timers.append((delay, fn))
    first = h.submit(job().cpus(4).time(5))
    state.cycle_starts()
    h.schedule()
    assert h.state(first) == "RUNNING"
    h.advance(0.5)
    burst = [h.submit(job().cpus(1).time(5)) for _ in range(3)]
    wake.clear()
    h.advance(0.5)  # past END_WAKE_WINDOW_S since the last cycle: alone, this end would wake it at once
    h.finish(first)
    assert not wake.is_set() and timers == [] and state.end_wait_s() is None
    assert state.submit_wait_s() == pytest.approx(1.0)  # the burst's cycle, due 2 s after the first's
    assert [h.state(i) for i in burst] == ["PENDING"] * 3
    h.advance(1.0)
    state.cycle_starts()
    h.schedule()
    assert [h.state(i) for i in burst] == ["RUNNING"] * 3
    h.advance(1.0)
    h.finish(burst[0])
    assert wake.is_set()  # no burst owed: at once
