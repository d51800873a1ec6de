"""ClusterState: the controller's memory, the one lock over it, the state store, and the effects of a change.

Every change goes through `with state.transaction() as tx:` — the lock is held for the block; what the
block saves (`tx.save(job)`, `tx.save_node(node)`, `tx.record_run(run)`, ...) is written to the store in one
commit at its end, still under the lock, so the caller is answered only after it is durable; the node
calls it queued (`tx.after(effect)`) run after the lock is released and the commit made. A block that
raises writes nothing and runs no effect (what it changed in memory stays: check before changing;
what must follow the commit, `tx.on_commit`). Nothing else in ctld takes the lock; the store is written
here and, for its own queue and cached limits, by the accounting sender (ctld/accounting.py).
"""

from __future__ import annotations

import grp
import logging
import math
import os
import pwd
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

from ctld import configless, gpu_idle, record
from ctld import jobs as jobrec
from ctld.accounting import ADMIN_LEVELS, ADMINISTRATOR, Accounting
from ctld.actions import NodeActions
from ctld.errors import SlurmError
from ctld.fairshare_usage import META_KEY as SHARES_META_KEY
from ctld.fairshare_usage import Charge, UsageLedger, job_tres
from ctld.job_table import JobTable
from ctld.listing import ListingViews
from ctld.nodes import NodeRuntime, new_runtime
from ctld.record import JobRecord
from ctld.sched import model as m
from ctld.sched.fairshare import last_reset
from ctld.sched_config import batch_sched_delay_s, bf_interval_s, sched_config, scheduler_parameters
from ctld.sched_config import partitions as sched_partitions
from ctld.sched_config import topology as sched_topology
from ctld.store import StateStore
from ctld.validate import limits_from as submit_limits
from ctld.waiting_steps import WaitingSteps
from shoal.conf import SlurmConfig
from shoal.v1 import controller_pb2, jobs_pb2

log = logging.getLogger("shoal.ctld")

Effect = Callable[[], None]
# A batch job's end within this long of the last cycle's start waits for one cycle at that start +
# this (ClusterState.batch_ended): a stream of short jobs' ends is served by at most ~5 cycles a second
# (22.05 ran 44-86 main passes over a 1,001-task array of `true` here, shoal one per end), and a job
# that an end lets start waits at most this long for it.
END_WAKE_WINDOW_S = 0.2
# ... or this many times the last cycle's CPU, when that is longer: a cycle over a deep queue of jobs
# that each ask otherwise (an array's alike tasks cost a cycle little: ctld/array_window.py) then takes
# at most ~1/5 of a core, leaving the rest to the launches and completions it serves. A cheap cycle
# keeps the 0.2 s window.
END_WAKE_COST_FACTOR = 4.0
# The backfill pass runs at most every bf_interval, or this many times the CPU of the last cycle that
# ran one, when that is longer: over a deep queue at most ~1/10 of a core goes to backfill at shoal's
# bf_interval=1; a cheap pass keeps bf_interval.
BACKFILL_COST_FACTOR = 10.0
USAGE_SAVE_INTERVAL_S = 60  # the fair-share ledger is saved at most this often (housekeeping)


def _call_later(delay: float, fn: Callable[[], None]) -> None:
    """Run `fn` in `delay` seconds on a timer thread (the wake of a deferred batch job end)."""
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.start()


@dataclass(frozen=True)
class Caller:
    uid: int
    gid: int
    host: str = ""


