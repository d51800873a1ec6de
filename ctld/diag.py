"""ctld's statistics for sdiag and the metrics: RPCs by type and user, scheduling passes, job counts.

One thread-safe object fed from three places: the servicer wrapper (`instrument`, each RPC's time),
the scheduler loop (`sched_pass`, each controller.schedule() call) and the same loop's look at the
jobs (`observe`, which counts submissions, starts and ends by watching the job records change, so
the controller needs no hooks). `reset` (sdiag -r) zeroes them, as slurmctld's reset does.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ctld.record import JobRecord
from ctld.state import user_name
from shoal.v1 import controller_pb2, jobs_pb2

# Slurm's message type (name, number) for each Controller method, as sdiag prints them
RPC_TYPES: dict[str, tuple[str, int]] = {
    "RegisterNode": ("MESSAGE_NODE_REGISTRATION_STATUS", 1002),
    "Ping": ("REQUEST_PING", 1008),
    "RebootNodes": ("REQUEST_REBOOT_NODES", 1015),
    "GetConfig": ("REQUEST_BUILD_INFO", 2001),
    "GetJobs": ("REQUEST_JOB_INFO", 2003),
    "GetSteps": ("REQUEST_JOB_STEP_INFO", 2005),
    # sstat's step query (22.05's sstat also sends REQUEST_FED_INFO and REQUEST_JOB_ALLOCATION_INFO)
    "GetLiveUsage": ("REQUEST_JOB_STEP_INFO", 2005),
    "GetNodes": ("REQUEST_NODE_INFO", 2007),
    "GetPartitions": ("REQUEST_PARTITION_INFO", 2009),
    "GetConfigFiles": ("REQUEST_CONFIG", 2015),
    "GetShares": ("REQUEST_SHARE_INFO", 2022),
    "GetReservations": ("REQUEST_RESERVATION_INFO", 2024),
    "GetPriorities": ("REQUEST_PRIORITY_FACTORS", 2026),
    "GetDiag": ("REQUEST_STATS_INFO", 2035),
    "ResetDiag": ("REQUEST_STATS_INFO", 2035),
    "UpdateJob": ("REQUEST_UPDATE_JOB", 3001),
    "UpdateNode": ("REQUEST_UPDATE_NODE", 3002),
    "CreateReservation": ("REQUEST_CREATE_RESERVATION", 3006),
    "UpdateReservation": ("REQUEST_UPDATE_RESERVATION", 3007),
    "DeleteReservation": ("REQUEST_DELETE_RESERVATION", 3008),
    "SubmitJob": ("REQUEST_SUBMIT_BATCH_JOB", 4003),
    "Why": ("REQUEST_JOB_WILL_RUN", 4012),
    "CreateStep": ("REQUEST_JOB_STEP_CREATE", 5001),
    "CompleteStep": ("REQUEST_STEP_COMPLETE", 5016),
    "CompleteAllocation": ("REQUEST_COMPLETE_JOB_ALLOCATION", 5017),
    "CompleteBatch": ("REQUEST_COMPLETE_BATCH_SCRIPT", 5018),
    "SignalJobs": ("REQUEST_KILL_JOB", 5032),
    "CreateToken": ("REQUEST_AUTH_TOKEN", 5039),
    "PushLimits": ("ACCOUNTING_UPDATE_MSG", 10001),
    "ResetUsage": ("ACCOUNTING_UPDATE_MSG", 10001),  # 22.05: sacctmgr -> slurmdbd -> slurmctld
}

_FAILED = frozenset(
    {
        jobs_pb2.FAILED,
        jobs_pb2.TIMEOUT,
        jobs_pb2.NODE_FAIL,
        jobs_pb2.OUT_OF_MEMORY,
        jobs_pb2.BOOT_FAIL,
        jobs_pb2.DEADLINE,
    }
)


@dataclass
class _Tally:
    count: int = 0
    total_us: int = 0


class Diag:
    """The counters; every method may be called from any thread."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight = 0
        self._seen: dict[int, tuple[int, int]] = {}  # job id -> (start_time, state) as last counted
        self._primed = False
        self._zero()

    def _zero(self) -> None:
        self.since = int(self._clock())
        self.rpcs: dict[str, _Tally] = {}
        self.users: dict[int, _Tally] = {}
        self.submitted = self.started = self.completed = self.canceled = self.failed = 0
        self.pending = self.running = 0
        self.states_ts = 0
        self.cycles = self.cycle_last = self.cycle_max = self.cycle_sum = self.depth_sum = 0
        self.queue_len = 0
        self.bf_cycles = self.bf_when = self.bf_last = self.bf_max = self.bf_sum = 0
        self.bf_depth = self.bf_depth_sum = self.bf_queue_len = self.bf_queue_len_sum = 0

    def reset(self) -> None:
        """sdiag -r: start counting again now (jobs already counted stay counted, not again)."""
        with self._lock:
            self._zero()

    # ------------------------------------------------------------------ feeding
    def rpc_begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def rpc_end(self, method: str, uid: int | None, elapsed_us: int) -> None:
        with self._lock:
            self._in_flight -= 1
            tally = self.rpcs.setdefault(method, _Tally())
            tally.count += 1
            tally.total_us += elapsed_us
            if uid is not None:
                user = self.users.setdefault(uid, _Tally())
                user.count += 1
                user.total_us += elapsed_us

    def sched_pass(self, elapsed_us: int, depth: int, backfilled: bool = True) -> None:
        """One controller.schedule() that took `elapsed_us` over `depth` pending jobs.

        A pass that also ran the backfill pass (`backfilled`: every bf_interval, ctld/applier.py; both
        run in one cycle) counts as a backfill cycle too, with the same time and depth.
        """
        with self._lock:
            self.cycles += 1
            self.cycle_last = elapsed_us
            self.cycle_max = max(self.cycle_max, elapsed_us)
            self.cycle_sum += elapsed_us
            self.depth_sum += depth
            self.queue_len = depth
            if depth and backfilled:
                self.bf_cycles += 1
                self.bf_when = int(self._clock())
                self.bf_last = elapsed_us
                self.bf_max = max(self.bf_max, elapsed_us)
                self.bf_sum += elapsed_us
                self.bf_depth = self.bf_queue_len = depth
                self.bf_depth_sum += depth
                self.bf_queue_len_sum += depth

    def observe(self, jobs: Iterable[JobRecord]) -> None:
        """Count what changed in the job records since the last look (call it with the controller's lock held).

        A job never seen before was submitted; a new start_time is a start (a requeued job starts
        again); a first finished state is an end. The jobs present at the first look (recovered at
        ctld's start) only set the baseline.
        """
        with self._lock:
            seen: dict[int, tuple[int, int]] = {}
            pending = running = 0
            for job in jobs:
                before = self._seen.get(job.job_id)
                now = (job.start_time if job.state != jobs_pb2.PENDING else 0, job.state)
                seen[job.job_id] = now
                pending += job.state == jobs_pb2.PENDING
                running += job.state in (jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING)
                if not self._primed:
                    continue
                if before is None:
                    self.submitted += 1
                    before = (0, jobs_pb2.PENDING)
                if now[0] and now[0] != before[0]:
                    self.started += 1
                if now[1] != before[1]:
                    self._ended(now[1])
            self._seen = seen
            self._primed = True
            self.pending, self.running = pending, running
            self.states_ts = int(self._clock())

    def _ended(self, state: int) -> None:
        if state == jobs_pb2.COMPLETED:
            self.completed += 1
        elif state == jobs_pb2.CANCELLED:
            self.canceled += 1
        elif state in _FAILED:
            self.failed += 1

    # ------------------------------------------------------------------ reading
    def snapshot(self) -> controller_pb2.GetDiagResponse:
        with self._lock:
            resp = controller_pb2.GetDiagResponse(
                now=int(self._clock()),
                since=self.since,
                server_thread_count=self._in_flight,
                jobs_submitted=self.submitted,
                jobs_started=self.started,
                jobs_completed=self.completed,
                jobs_canceled=self.canceled,
                jobs_failed=self.failed,
                job_states_ts=self.states_ts,
                jobs_pending=self.pending,
                jobs_running=self.running,
                sched_cycles=self.cycles,
                sched_cycle_last_us=self.cycle_last,
                sched_cycle_max_us=self.cycle_max,
                sched_cycle_sum_us=self.cycle_sum,
                sched_depth_sum=self.depth_sum,
                sched_queue_len=self.queue_len,
                bf_cycles=self.bf_cycles,
                bf_last_when=self.bf_when,
                bf_cycle_last_us=self.bf_last,
                bf_cycle_max_us=self.bf_max,
                bf_cycle_sum_us=self.bf_sum,
                bf_last_depth=self.bf_depth,
                bf_depth_sum=self.bf_depth_sum,
                bf_queue_len=self.bf_queue_len,
                bf_queue_len_sum=self.bf_queue_len_sum,
            )
            by_type: dict[tuple[str, int], _Tally] = {}
            for method, tally in self.rpcs.items():
                merged = by_type.setdefault(RPC_TYPES.get(method, (method, 0)), _Tally())
                merged.count += tally.count
                merged.total_us += tally.total_us
            users = dict(self.users)
        for (name, type_id), tally in by_type.items():
            resp.rpcs.add(name=name, type_id=type_id, count=tally.count, total_time_us=tally.total_us)
        for uid, tally in users.items():
            resp.users.add(name=user_name(uid), uid=uid, count=tally.count, total_time_us=tally.total_us)
        return resp


S = TypeVar("S", bound=type)


def instrument(cls: S) -> S:
    """Class decorator: time every RPC method of a servicer (CamelCase names) into its `self.diag`.

    The caller's uid comes from `caller_uid`, called inside the RPC (None when it has none).
    """
    for name in [n for n, v in vars(cls).items() if n[:1].isupper() and callable(v)]:
        setattr(cls, name, _timed(name, getattr(cls, name)))
    return cls


def _timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, request: Any, context: Any) -> Any:
        diag: Diag = self.diag
        uid = self.caller_uid()
        diag.rpc_begin()
        start = time.perf_counter_ns()
        try:
            return method(self, request, context)
        finally:
            diag.rpc_end(name, uid, (time.perf_counter_ns() - start) // 1000)

    return wrapper