@dataclass
class Transaction:
    """What one locked change saves and what it asks of nodes afterwards (see the module docstring)."""

    jobs: dict[int, JobRecord] = field(default_factory=dict)
    runs: list[JobRecord] = field(default_factory=list)
    nodes: dict[str, NodeRuntime] = field(default_factory=dict)
    deleted_jobs: list[int] = field(default_factory=list)
    reservations: dict[str, controller_pb2.ReservationInfo] = field(default_factory=dict)
    deleted_reservations: list[str] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    effects: list[Effect] = field(default_factory=list)
    committed: list[Effect] = field(default_factory=list)

    def save(self, *jobs: JobRecord) -> None:
        """Write these jobs (as they are at commit) and queue their accounting records."""
        for job in jobs:
            self.jobs[job.job_id] = job

    def record_run(self, run: JobRecord) -> None:
        """Account one ended run of a requeued job (its own record: `sacct -D`), in this same commit."""
        self.runs.append(run)

    def save_node(self, node: NodeRuntime) -> None:
        self.nodes[node.info.name] = node

    def delete_job(self, job_id: int) -> None:
        self.deleted_jobs.append(job_id)

    def save_reservation(self, info: controller_pb2.ReservationInfo) -> None:
        self.reservations[info.name] = info

    def delete_reservation(self, name: str) -> None:
        self.deleted_reservations.append(name)

    def set_meta(self, key: str, value: str) -> None:
        self.meta[key] = value

    def after(self, effect: Effect) -> None:
        """Run `effect` (a node call) once the lock is released and the change committed."""
        self.effects.append(effect)

    def on_commit(self, change: Effect) -> None:
        """Run `change` (to memory) once the store has committed, still under the lock: memory never
        holds what the store does not."""
        self.committed.append(change)


class ClusterState:
    """Jobs, nodes, reservations and the caches derived from them, recovered from the store at start."""

    def __init__(
        self,
        cfg: SlurmConfig,
        store: StateStore,
        key: bytes,
        actions: NodeActions,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.key = key
        self.actions = actions
        self.clock = clock
        self._lock = threading.RLock()
        self._open: Transaction | None = None  # the transaction of the thread holding the lock
        self.jobs = JobTable()  # by id, with the counts a submission checks (ctld/job_table.py)
        self.nodes: dict[str, NodeRuntime] = {}
        self.next_job_id = cfg.first_job_id
        self.wake = threading.Event()  # set when the scheduler should run a cycle soon
        self.started = int(clock())
        # this ctld's run, which nodes learn at registration and from pings: a new one, they register
        # again. Not the start second: a ctld restarted within the second it started would pass for
        # the old one, and its nodes would never register with it (test_resilience saw it).
        self.incarnation = secrets.randbits(62) | 1
        self.slurm_uid = uid_of(cfg.slurm_user)
        # views of the configuration the core and the checks read, built once
        self.partitions = {p.name: p for p in cfg.partitions}
        self.partitions_view = sched_partitions(cfg, partial(group_members, {0, self.slurm_uid}))
        self.sched_config = sched_config(cfg)
        self.bf_interval = bf_interval_s(cfg)  # seconds between backfill passes; None: backfill off
        self.last_backfill = -math.inf  # clock() of the last backfill pass (ctld/applier.py)
        self.backfill_owed = False  # the last cycle left pending jobs that backfill has not seen yet
        self.backfill_passes = 0  # for sdiag's backfill cycles
        self.batch_sched_delay = batch_sched_delay_s(cfg)
        self.last_submit_wake = -math.inf  # clock() of the last cycle a batch submission asked for
        self.submit_owed = False  # a batch job submitted since, whose cycle waits (batch_sched_delay)
        self.last_cycle = -math.inf  # clock() of the last cycle's start
        self.end_owed = False  # a batch job ended since, whose cycle waits (`end_window_s`)
        self.last_cycle_cpu = 0.0  # seconds of CPU the last cycle took (the scheduler loop's thread)
        self.last_backfill_cpu = 0.0  # ... and the last cycle that ran a backfill pass
        self.call_later: Callable[[float, Callable[[], None]], None] = _call_later
        self.gpu_idle_policy = gpu_idle.policy_from(scheduler_parameters(cfg.scheduler_parameters))
        self.gpu_idle: dict[int, gpu_idle.IdleState] = {}  # running GPU jobs' idle tracking (memory only)
        self.waiting_steps = WaitingSteps()  # sruns told to retry, for scontrol show step (memory only)
        self.submit_limits = submit_limits(cfg.max_array_size, cfg.scheduler_parameters)
        self.topology = sched_topology(cfg)
        self.config_files = configless.snapshot(cfg)  # what GetConfigFiles serves (configless)
        self.listing = ListingViews()  # GetJobs' per-job views (ctld/listing.py), read under the lock
        self.accounting = Accounting(cfg, store, key)  # dbd agent queue and association cache
        self.shares = UsageLedger(cfg)  # fair-share usage per association (fairshare_usage.py)
        self._shares_saved = 0
        self.unconfirmed: set[int] = set()
        self.reservations: dict[str, controller_pb2.ReservationInfo] = {}  # advance reservations by name
        self._recover()

    # ------------------------------------------------------------------ the scheduler's wakes
    def submitted(self, batch: bool) -> None:
        """A job was submitted: wake the scheduler, at once unless it is a batch job and a batch
        submission already asked for a cycle less than batch_sched_delay ago; then the scheduler
        loop serves it by that cycle's time + the delay (`submit_wait_s`), with whatever came since.
        Not under the lock: a race with the loop costs at most one extra cycle, or a wait for the
        loop's next periodic one (a second)."""
        if not batch or self.batch_sched_delay <= 0:
            self.wake.set()
            return
        now = self.clock()
        if now - self.last_submit_wake >= self.batch_sched_delay:
            self.last_submit_wake = now
            self.wake.set()
        else:
            self.submit_owed = True

    def submit_wait_s(self) -> float | None:
        """Seconds until the cycle a deferred batch submission waits for (None: none waits)."""
        if not self.submit_owed:
            return None
        return max(0.0, self.last_submit_wake + self.batch_sched_delay - self.clock())

    def batch_ended(self) -> None:
        """A batch job's run ended: wake the scheduler at once unless a cycle started less than its
        window (`end_window_s`) ago; then the loop serves it by that cycle's start + the window
        (`end_wait_s`), with every end that came since. A stream of ends (an array's short tasks) is
        served by a few cycles a second, not one each, while the first end after a quiet spell starts
        what fits at once. Not under the lock, as `submitted`.

        While a burst of batch submissions waits for its cycle (batch_sched_delay), an end joins that
        cycle instead of asking for one of its own: a cycle now would start the burst's jobs, the very
        work the delay keeps off the controller while it answers submissions (on a small host their
        launches compete with the submitters for the same cores). So an end waits at most
        batch_sched_delay, as it does in 22.05, where a burst's jobs wait for that delay's cycle."""
        if self.submit_owed:
            return  # the loop wakes for the submissions' cycle (`submit_wait_s`), which serves this too
        since, window = self.clock() - self.last_cycle, self.end_window_s()
        if since >= window:
            self.wake.set()
        elif not self.end_owed:  # the loop may be asleep past the window's end: a timer wakes it then
            self.end_owed = True
            self.call_later(window - since, partial(self._end_due, self.last_cycle))

    def end_window_s(self) -> float:
        """How long after a cycle's start a batch job's end waits for the next: END_WAKE_WINDOW_S, or
        END_WAKE_COST_FACTOR times the last cycle's CPU when that is longer."""
        return max(END_WAKE_WINDOW_S, END_WAKE_COST_FACTOR * self.last_cycle_cpu)

    def _end_due(self, cycle: float) -> None:
        """The window of a deferred end has passed: wake the scheduler, unless a cycle since served it."""
        if self.end_owed and self.last_cycle == cycle:
            self.wake.set()

    def end_wait_s(self) -> float | None:
        """Seconds until the cycle a deferred end waits for (None: none waits)."""
        if not self.end_owed:
            return None
        return max(0.0, self.last_cycle + self.end_window_s() - self.clock())

    def cycle_ended(self, cpu_s: float, backfilled: bool = False) -> None:
        """The scheduler loop's cycle took `cpu_s` seconds of its thread's CPU (`end_window_s`), with a
        backfill pass or not (`backfill_gap_s`)."""
        self.last_cycle_cpu = cpu_s
        if backfilled:
            self.last_backfill_cpu = cpu_s

    def backfill_gap_s(self) -> float | None:
        """The least seconds between two backfill passes: bf_interval, or BACKFILL_COST_FACTOR times the
        last backfilling cycle's CPU when that is longer; None: no backfill pass (bf_interval=-1)."""
        if self.bf_interval is None:
            return None
        return max(float(self.bf_interval), BACKFILL_COST_FACTOR * self.last_backfill_cpu)

    def cycle_starts(self) -> None:
        """The scheduler loop starts a cycle: it serves every deferred submission and end."""
        self.last_cycle = self.clock()
        self.end_owed = False
        if self.submit_owed:
            self.submit_owed = False
            self.last_submit_wake = self.last_cycle

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        saved_shares = self.store.get_meta(SHARES_META_KEY)
        self.shares.load(saved_shares)
        if (
            not saved_shares or self.shares.awaits_seed
        ):  # no ledger (a lost StateSaveLocation): start from dbd's
            now = self.now()
            self.shares.awaits_seed = self.accounting.enabled
            self.accounting.request_usage(
                self.shares.half_life_s, last_reset(now, self.shares.reset_period), now
            )
        saved_nodes = self.store.load_nodes()
        recovered_at = self.clock()
        for conf in self.cfg.nodes:
            node = new_runtime(self.cfg, conf, saved_nodes.get(conf.name))
            # a full SlurmdTimeout from the recovery (a takeover), never from a heartbeat the old primary got
            node.last_contact = recovered_at
            self.nodes[conf.name] = node
        for blob in self.store.load_jobs():
            job = record.from_bytes(blob)
            self.jobs[job.job_id] = job
        # batch jobs a previous ctld started: the first registration of their node says whether
        # the node ever got them (see node_lifecycle.reconcile_after_register)
        self.unconfirmed = {
            j.job_id for j in self.jobs.values() if j.state == jobs_pb2.RUNNING and j.batch_flag
        }
        saved_next = self.store.get_meta("next_job_id")
        highest = max(self.jobs, default=0)
        self.next_job_id = max(self.cfg.first_job_id, int(saved_next or 0), highest + 1)
        for blob in self.store.load_reservations():
            info = controller_pb2.ReservationInfo.FromString(blob)
            self.reservations[info.name] = info
        if self.jobs:
            log.info("recovered %d jobs; next job id %d", len(self.jobs), self.next_job_id)

    # ------------------------------------------------------------------ the lock and the store
    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Hold the lock for a change; commit what it saved at the end; run its effects after unlock.
        A nested call joins the open transaction (one commit, effects after the outermost block)."""
        with self._lock:
            if self._open is not None:
                yield self._open
                return
            tx = Transaction()
            self._open = tx
            try:
                yield tx
                self._commit(tx)
            finally:
                self._open = None
        for effect in tx.effects:
            effect()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock to read a consistent view; nothing may be saved."""
        with self._lock:
            yield

    def _commit(self, tx: Transaction) -> None:
        if (
            tx.jobs
            or tx.runs
            or tx.nodes
            or tx.deleted_jobs
            or tx.reservations
            or tx.deleted_reservations
            or tx.meta
        ):
            self._write(tx)
        for change in tx.committed:
            change()

    def _write(self, tx: Transaction) -> None:
        now = self.now()
        with self.store.transaction() as stx:
            stx.put_jobs([(job.job_id, record.stored(job).SerializeToString()) for job in tx.jobs.values()])
            if tx.jobs or tx.runs:
                self.accounting.record_jobs(stx, [*tx.runs, *tx.jobs.values()])
            for node in tx.nodes.values():
                stx.put_node(node.info.name, node.info.SerializeToString())
                self.accounting.record_node(stx, node.info, now)
            for job_id in tx.deleted_jobs:
                stx.delete_job(job_id)
            for info in tx.reservations.values():
                stx.put_reservation(info.name, info.SerializeToString())
            for name in tx.deleted_reservations:
                stx.delete_reservation(name)
            for key, value in tx.meta.items():
                stx.set_meta(key, value)
        if tx.deleted_jobs:  # committed: what accounting kept of these jobs goes with them
            self.accounting.forget(tx.deleted_jobs)

    # ------------------------------------------------------------------ small shared answers
    def now(self) -> int:
        return int(self.clock())

    def is_slurm_user(self, caller: Caller) -> bool:
        """root, SlurmUser or ctld's own user: the daemons that hold the cluster key, and the super user.
        An AdminLevel never makes a user one of these."""
        return caller.uid == 0 or caller.uid == self.slurm_uid or caller.uid == os.getuid()

    def admin_level(self, caller: Caller) -> str:
        """The caller's AdminLevel in accounting (sacctmgr modify user ... set AdminLevel=...)."""
        return self.accounting.admin_level(user_name(caller.uid))

    def is_operator(self, caller: Caller) -> bool:
        """May act on every user's jobs and reservations and see what PrivateData hides: the super user
        and AdminLevel=Operator or Administrator, as slurmctld's operators."""
        return self.is_slurm_user(caller) or self.admin_level(caller) in ADMIN_LEVELS

    def coordinated(self, caller: Caller) -> frozenset[str]:
        """The accounts the caller coordinates in accounting (sacctmgr add coordinator)."""
        return self.accounting.coordinated(user_name(caller.uid))

    def may_manage(self, caller: Caller, job: JobRecord) -> bool:
        """May hold, release, update, signal or cancel `job`: its owner, an operator, or a coordinator
        of the job's account, as slurmctld's coordinators."""
        return (
            job.user_id == caller.uid
            or self.is_operator(caller)
            or (bool(job.account) and job.account in self.coordinated(caller))
        )

    def is_admin(self, caller: Caller) -> bool:
        """May also change nodes, reboot them, reconfigure and make tokens for others: the super user and
        AdminLevel=Administrator, as slurmctld's super users (an Operator is refused these)."""
        return self.is_slurm_user(caller) or self.admin_level(caller) == ADMINISTRATOR

    def request(self, job: JobRecord) -> m.JobRequest | None:
        """The core's view of a pending job, built once and kept on the record until what it is built
        from changes (the record's `version`; ctld.record.REQUEST_INPUTS)."""
        kept = job.cached_request
        if kept is not None and kept[0] == job.version:
            return kept[1]
        try:
            req = jobrec.job_request(job, self.nodes, self.cfg)
        except (SlurmError, ValueError):
            return None
        job.cached_request = (job.version, req)
        return req

    def drop_requests(self) -> None:
        """Drop every cached JobRequest (a reconfigure changed what they are built from)."""
        for job in self.jobs.values():
            job.cached_request = None

    def terminate(self, tx: Transaction, node: NodeRuntime, job_id: int, kill_wait: int, reason: str) -> None:
        """TerminateJob on `node`, after the change commits."""
        tx.after(partial(self.actions.terminate, node.info, job_id, kill_wait, reason))

    # ------------------------------------------------------------------ fair-share usage
    def accrue_usage(self) -> None:
        """Charge the jobs that ran since the last pass to their associations and QOS (in memory; the
        ledger is saved by `save_usage_if_due`, on the housekeeping path)."""
        now = self.now()
        since = self.shares.last
        factors = self.accounting.usage_factors()
        charges = (
            Charge(
                assoc_id=self.accounting.assoc_id(j),
                qos=j.qos,
                tres=job_tres(j),
                start=j.start_time,
                end=0 if j.state == jobs_pb2.RUNNING else j.end_time,
                usage_factor=factors.get(j.qos, 1.0),
                partition=j.partition,
            )
            for j in self.jobs.values()
            if j.start_time and j.allocation and (j.state == jobs_pb2.RUNNING or j.end_time > since)
        )
        self.shares.accrue(now, charges)
        seed = self.accounting.take_usage()
        if seed is not None:
            self.shares.seed(seed)
            log.info("fair-share usage of %d associations seeded from accounting storage", len(seed))

    def save_usage_if_due(self, tx: Transaction) -> None:
        """Accrue and write the ledger into `tx`, at most once every USAGE_SAVE_INTERVAL_S."""
        now = self.now()
        if now - self._shares_saved >= USAGE_SAVE_INTERVAL_S:
            self.accrue_usage()
            tx.set_meta(SHARES_META_KEY, self.shares.dump())
            self._shares_saved = now


def uid_of(user: str) -> int:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return 0


def group_members(always: set[int], group: str) -> set[int]:
    """Uids of a group's users (listed members and those whose primary group it is), plus `always`
    (root and SlurmUser pass every AllowGroups, as in Slurm). An unknown group has no members."""
    uids = set(always)
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        return uids
    uids.update(uid_of(name) for name in entry.gr_mem)
    uids.update(p.pw_uid for p in pwd.getpwall() if p.pw_gid == entry.gr_gid)
    return uids


_USER_CACHE: dict[int, str] = {}
_GROUP_CACHE: dict[int, str] = {}


def user_name(uid: int) -> str:
    name = _USER_CACHE.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        _USER_CACHE[uid] = name
    return name


def group_name(gid: int) -> str:
    name = _GROUP_CACHE.get(gid)
    if name is None:
        try:
            name = grp.getgrgid(gid).gr_name
        except KeyError:
            name = str(gid)
        _GROUP_CACHE[gid] = name
    return name
