"""The controller's state and every change to it: submit, cancel, update, nodes, completion, scheduling.

One lock guards the state. Every change is written to the state store inside the same critical section,
before the caller is answered. Decisions come from the pure core (ctld.sched); this module applies them
and hands the side effects on nodes (launch, signal, terminate) to the NodeClient, outside the lock.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from ctld import job_hooks, preempt, priority_report, top
from ctld import jobs as jobrec
from ctld import nodes as noderec
from ctld import reservations as resv
from ctld import steps as jobsteps
from ctld.accounting import Accounting
from ctld.errors import (
    ACCESS_DENIED,
    ALREADY_DONE,
    DEPENDENCY_PROBLEM,
    FAILED_PRECONDITION,
    INVALID_JOB_ID,
    INVALID_PARTITION,
    NODE_COUNT_INVALID,
    NOT_FOUND,
    NOT_NOW,
    PERMISSION_DENIED,
    RESOURCE_EXHAUSTED,
    SlurmError,
)
from ctld.fairshare_usage import META_KEY as SHARES_META_KEY
from ctld.fairshare_usage import Charge, UsageLedger, job_tres
from ctld.gpus import snapshot_gpus
from ctld.nodes import NodeRuntime, gres_used, long_state, new_runtime, registration_problems
from ctld.sched import cycle as sched_cycle
from ctld.sched import model as m
from ctld.sched import placement as sched_placement
from ctld.sched import priority as sched_priority
from ctld.sched import reasons
from ctld.sched import submit as sched_submit
from ctld.sched.dependency import parse_dependency, status_index
from ctld.sched.fairshare import last_reset
from ctld.sched.limits import effective_time_limit
from ctld.sched.priority import CALCULATE_RUNNING, MULTIFACTOR
from ctld.sched.resources import job_cpus, job_gpus, mem_for
from ctld.sched_config import partitions as sched_partitions
from ctld.sched_config import sched_config
from ctld.sched_config import topology as sched_topology
from ctld.show_config import config_entries
from ctld.store import StateStore
from ctld.validate import TASK_COUNT_INVALID, validate_spec
from ctld.validate import limits_from as submit_limits
from shoal import hostlist
from shoal.arrayspec import INVALID as INVALID_ARRAY
from shoal.arrayspec import parse_array
from shoal.conf import SlurmConfig
from shoal.outpath import resolve_streams
from shoal.states import ACTIVE_STATES, FINISHED_STATES
from shoal.timefmt import parse_time_limit
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2, node_pb2

log = logging.getLogger("shoal.ctld")

PENDING = jobs_pb2.PENDING
RUNNING = jobs_pb2.RUNNING
COMPLETING = jobs_pb2.COMPLETING
# the Reason an ended job keeps, by how it ended
ENDED_REASONS: dict[int, str] = {
    jobs_pb2.TIMEOUT: reasons.TIME_LIMIT,
    jobs_pb2.NODE_FAIL: reasons.NODE_DOWN,
    jobs_pb2.FAILED: reasons.NON_ZERO_EXIT_CODE,
    jobs_pb2.OUT_OF_MEMORY: reasons.OUT_OF_MEMORY,
}
PREEMPT_REQUEUE_DELAY_S = 5  # a requeued preempted job's BeginTime: after this many seconds


@dataclass(frozen=True)
class Caller:
    uid: int
    gid: int
    host: str = ""


class NodeActions(Protocol):
    """What the controller asks of node agents; implemented over gRPC by ctld.node_client."""

    def launch(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchBatchRequest) -> None: ...
    def terminate(self, node: cluster_pb2.NodeInfo, job_id: int, kill_wait: int, reason: str) -> None: ...
    def signal(
        self, node: cluster_pb2.NodeInfo, job_id: int, signal: int, batch_only: bool, full: bool = False
    ) -> None: ...
    def ping(self, node: cluster_pb2.NodeInfo) -> None: ...
    def launch_tasks(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchTasksRequest) -> str: ...
    def signal_step(self, node: cluster_pb2.NodeInfo, job_id: int, step_id: int, signal: int) -> None: ...


class Controller:
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
        self.lock = threading.RLock()
        self.jobs: dict[int, jobs_pb2.JobInfo] = {}
        self._requests: dict[int, m.JobRequest] = {}  # cache of pending jobs' JobRequest (see _request)
        self._ended_runs: list[jobs_pb2.JobInfo] = []  # requeued jobs' last runs, recorded by the next _save
        self.nodes: dict[str, NodeRuntime] = {}
        self.next_job_id = cfg.first_job_id
        self.wake = threading.Event()
        self.started = int(clock())  # nodes learn it at registration and from pings: a new one, they register again
        self._slurm_uid = _uid_of(cfg.slurm_user)
        self._partitions = {p.name: p for p in cfg.partitions}
        self._partitions_view = sched_partitions(cfg, partial(_group_members, {0, self._slurm_uid}))
        self._sched_config = sched_config(cfg)
        self._submit_limits = submit_limits(cfg.max_array_size, cfg.scheduler_parameters)
        self._topology = sched_topology(cfg)
        self.accounting = Accounting(cfg, store, key)  # dbd agent queue and association cache
        self.shares = UsageLedger(cfg)  # fair-share usage per association (fairshare_usage.py)
        saved_shares = store.get_meta(SHARES_META_KEY)
        self.shares.load(saved_shares)
        if not saved_shares or self.shares.awaits_seed:  # no ledger (a lost StateSaveLocation): start from dbd's
            now = self._now()
            self.shares.awaits_seed = self.accounting.enabled
            self.accounting.request_usage(self.shares.half_life_s, last_reset(now, self.shares.reset_period), now)
        self._shares_saved = 0
        self._recover()
        self.reservations = resv.load(store)  # advance reservations by name (ctld/reservations.py)

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        saved_nodes = self.store.load_nodes()
        for conf in self.cfg.nodes:
            self.nodes[conf.name] = new_runtime(self.cfg, conf, saved_nodes.get(conf.name))
        for blob in self.store.load_jobs():
            job = jobs_pb2.JobInfo()
            job.ParseFromString(blob)
            self.jobs[job.job_id] = job
        # batch jobs a previous ctld started: the first registration of their node says whether
        # the node ever got them (see _reconcile_after_register)
        self._unconfirmed = {j.job_id for j in self.jobs.values() if j.state == RUNNING and j.batch_flag}
        saved_next = self.store.get_meta("next_job_id")
        highest = max(self.jobs, default=0)
        self.next_job_id = max(self.cfg.first_job_id, int(saved_next or 0), highest + 1)
        if self.jobs:
            log.info("recovered %d jobs; next job id %d", len(self.jobs), self.next_job_id)

    def _now(self) -> int:
        return int(self.clock())

    def _save(self, *jobs: jobs_pb2.JobInfo) -> None:
        ended, self._ended_runs = self._ended_runs, []
        with self.store.transaction() as tx:
            for job in jobs:
                tx.put_job(job.job_id, job.SerializeToString())
            self.accounting.record_jobs(tx, [*ended, *jobs])

    def _save_node(self, node: NodeRuntime) -> None:
        with self.store.transaction() as tx:
            tx.put_node(node.info.name, node.info.SerializeToString())
            self.accounting.record_node(tx, node.info, self._now())

    def is_operator(self, caller: Caller) -> bool:
        return caller.uid == 0 or caller.uid == self._slurm_uid or caller.uid == os.getuid()

    # ------------------------------------------------------------------ snapshot
    def _usage(self) -> dict[str, m.NodeUsage]:
        cpu: dict[str, set[int]] = {}
        mem: dict[str, int] = {}
        gpu: dict[str, set[int]] = {}
        excl: set[str] = set()
        count: dict[str, int] = {}
        users: dict[str, set[int]] = {}
        user_excl: set[str] = set()
        for job in self.jobs.values():
            if job.state not in ACTIVE_STATES:
                continue
            for a in job.allocation:
                cpu.setdefault(a.node, set()).update(a.cpu_ids)
                mem[a.node] = mem.get(a.node, 0) + a.mem_mb
                gpu.setdefault(a.node, set()).update(a.gpu_indices)
                count[a.node] = count.get(a.node, 0) + 1
                users.setdefault(a.node, set()).add(job.user_id)
                if not job.oversubscribe:
                    excl.add(a.node)
                part = self._partitions.get(job.partition)
                if part is not None and part.exclusive_user:
                    user_excl.add(a.node)
        return {
            name: m.NodeUsage(
                cpu_ids=frozenset(cpu.get(name, ())),
                mem_mb=mem.get(name, 0),
                gpu_indices=frozenset(gpu.get(name, ())),
                exclusive=name in excl,
                jobs=count.get(name, 0),
                users=frozenset(users.get(name, ())),
                user_exclusive=name in user_excl,
            )
            for name in self.nodes
        }

    def _snapshot(self, pending: Iterable[m.JobRequest], *, capacity_only: bool = False) -> m.Snapshot:
        """The core's input. `capacity_only` (the submit-time "could it ever run" question) skips what
        only "now" and "when" need: usage, running jobs and the statuses of every known job."""
        pending = tuple(self.accounting.attach(r, self.jobs.get(r.job_id)) for r in pending)
        usage = {name: m.NodeUsage() for name in self.nodes} if capacity_only else self._usage()
        nodes = tuple(
            m.Node(
                name=n.conf.name,
                cpus=n.conf.cpus,
                real_memory_mb=n.conf.real_memory,
                gpus=snapshot_gpus(n.info.hardware.gpus, n.gpu_types),
                features=frozenset(n.conf.features),
                weight=n.conf.weight,
                partitions=frozenset(n.info.partitions),
                available=n.available,
                usage=usage[n.conf.name],
                sockets=n.conf.sockets,
                cores_per_socket=n.conf.cores_per_socket,
                threads_per_core=n.conf.threads_per_core,
            )
            for n in self.nodes.values()
        )
        partitions = self._partitions_view
        running = tuple(
            m.RunningJob(
                job_id=j.job_id,
                nodes=tuple(a.node for a in j.allocation),
                end_time=j.end_time,
                partition=j.partition,
                allocation=tuple(
                    m.NodeAllocation(
                        node=a.node,
                        cpu_ids=tuple(a.cpu_ids),
                        mem_mb=a.mem_mb,
                        gpu_indices=tuple(a.gpu_indices),
                        tasks=a.tasks,
                    )
                    for a in j.allocation
                ),
                assoc_id=self.accounting.assoc_id(j),
                qos=j.qos,
                priority=j.priority,
                user_id=j.user_id,
                start_time=j.start_time,
                releasing=j.state == COMPLETING or bool(j.final_state),  # ending (or preempted, in grace)
            )
            for j in ([] if capacity_only else self.jobs.values())
            if j.state in ACTIVE_STATES
        )
        # statuses serve dependencies and array throttles only: skip the pass over every job otherwise
        needs_statuses = any(r.dependency.terms or r.array_max_running for r in pending)
        statuses = tuple(_status(j) for j in self.jobs.values()) if needs_statuses else ()
        return m.Snapshot(
            nodes=nodes,
            partitions=partitions,
            pending=tuple(pending),
            running=running,
            jobs=statuses,
            config=self._sched_config,
            accounting=self._limits_with_usage(),
            priority_inputs=self._priority_inputs() if self._sched_config.priority.type == MULTIFACTOR else None,
            reservations=resv.for_snapshot(self),
            topology=self._topology,
            qos_preempt=self.accounting.qos_preempt(),
        )

    def _priority_inputs(self) -> m.PriorityInputs:
        """Accounting's priorities plus the fair-share factors of the usage accrued up to now."""
        self._accrue_usage()
        return replace(self.accounting.priority_inputs(), fairshare=self.shares.factors(self.accounting.share_tree()))

    def _limits_with_usage(self) -> m.AccountingLimits | None:
        """The enforced association/QOS limits with the usage accrued up to now (GrpTRESMins, GrpWall)."""
        limits = self.accounting.limits()
        if limits is None:
            return None
        self._accrue_usage()
        assoc_used, qos_used = self.shares.used_minutes()
        return replace(limits, assoc_used=assoc_used, qos_used=qos_used)

    def _accrue_usage(self) -> None:
        """Charge the jobs that ran since the last pass to their associations and QOS; save the ledger
        at most once a minute."""
        now = self._now()
        since = self.shares.last
        factors = self.accounting.usage_factors()
        charges = (
            Charge(assoc_id=self.accounting.assoc_id(j), qos=j.qos, tres=job_tres(j), start=j.start_time,
                   end=0 if j.state == RUNNING else j.end_time, usage_factor=factors.get(j.qos, 1.0),
                   partition=j.partition)
            for j in self.jobs.values()
            if j.start_time and j.allocation and (j.state == RUNNING or j.end_time > since)
        )
        self.shares.accrue(now, charges)
        seed = self.accounting.take_usage()
        if seed is not None:
            self.shares.seed(seed)
            log.info("fair-share usage of %d associations seeded from accounting storage", len(seed))
        if now - self._shares_saved >= 60:
            with self.store.transaction() as tx:
                tx.set_meta(SHARES_META_KEY, self.shares.dump())
            self._shares_saved = now

    def get_priorities(self, req: controller_pb2.GetPrioritiesRequest) -> controller_pb2.GetPrioritiesResponse:
        return priority_report.get_priorities(self, req)

    def get_shares(self, req: controller_pb2.GetSharesRequest) -> controller_pb2.GetSharesResponse:
        return priority_report.get_shares(self, req)

    def _request(self, job: jobs_pb2.JobInfo) -> m.JobRequest | None:
        """The core's view of a pending job, built once and kept until the job changes."""
        req = self._requests.get(job.job_id)
        if req is None:
            try:
                req = jobrec.job_request(job, self.nodes, self.cfg)
            except (SlurmError, ValueError):
                return None
            self._requests[job.job_id] = req
        return req

    # ------------------------------------------------------------------ submit
    def submit(self, spec: jobs_pb2.JobSpec, caller: Caller, test_only: bool) -> controller_pb2.SubmitJobResponse:
        validate_spec(spec, self._submit_limits, self.is_operator(caller))  # before anything is built
        now = self._now()
        with self.lock:
            job = self._new_job(spec, caller, now)
            self.accounting.fill_account(job)  # partition access (AllowAccounts) sees the default account
            try:
                req = jobrec.job_request(job, self.nodes, self.cfg)
            except ValueError as exc:
                raise SlurmError(str(exc) or "Invalid job specification") from exc
            self._check_dependencies(spec)
            snap = self._snapshot([req], capacity_only=not test_only)
            refusal = sched_submit.check_submission(req, snap)
            if refusal is not None:  # Slurm's first lines, then its message (the commands split them)
                raise SlurmError("\n".join((*refusal.details, refusal.message)))
            if test_only:
                resv.check_job_access(self, job)
                return self._test_only(req, snap, now)
            task_ids: tuple[int, ...] = ()
            if spec.array:
                try:
                    array = parse_array(spec.array, getattr(self.cfg, "max_array_size", 1001))
                except ValueError as exc:
                    raise SlurmError(str(exc)) from exc
                task_ids = array.task_ids
                job.array_max_tasks = array.max_running
            count = max(1, len(task_ids))
            active = sum(1 for j in self.jobs.values() if j.state not in FINISHED_STATES)
            if active + count > self.cfg.max_job_count:
                raise SlurmError(
                    "Slurm temporarily unable to accept job, sleeping and retrying", RESOURCE_EXHAUSTED
                )
            self.accounting.admit(job, count, self.jobs.values())
            resv.check_job_access(self, job)  # after admit: the job's account is known
            if req.dependency.terms and not job.held and spec.begin_time <= now:
                # squeue shows why the job waits from the start, as Slurm, not after the first cycle
                statuses = status_index(_status(j) for j in self.jobs.values())
                job.state_reason = sched_cycle.dependency_reason(req, statuses) or job.state_reason
            first = self.next_job_id
            snap_partitions = {p.name: p for p in snap.partitions}
            mem_per_node = self._mem_per_node_for_display(req, snap_partitions[req.partitions[0]], snap.config)
            records: list[jobs_pb2.JobInfo] = []
            for k in range(count):
                rec = jobs_pb2.JobInfo()
                rec.CopyFrom(job)
                rec.job_id = first + k
                if task_ids:
                    rec.array_job_id = first
                    rec.array_task_id = task_ids[k]
                jobrec.describe_request(rec, req, mem_per_node, self._largest_node_cpus(req.partitions[0]))
                if not (rec.min_memory_cpu_mb or rec.min_memory_node_mb or req.mem_per_node_mb):
                    rec.min_memory_cpu_mb = self.cfg.def_mem_per_cpu  # what the job gets by default
                rec.time_limit_min = effective_time_limit(req, snap_partitions[req.partitions[0]])
                rec.std_out, rec.std_err, rec.std_in = resolve_streams(rec, "%N")
                records.append(rec)
            self.next_job_id = first + count
            with self.store.transaction() as tx:
                for rec in records:
                    tx.put_job(rec.job_id, rec.SerializeToString())
                tx.set_meta("next_job_id", str(self.next_job_id))
                self.accounting.record_jobs(tx, records)
            for rec in records:
                self.jobs[rec.job_id] = rec
        self.wake.set()
        return controller_pb2.SubmitJobResponse(job_id=first, pending_note=sched_submit.pending_note(req, snap))

    def _new_job(self, spec: jobs_pb2.JobSpec, caller: Caller, now: int) -> jobs_pb2.JobInfo:
        job = jobs_pb2.JobInfo()
        job.spec.CopyFrom(spec)
        s = job.spec
        s.name = s.name or "sbatch"
        s.work_dir = s.work_dir or s.submit_dir or "/tmp"
        partition_names = [p for p in s.partition.split(",") if p] if s.partition else []
        if not partition_names:
            default = self.cfg.default_partition
            if default is None:
                raise SlurmError("No partition specified or system default partition")
            partition_names = [default.name]
        for name in partition_names:
            if name not in self._partitions:
                raise SlurmError(INVALID_PARTITION)
        job.partition = ",".join(partition_names)
        job.user_id = caller.uid
        job.group_id = caller.gid
        job.user_name = _user_name(caller.uid)
        job.group_name = _group_name(caller.gid)
        job.state = PENDING
        job.state_reason = reasons.NONE
        job.submit_time = now
        job.eligible_time = max(now, s.begin_time)
        job.accrue_time = now
        job.time_limit_min = s.time_limit_min
        job.requeue = s.requeue == 1 or (s.requeue < 0 and self.cfg.job_requeue != 0)  # -1: JobRequeue decides
        job.account = s.account
        job.qos = s.qos or "normal"
        job.held = s.hold
        job.batch_flag = 1 if s.batch else 0
        job.array_task_id = -1
        job.alloc_node_sid = f"{s.submit_host or caller.host}:{os.getpid()}"
        job.std_in = s.std_in or "/dev/null"
        if s.hold:
            job.state_reason = reasons.HELD_USER
        if s.switches:  # the wait for them is at most SchedulerParameters max_switch_wait, as Slurm
            longest = self._sched_config.max_switch_wait_s
            s.switch_wait_s = longest if s.switch_wait_s < 0 else min(s.switch_wait_s, longest)
        return job

    def _check_dependencies(self, spec: jobs_pb2.JobSpec) -> None:
        if not spec.dependency:
            return
        try:
            wanted = jobrec.referenced_job_ids(spec)
        except ValueError as exc:
            raise SlurmError(DEPENDENCY_PROBLEM) from exc
        known = set(self.jobs) | {j.array_job_id for j in self.jobs.values() if j.array_job_id}
        if any(i not in known for i in wanted):
            raise SlurmError(DEPENDENCY_PROBLEM)

    def _mem_per_node_for_display(self, req: m.JobRequest, part: m.Partition, config: m.Config) -> int:
        """Memory per node the pending job asks (ReqTRES), by the core's rules; 0 = a whole node."""
        nodes = max(1, req.min_nodes)
        cpus = -(-job_cpus(req) // nodes)
        gpus = -(-job_gpus(req) // nodes)
        mem = mem_for(req, cpus, m.Node(name="", cpus=cpus, real_memory_mb=0), part, config, gpus)
        return max(0, mem)

    def _test_only(self, req: m.JobRequest, snap: m.Snapshot, now: int) -> controller_pb2.SubmitJobResponse:
        found = sched_placement.earliest_start(req, snap, now)
        if found is None:
            raise SlurmError("Requested node configuration is not available")
        start_time, start = found
        return controller_pb2.SubmitJobResponse(
            job_id=self.next_job_id,
            test_start_time=start_time,
            test_cpus=sum(a.cpus for a in start.allocation),
            test_nodes=hostlist.collect(a.node for a in start.allocation),
            test_partition=start.partition,
        )

    # ------------------------------------------------------------------ scheduling
    def schedule(self) -> int:
        """Run one cycle of the core and apply its decisions; returns how many jobs started."""
        now = self._now()
        launches: list[tuple[cluster_pb2.NodeInfo, node_pb2.LaunchBatchRequest]] = []
        effects: list[Callable[[], None]] = []
        with self.lock:
            pending: list[m.JobRequest] = []
            by_id: dict[int, jobs_pb2.JobInfo] = {}
            for job in self.jobs.values():
                if job.state != PENDING or job.held:
                    continue  # a held job keeps its JobHeld* reason and never starts
                req = self._request(job)
                if req is None:
                    job.state_reason = reasons.BAD_CONSTRAINTS
                    continue
                pending.append(req)
                by_id[job.job_id] = job
            if not pending:
                self._recalculate_running(None, now)
                return 0
            snap = self._snapshot(pending)
            self._recalculate_running(snap, now)
            result = sched_cycle.run_cycle(snap, now)
            array_reason: dict[int, str] = {}
            for job_id in sorted(result.reasons):
                waiting = by_id.get(job_id)
                if waiting is None:
                    continue
                reason = result.reasons[job_id]
                if waiting.array_job_id:
                    # squeue shows an array's pending tasks as one record with one reason, as Slurm
                    reason = array_reason.setdefault(waiting.array_job_id, reason)
                waiting.state_reason = reason
                waiting.last_sched_eval = now
            for job_id, prio in result.priorities.items():
                waiting = by_id.get(job_id)
                if waiting is not None:
                    waiting.priority = 0 if waiting.held else prio
            for job_id, waiting in by_id.items():  # backfill's plan: squeue --start, SCHEDNODES
                plan = result.planned.get(job_id)
                waiting.start_time = plan.start_time if plan else 0
                waiting.sched_nodes = hostlist.collect(plan.nodes) if plan else ""
            started: list[jobs_pb2.JobInfo] = []
            preempt_config = self._sched_config.preempt
            node_types = {n: rt.gpu_types.get(0, "") for n, rt in self.nodes.items()}
            for start in result.starts:
                job = by_id[start.job_id]
                jobrec.apply_start(job, start, now, node_types)
                if preempt_config.type != "preempt/none":
                    job.preempt_eligible_time = now + preempt_config.exempt_time_s
                self._requests.pop(job.job_id, None)
                job.std_out, job.std_err, job.std_in = resolve_streams(job, job.batch_host)
                job.last_sched_eval = now
                started.append(job)
            preempted, effects = preempt.apply_preemptions(self, result.preemptions, now)
            if started or preempted:
                self._save(*started, *preempted)
                for job in started:
                    if not job.spec.batch:
                        continue  # an salloc/srun allocation: its own command runs steps in it
                    node = self.nodes[job.batch_host]
                    launches.append((node.info, self._launch_request(job)))
        for node_info, request in launches:  # once PrologSlurmctld, if any, succeeded (ctld.job_hooks)
            job_hooks.launch_after_prolog_slurmctld(self.cfg, request.job, partial(self.actions.launch, node_info, request),
                                                    partial(self.launch_failed, request.job.job_id, node_down=False, requeue=True))
        for effect in effects:
            effect()
        return len(launches)

    def _recalculate_running(self, snap: m.Snapshot | None, now: int) -> None:
        """PriorityFlags=CALCULATE_RUNNING: running jobs' priorities follow age and fair-share (see
        priority.running_priorities); an admin's Priority= stays. Called under the lock."""
        conf = self._sched_config.priority
        if conf.type != MULTIFACTOR or CALCULATE_RUNNING not in conf.flags:
            return
        running = {j.job_id: j for j in self.jobs.values() if j.state == RUNNING and not j.priority_set}
        reqs: list[m.JobRequest] = []
        for job in running.values():
            try:
                reqs.append(jobrec.job_request(job, self.nodes, self.cfg))
            except (SlurmError, ValueError):
                continue
        if not reqs:
            return
        snap = snap or self._snapshot([])
        for job_id, prio in sched_priority.running_priorities(snap, reqs, now).items():
            running[job_id].priority = prio

    def _launch_request(self, job: jobs_pb2.JobInfo) -> node_pb2.LaunchBatchRequest:
        from shoal.auth.job_credential import sign_job_credential

        cred = node_pb2.JobCredential(
            job_id=job.job_id,
            uid=job.user_id,
            gid=job.group_id,
            nodes=job.nodes,
            expiry=self._now() + 3600,
        )
        addr, pattern = self.topology_address(job.batch_host)
        return node_pb2.LaunchBatchRequest(
            node=job.batch_host,
            job=job,
            credential=sign_job_credential(self.key, cred),
            cluster_name=self.cfg.cluster_name,
            ctld_addr=f"{self.cfg.control_addr}:{self.cfg.slurmctld_port}",
            kill_wait=self.cfg.kill_wait,
            slurm_conf=str(self.cfg.path),
            topology_addr=addr,
            topology_addr_pattern=pattern,
        )

    def topology_address(self, node: str) -> tuple[str, str]:
        """SLURM_TOPOLOGY_ADDR and _PATTERN of `node`: its switch path under topology/tree, else its name."""
        if self.cfg.topology is None:
            return node, "node"
        return self.cfg.topology.address(node)

    def launch_failed(self, job_id: int, message: str, node_down: bool, requeue: bool = False) -> None:
        """A LaunchBatch RPC failed: requeue when the node is unreachable (or `requeue`: PrologSlurmctld
        failed), else fail the job."""
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None or job.state != RUNNING:
                return
            if node_down or requeue:
                node = self.nodes.get(job.batch_host)
                if node is not None and node_down:
                    node.info.not_responding = True
                log.warning("launch of job %d on %s failed (%s); requeued", job_id, job.batch_host, message)
                self._requeue(job, self._now(), ended_as=jobs_pb2.NODE_FAIL if node_down else jobs_pb2.REQUEUED)
            else:
                log.warning("launch of job %d failed: %s", job_id, message)
                self._finish(job, jobs_pb2.FAILED, exit_code=1, exit_signal=0, now=self._now())
            self._save(job)
        self.wake.set()

    # ------------------------------------------------------------------ completion
    def complete_batch(self, req: controller_pb2.CompleteBatchRequest) -> None:
        with self.lock:
            job = self.jobs.get(req.job_id)
            if job is None or job.state not in ACTIVE_STATES:
                return  # already handled (a replayed report after a noded restart)
            if req.run != job.restarts:
                # a late report of an earlier run (it was requeued meanwhile, e.g. as NODE_FAIL): the
                # run now going on is not the one that ended
                log.info("job %d: ignoring the end of run %d (run %d is current)", job.job_id, req.run, job.restarts)
                return
            now = req.end_time or self._now()
            job.batch_usage.CopyFrom(req.usage)  # the .batch step's MaxRSS/TotalCPU in accounting
            # final_state: what the controller ended it as (cancel, time limit, requeue, preemption)
            if job.final_state == jobs_pb2.REQUEUED:
                ended_as = jobs_pb2.PREEMPTED if job.preempt_time else jobs_pb2.REQUEUED
                self._requeue(job, self._now(), ended_as=ended_as, ended_at=now)
            elif job.final_state:
                self._finish(job, job.final_state, req.exit_code, req.exit_signal, now)
            elif req.prolog_failed:  # ctld.job_hooks: requeued held (its node is drained below)
                self._requeue(job, self._now(), ended_as=jobs_pb2.REQUEUED, ended_at=now)
                if "nohold_on_prolog_fail" not in self.cfg.scheduler_parameters:
                    job_hooks.hold_requeued(job)
            elif req.node_fail:
                log.warning("job %d lost with node %s: %s", job.job_id, req.node, req.message)
                self._end_by_node_failure(job, now)
            elif req.launch_failed:
                log.warning("job %d failed to launch on %s: %s", job.job_id, req.node, req.message)
                self._finish(job, jobs_pb2.FAILED, req.exit_code or 1, req.exit_signal, now)
            elif req.oom:
                self._finish(job, jobs_pb2.OUT_OF_MEMORY, req.exit_code, req.exit_signal, now)
            elif req.exit_code == 0 and req.exit_signal == 0:
                self._finish(job, jobs_pb2.COMPLETED, 0, 0, now)
            else:
                self._finish(job, jobs_pb2.FAILED, req.exit_code, req.exit_signal, now)
            self._save(job)
            effects = jobsteps.terminate_elsewhere(self, job, "complete")
            # and on the batch host: nothing of an ended job may run on (a no-op when it has ended
            # there; a requeued one was terminated before, and its next run must not be hit)
            host = self.nodes.get(req.node)
            if host is not None and (req.prolog_failed or req.epilog_failed):
                reason = job_hooks.PROLOG_ERROR if req.prolog_failed else job_hooks.EPILOG_ERROR
                job_hooks.drain(host.info, reason, now, req.hook_message or req.message)
                self._save_node(host)
            if job.state in FINISHED_STATES and host is not None and host.registered and not host.info.not_responding:
                effects.append(partial(self.actions.terminate, host.info, job.job_id, self.cfg.kill_wait, "ended"))
        for effect in effects:
            effect()
        self.wake.set()

    def _finish(self, job: jobs_pb2.JobInfo, state: int, exit_code: int, exit_signal: int, now: int) -> None:
        self._requests.pop(job.job_id, None)
        job.state = state  # type: ignore[assignment]
        job.final_state = jobs_pb2.JOB_STATE_UNSPECIFIED
        job.exit_code = exit_code
        job.exit_signal = exit_signal
        job.end_time = now
        reason = ENDED_REASONS.get(state, reasons.NONE)
        if state == jobs_pb2.FAILED and exit_signal and not exit_code:
            reason = reasons.RAISED_SIGNAL
        job.state_reason = reason
        jobsteps.end_job_steps(job, state, now)
        noderec.note_job_ended(self.nodes, self.jobs.values(), job, now)  # LastBusyTime
        job_hooks.epilog_slurmctld(self.cfg, job)

    def _end_by_node_failure(self, job: jobs_pb2.JobInfo, now: int) -> None:
        """A node of the job failed: a batch job that may be requeued (JobRequeue, --requeue) runs
        again (its lost run recorded NODE_FAIL), any other ends NODE_FAIL, as in Slurm."""
        if job.batch_flag and job.requeue:
            log.warning("job %d requeued after the failure of its node", job.job_id)
            self._requeue(job, self._now(), ended_as=jobs_pb2.NODE_FAIL, ended_at=now)
        else:
            self._finish(job, jobs_pb2.NODE_FAIL, 0, 0, now)

    def _requeue(
        self, job: jobs_pb2.JobInfo, now: int, ended_as: int = 0, ended_at: int = 0, ran: bool = True
    ) -> None:
        """Back to pending (reason BeginTime, Restarts+1) with a new submit time, as Slurm: accounting
        then keeps each run as its own record (`sacct -D`); `ended_as` is the state of the run that
        just ended at `ended_at` (REQUEUED, PREEMPTED, NODE_FAIL; 0 = it was already recorded as finished);
        `ran=False`: that run never reached its node (no start, no `.batch` in its record).
        A preempted job waits PREEMPT_REQUEUE_DELAY_S before it may start again (Slurm waits longer), so
        the job that preempted it, even if it ranks lower, takes the room first."""
        self._requests.pop(job.job_id, None)
        delay = PREEMPT_REQUEUE_DELAY_S if ended_as == jobs_pb2.PREEMPTED else 1
        if ended_as:
            jobsteps.end_job_steps(job, jobs_pb2.CANCELLED, ended_at or now)
            run = jobs_pb2.JobInfo()
            run.CopyFrom(job)
            run.state = ended_as  # type: ignore[assignment]
            run.final_state = jobs_pb2.JOB_STATE_UNSPECIFIED
            run.end_time = ended_at or now
            if not ran:
                run.start_time = 0
            self._ended_runs.append(run)
        del job.steps[:]
        job.next_step_id = 0
        job.submit_time = max(now, job.submit_time + 1)  # a new accounting record even within the second
        job.preempt_time = 0
        job.preempt_eligible_time = 0
        job.state = PENDING
        job.final_state = jobs_pb2.JOB_STATE_UNSPECIFIED
        job.restarts += 1
        job.state_reason = reasons.BEGIN_TIME
        job.eligible_time = now
        job.warn_signal_sent = False
        job.spec.begin_time = now + delay
        jobrec.clear_allocation(job)

    # ------------------------------------------------------------------ steps (ctld.steps)
    def create_step(
        self, req: controller_pb2.CreateStepRequest, caller: Caller
    ) -> controller_pb2.CreateStepResponse:
        return jobsteps.create_step(self, req, caller)

    def complete_step(self, req: controller_pb2.CompleteStepRequest, caller: Caller) -> None:
        jobsteps.complete_step(self, req, caller)

    def get_steps(self, req: controller_pb2.GetStepsRequest) -> controller_pb2.GetStepsResponse:
        return jobsteps.get_steps(self, req)

    def complete_allocation(self, req: controller_pb2.CompleteAllocationRequest, caller: Caller) -> None:
        jobsteps.complete_allocation(self, req, caller)

    # ------------------------------------------------------------------ queries
    def unavailable_partitions(self, caller: Caller | None) -> set[str]:
        """Partitions whose AllowGroups leave the caller out: sinfo, squeue and scontrol show them (and
        their jobs) only with -a or when named, as Slurm does. Root and SlurmUser pass every AllowGroups."""
        if caller is None:
            return set()
        return {p.name for p in self._partitions_view if p.allow_uids is not None and caller.uid not in p.allow_uids}

    def get_jobs(self, req: controller_pb2.GetJobsRequest, caller: Caller | None = None) -> controller_pb2.GetJobsResponse:
        with self.lock:
            wanted = set(req.job_ids)
            users = set(req.user_ids)
            out = controller_pb2.GetJobsResponse(now=self._now())
            candidates: Iterable[jobs_pb2.JobInfo] = self.jobs.values()
            if req.job_id_strs:
                candidates = [j for _, found in self._select(req.job_id_strs) for j in found]
            hidden = set() if req.show_all else (
                {p.name for p in self.cfg.partitions if p.hidden} | self.unavailable_partitions(caller))
            # jobs kept by MinJobAge go to listings that ask for them (squeue -t all, scontrol) and to
            # whoever names jobs (squeue -j, sbatch --wait, salloc): a plain squeue does not need them
            finished_too = req.include_finished or bool(req.job_ids or req.job_id_strs)
            for job in candidates:
                if not finished_too and job.state in FINISHED_STATES:
                    continue
                if hidden and all(name in hidden for name in job.partition.split(",")):
                    continue
                if wanted and job.job_id not in wanted and job.array_job_id not in wanted:
                    continue
                if users and job.user_id not in users:
                    continue
                view = out.jobs.add()
                view.CopyFrom(job)
                # the script and the exported environment stay in the controller: they are most of a
                # record's bytes and no listing shows them
                view.spec.ClearField("environment")
                view.spec.ClearField("script")
            return out

    def get_nodes(self, req: controller_pb2.GetNodesRequest,
                  caller: Caller | None = None) -> controller_pb2.GetNodesResponse:
        with self.lock:
            usage = self._usage()
            names = set(req.names)
            out = controller_pb2.GetNodesResponse(now=self._now())
            maint = resv.maint_nodes(self, out.now)
            completing = {a.node for j in self.jobs.values() if j.state == COMPLETING for a in j.allocation}
            for name, node in self.nodes.items():
                if names and name not in names:
                    continue
                u = usage[name]
                info = out.nodes.add()
                info.CopyFrom(node.info)
                info.alloc_cpus = len(u.cpu_ids)
                info.alloc_mem_mb = u.mem_mb
                info.alloc_gpus = len(u.gpu_indices)
                if u.exclusive and u.jobs:
                    info.alloc_cpus = node.conf.cpus
                info.gres_used = gres_used(node, u.gpu_indices)
                info.completing = name in completing
                info.maint = name in maint
                info.base_state, info.state = long_state(info, info.alloc_cpus, info.completing)
            if req.with_partitions:
                out.partitions.extend(self.get_partitions(controller_pb2.GetPartitionsRequest(), caller).partitions)
            return out

    def get_partitions(self, req: controller_pb2.GetPartitionsRequest,
                       caller: Caller | None = None) -> controller_pb2.GetPartitionsResponse:
        names = set(req.names)
        unavailable = self.unavailable_partitions(caller)
        out = controller_pb2.GetPartitionsResponse()
        for p in self.cfg.partitions:
            if names and p.name not in names:
                continue
            out.partitions.add(
                name=p.name,
                nodes=hostlist.collect(p.nodes),
                is_default=self.cfg.default_partition is not None and self.cfg.default_partition.name == p.name,
                max_time_min=p.max_time,
                default_time_min=p.default_time,
                max_nodes=p.max_nodes,
                min_nodes=p.min_nodes,
                state=p.state,
                priority_tier=p.priority_tier,
                priority_job_factor=p.priority_job_factor,
                allow_accounts=p.allow_accounts,
                deny_accounts=p.deny_accounts or "",
                allow_groups=p.allow_groups,
                allow_qos=p.allow_qos,
                oversubscribe=p.oversubscribe,
                total_cpus=sum(self.nodes[n].conf.cpus for n in p.nodes if n in self.nodes),
                total_nodes=len(p.nodes),
                hidden=p.hidden,
                exclusive_user=p.exclusive_user,
                root_only=p.root_only,
                deny_qos=p.deny_qos,
                def_mem_per_cpu_mb=p.def_mem_per_cpu or 0,
                max_mem_per_cpu_mb=p.max_mem_per_cpu or 0,
                preempt_mode=p.preempt_mode or self.cfg.preempt_mode,
                grace_time=p.grace_time,
                unavailable=p.name in unavailable,
            )
        return out

    def get_config(self) -> controller_pb2.GetConfigResponse:
        out = controller_pb2.GetConfigResponse(now=self._now(), cluster_name=self.cfg.cluster_name)
        for key, value in config_entries(self.cfg, self.started, self.next_job_id):  # as 22.05 lists them
            out.entries.add(key=key, value=value)
        topo = self.cfg.topology
        switches = topo.switches if topo is not None else ()
        for switch in switches:
            out.switches.add(
                name=switch.name,
                level=switch.level,
                link_speed=switch.link_speed,
                nodes=hostlist.collect(topo.nodes_under(switch.name) if topo else ()),
                switches=hostlist.collect(switch.switches),
            )
        return out

    # ------------------------------------------------------------------ job selection
    def _select(self, ids: Iterable[str]) -> list[tuple[str, list[jobs_pb2.JobInfo]]]:
        """Resolve user-typed ids ('12', '30_2', '30_[1-3]', '30') to jobs; unknown -> empty list."""
        out = []
        for text in ids:
            text = text.strip()
            base, _, task = text.partition("_")
            base = base.split(".")[0]
            if not base.isdigit():
                raise SlurmError(INVALID_JOB_ID)
            jid = int(base)
            if task:
                task = task.strip("[]")
                try:
                    tasks = set(parse_array(task.split("%")[0], 1 << 31).task_ids)
                except ValueError as exc:
                    raise SlurmError(INVALID_JOB_ID) from exc
                found = [
                    j for j in self.jobs.values() if j.array_job_id == jid and j.array_task_id in tasks
                ]
            else:
                found = [
                    j for j in self.jobs.values() if j.job_id == jid or (j.array_job_id == jid and jid != 0)
                ]
                direct = self.jobs.get(jid)
                if direct is not None and direct.array_job_id and direct.array_job_id != jid:
                    found = [direct]  # a task's own job id names only that task
            out.append((text, found))
        return out

    def _filtered(self, req: controller_pb2.SignalJobsRequest) -> list[jobs_pb2.JobInfo]:
        states: set[int] | None = None
        if req.states:
            from shoal.states import parse_job_states

            try:
                states = parse_job_states(",".join(req.states))
            except ValueError as exc:
                raise SlurmError(str(exc)) from exc
        try:
            nodes = set(hostlist.expand(req.nodelist)) if req.nodelist else None
        except hostlist.HostlistError as exc:
            raise SlurmError("Invalid node name specified") from exc
        out = []
        for job in self.jobs.values():
            if job.state in FINISHED_STATES:
                continue
            if req.filter_user and job.user_id != req.user_id:
                continue
            if req.name and job.spec.name != req.name:
                continue
            if states is not None and job.state not in states:
                continue
            if req.partition and job.partition not in req.partition.split(","):
                continue
            if req.account and job.account != req.account:
                continue
            if nodes is not None and not nodes.intersection(a.node for a in job.allocation):
                continue
            out.append(job)
        return out

    # ------------------------------------------------------------------ cancel / signal
    def signal_jobs(self, req: controller_pb2.SignalJobsRequest, caller: Caller) -> controller_pb2.SignalJobsResponse:
        out = controller_pb2.SignalJobsResponse()
        effects: list[Callable[[], None]] = []
        now = self._now()
        with self.lock:
            filters = bool(req.filter_user or req.name or req.states or req.partition or req.account or req.nodelist)
            groups: list[tuple[str, list[jobs_pb2.JobInfo]]]
            if req.job_ids:
                groups = self._select(req.job_ids)
                if filters:
                    allowed = {j.job_id for j in self._filtered(req)}
                    groups = [(t, [j for j in js if j.job_id in allowed]) for t, js in groups]
            else:
                groups = [(str(j.job_id), [j]) for j in self._filtered(req)]
            changed: list[jobs_pb2.JobInfo] = []
            for text, found in groups:
                if not found:
                    if not filters:
                        out.results.add(job_id=text, code=NOT_FOUND, message=INVALID_JOB_ID)
                    continue
                live = [j for j in found if j.state not in FINISHED_STATES]
                if live and len(found) > 1:
                    found = live  # an array's finished tasks are skipped, as Slurm does
                step = text.partition(".")[2]
                for job in found:
                    code, message = self._signal_one(job, req, caller, now, effects, step)
                    if code:
                        out.results.add(job_id=_job_id_str(job), code=code, message=message)
                    else:
                        changed.append(job)
            if changed:
                self._save(*changed)
        for effect in effects:
            effect()
        self.wake.set()
        return out

    def _signal_one(
        self,
        job: jobs_pb2.JobInfo,
        req: controller_pb2.SignalJobsRequest,
        caller: Caller,
        now: int,
        effects: list[Callable[[], None]],
        step: str = "",
    ) -> tuple[int, str]:
        if job.user_id != caller.uid and not self.is_operator(caller):
            return PERMISSION_DENIED, ACCESS_DENIED
        if job.state in FINISHED_STATES or job.state == COMPLETING:
            return FAILED_PRECONDITION, ALREADY_DONE
        sig = req.signal
        if step.isdigit() and job.state != PENDING:
            self._signal_step(job, int(step), sig, now, effects)
            return 0, ""
        if step == "extern":
            return 0, ""
        batch_only = req.batch_only or step == "batch"
        if batch_only and sig == 0:
            sig = 9  # as Slurm: `scancel -b` alone kills the batch shell (the job ends FAILED 0:9)
        if job.state == PENDING:
            if sig not in (0, 9):
                return FAILED_PRECONDITION, NOT_NOW
            if job.held or job.state_reason in (reasons.DEPENDENCY, reasons.DEPENDENCY_NEVER):
                job.eligible_time = 0  # never eligible: EligibleTime=Unknown, and sacct's windows skip it
            self._finish(job, jobs_pb2.CANCELLED, 0, 0, now)
            job.cancelled_by_uid = caller.uid
            job.cancelled_by = str(caller.uid)
            return 0, ""
        node = self.nodes[job.batch_host].info
        if sig == 0 or (sig == 9 and not batch_only):
            job.cancelled_by_uid = caller.uid
            job.cancelled_by = str(caller.uid)
            effects.extend(jobsteps.terminate_elsewhere(self, job, "cancel"))
            if not job.batch_flag:  # no batch script to wait for: an allocation ends at once
                self._finish(job, jobs_pb2.CANCELLED, 0, 0, now)
                return 0, ""
            job.state = COMPLETING
            job.final_state = jobs_pb2.CANCELLED
            job.end_time = now
            effects.append(partial(self.actions.terminate, node, job.job_id, self.cfg.kill_wait, "cancel"))
            return 0, ""
        effects.extend(self._signal_effects(job, sig, batch_only, req.full))
        return 0, ""

    def _signal_step(
        self, job: jobs_pb2.JobInfo, step_id: int, sig: int, now: int, effects: list[Callable[[], None]]
    ) -> None:
        """`scancel [-s SIG] J.S`: that step's tasks on its nodes; the job runs on. Without a signal the
        step ends CANCELLED (SIGTERM, KillWait, SIGKILL). A step that does not run is no error (Slurm's)."""
        step = next((s for s in job.steps if s.step_id == step_id and s.state == RUNNING), None)
        if step is None:
            return
        for part in step.layout:
            node = self.nodes.get(part.node)
            if node is not None:
                effects.append(partial(self.actions.signal_step, node.info, job.job_id, step_id, sig))
        if sig == 0 or sig == 9:
            jobsteps.cancel_step(step, now)

    def _signal_effects(
        self, job: jobs_pb2.JobInfo, sig: int, batch_only: bool, full: bool
    ) -> list[Callable[[], None]]:
        """Deliver a signal where Slurm does: by default to every step on every node of the job but
        never to the batch shell (a tool's step catches it, the shell does not die of it); -b/B: to
        the shell alone; -f to the shell, what it started and every step."""
        out: list[Callable[[], None]] = [
            partial(self.actions.signal, self.nodes[job.batch_host].info, job.job_id, sig, batch_only, full)
        ]
        if not batch_only:
            for name in sorted({a.node for a in job.allocation} - {job.batch_host}):
                if name in self.nodes:
                    out.append(partial(self.actions.signal, self.nodes[name].info, job.job_id, sig, False, False))
        return out

    # ------------------------------------------------------------------ update / hold / release / requeue
    def update_job(self, req: controller_pb2.UpdateJobRequest, caller: Caller) -> controller_pb2.UpdateJobResponse:
        out = controller_pb2.UpdateJobResponse()
        effects: list[Callable[[], None]] = []
        now = self._now()
        with self.lock:
            changed: list[jobs_pb2.JobInfo] = []
            for text, found in self._select(req.job_ids):
                if not found:
                    out.results.add(job_id=text, code=NOT_FOUND, message=INVALID_JOB_ID)
                    continue
                for job in found:
                    try:
                        if job.user_id != caller.uid and not self.is_operator(caller):
                            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
                        self._update_one(job, req, caller, now, effects)
                        changed.append(job)
                        self._requests.pop(job.job_id, None)
                    except SlurmError as exc:
                        out.results.add(job_id=_job_id_str(job), code=exc.code, message=exc.message)
            if req.action == "top" and changed:
                changed.extend(self._top(changed))
            if changed:
                self._save(*changed)
        for effect in effects:
            effect()
        self.wake.set()
        return out

    def _update_one(
        self,
        job: jobs_pb2.JobInfo,
        req: controller_pb2.UpdateJobRequest,
        caller: Caller,
        now: int,
        effects: list[Callable[[], None]],
    ) -> None:
        action = req.action or "update"
        operator = self.is_operator(caller)
        if action in ("hold", "uhold"):
            if job.state != PENDING:
                raise SlurmError("Job is no longer pending execution", FAILED_PRECONDITION)
            job.held = True
            job.held_by_admin = action == "hold" and operator and job.user_id != caller.uid
            job.state_reason = reasons.HELD_ADMIN if job.held_by_admin else reasons.HELD_USER
            job.priority = 0
        elif action == "release":
            if job.state != PENDING:
                raise SlurmError("Job is no longer pending execution", FAILED_PRECONDITION)
            if job.held_by_admin and not operator:
                raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
            job.held = False
            job.held_by_admin = False
            job.state_reason = reasons.NONE
            job.priority_set = False  # as Slurm: release recomputes the priority
        elif action in ("requeue", "requeuehold"):
            self._requeue_action(job, now, effects, hold=action == "requeuehold")
        elif action == "top":
            if job.state != PENDING:
                raise SlurmError("Job is no longer pending execution", FAILED_PRECONDITION)
            user_top = any(w.strip().lower() == "enable_user_top" for w in self.cfg.scheduler_parameters)
            if not operator and not user_top:
                raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        elif action == "update":
            for kv in req.fields:
                self._update_field(job, kv.key, kv.value, operator)
        else:
            raise SlurmError(f"Invalid update action: {action}")

    def _top(self, targets: list[jobs_pb2.JobInfo]) -> list[jobs_pb2.JobInfo]:
        """scontrol top: trade nice values inside each target's group (see top.py); returns the others changed."""
        listed = {job.job_id for job in targets}
        changed: list[jobs_pb2.JobInfo] = []
        groups: dict[tuple[int, str, str, str], list[jobs_pb2.JobInfo]] = {}
        for job in targets:
            if "," not in job.partition:  # as Slurm: jobs submitted to one partition only
                groups.setdefault((job.user_id, job.partition, job.account, job.qos), []).append(job)
        for key, members in groups.items():
            peers = [
                j for j in self.jobs.values()
                if j.state == PENDING and not j.held and j.job_id not in listed
                and (j.user_id, j.partition, j.account, j.qos) == key
            ]
            queued = {j.job_id: top.Queued(j.job_id, j.priority, j.spec.nice) for j in members + peers}
            nice = top.top_nice([queued[j.job_id] for j in members], [queued[j.job_id] for j in peers])
            for job in members + peers:
                delta = nice[job.job_id] - job.spec.nice
                if delta:
                    job.spec.nice = nice[job.job_id]
                    if not job.priority_set:
                        job.priority = max(1, job.priority - delta)
                    self._requests.pop(job.job_id, None)
                    if job.job_id not in listed:
                        changed.append(job)
        return changed

    def _requeue_action(
        self, job: jobs_pb2.JobInfo, now: int, effects: list[Callable[[], None]], hold: bool
    ) -> None:
        if not job.batch_flag:
            raise SlurmError("Only batch jobs are accepted or processed", FAILED_PRECONDITION)
        if job.state == PENDING:
            raise SlurmError(JOB_PENDING_MSG, FAILED_PRECONDITION)
        if job.state == COMPLETING:
            raise SlurmError(ALREADY_DONE, FAILED_PRECONDITION)
        if job.state in ACTIVE_STATES:
            node = self.nodes[job.batch_host].info
            job.state = COMPLETING
            job.final_state = jobs_pb2.REQUEUED
            effects.append(partial(self.actions.terminate, node, job.job_id, self.cfg.kill_wait, "requeue"))
        else:
            self._requeue(job, now)
        if hold:
            job.held = True
            job.state_reason = reasons.HELD_USER

    def _update_field(self, job: jobs_pb2.JobInfo, key: str, value: str, operator: bool) -> None:
        k = key.lower()
        pending = job.state == PENDING
        if k == "timelimit":
            try:
                minutes = parse_time_limit(value)
            except ValueError as exc:
                raise SlurmError("Invalid time limit specification") from exc
            current = job.time_limit_min if job.state != PENDING else job.spec.time_limit_min
            if not operator and (minutes == -2 or (current not in (-1, -2) and minutes > current) or current == -1):
                if not (current == -2 and minutes != -2) and not (current >= 0 and 0 <= minutes <= current):
                    raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
            job.spec.time_limit_min = minutes
            if job.state == PENDING:
                job.time_limit_min = minutes
            if job.state in ACTIVE_STATES:
                job.time_limit_min = minutes
                job.end_time = job.start_time + minutes * 60 if minutes >= 0 else 0
            return
        if k in ("name", "jobname"):
            job.spec.name = value
            return
        if k == "comment":
            job.spec.comment = value
            return
        if k == "nice":
            nice = int(value) if value.lstrip("-").isdigit() else 0
            if nice < 0 and not operator:
                raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
            job.spec.nice = nice
            return
        if k == "sitefactor":
            if not operator:
                raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
            site = int(value) if value.lstrip("-").isdigit() else 0
            if not job.priority_set and job.priority and self._sched_config.priority.type == MULTIFACTOR:
                # as Slurm, the job's priority moves now (a pending one is recomputed next cycle anyway)
                job.priority = min(max(1, job.priority + site - job.site_factor), 0xFFFFFFFE)
            job.site_factor = site
            return
        if k == "priority":
            if not operator:
                raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
            try:
                priority = int(value)
            except ValueError as exc:
                raise SlurmError("Invalid job priority") from exc
            if priority <= 0:  # as Slurm: Priority=0 holds the job
                job.held, job.held_by_admin, job.state_reason = True, True, reasons.HELD_ADMIN
                job.priority = 0
            else:
                job.priority = min(priority, 0xFFFFFFFE)
                job.priority_set = True
            return
        if k == "requeue":
            job.requeue = value not in ("0", "no")
            return
        if not pending:
            raise SlurmError("Job is no longer pending execution", FAILED_PRECONDITION)
        if k == "partition":
            for name in value.split(","):
                if name not in self._partitions:
                    raise SlurmError(INVALID_PARTITION)
            job.partition = value
            job.spec.partition = value
        elif k == "dependency":
            if value in ("", "none", "None"):
                job.spec.dependency = ""
            else:
                try:
                    parse_dependency(value)
                except ValueError as exc:
                    raise SlurmError(DEPENDENCY_PROBLEM) from exc
                job.spec.dependency = value
        elif k in ("numnodes", "minnodes"):
            lo, _, hi = value.partition("-")
            job.spec.min_nodes = _count(lo, NODE_COUNT_INVALID)
            job.spec.max_nodes = _count(hi, NODE_COUNT_INVALID) if hi else job.spec.min_nodes
        elif k in ("numtasks",):
            job.spec.num_tasks = _count(value, TASK_COUNT_INVALID)
        elif k in ("starttime", "begintime"):
            from shoal.timefmt import parse_datetime

            try:
                job.spec.begin_time = parse_datetime(value, self._now())
            except ValueError as exc:
                raise SlurmError("Invalid time specification") from exc
            job.eligible_time = job.spec.begin_time
        elif k == "arraytaskthrottle":
            for other in self.jobs.values():
                if job.array_job_id and other.array_job_id == job.array_job_id:
                    other.array_max_tasks = _count(value, INVALID_ARRAY)
        elif k in ("excnodelist",):
            job.spec.exclude = value
        elif k in ("reqnodelist", "nodelist"):
            job.spec.nodelist = value
        elif k in ("features",):
            job.spec.constraint = value
        elif k == "account":
            job.spec.account = value
            job.account = value
        elif k == "qos":
            job.spec.qos = value
            job.qos = value
        elif k == "reservation":
            previous = job.spec.reservation
            job.spec.reservation = "" if value.lower() in ("", "none", "(null)") else value
            try:
                resv.check_job_access(self, job)
            except SlurmError:
                job.spec.reservation = previous
                raise
        else:
            raise SlurmError(f"Update of this parameter is not supported: {key}")
        req = jobrec.job_request(job, self.nodes, self.cfg)
        jobrec.describe_request(job, req, job.mem_mb // max(1, job.num_nodes), self._largest_node_cpus(req.partitions[0]))

    def _largest_node_cpus(self, partition: str) -> int:
        """CPUs of the partition's largest node as configured (for a pending job's NumNodes)."""
        part = self.cfg.partition(partition)
        names = part.nodes if part is not None else ()
        return max((self.nodes[n].conf.cpus for n in names if n in self.nodes), default=0)

    # ------------------------------------------------------------------ nodes
    def update_node(self, req: controller_pb2.UpdateNodeRequest, caller: Caller) -> None:
        if not self.is_operator(caller):
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        try:
            names = hostlist.expand(req.nodes)
        except hostlist.HostlistError as exc:
            raise SlurmError("Invalid node name specified") from exc
        fields = {kv.key.lower(): kv.value for kv in req.fields}
        now = self._now()
        effects: list[Callable[[], None]] = []
        with self.lock:
            for name in names:
                if name not in self.nodes:
                    raise SlurmError("Invalid node name specified")
            state = fields.get("state", "").upper()
            reason = fields.get("reason", "")
            if state in ("DRAIN", "DOWN", "FAIL") and not reason:
                raise SlurmError("You must specify a reason when DOWNING or DRAINING a node. Request denied")
            for name in names:
                node = self.nodes[name]
                info = node.info
                if state in ("DRAIN", "FAIL"):
                    info.drain = True
                elif state == "DOWN":
                    info.base_state = "DOWN"
                    effects.extend(self._fail_jobs_on(name, now))
                elif state in ("RESUME", "IDLE", "UNDRAIN"):
                    info.drain = False
                    if state != "UNDRAIN" and info.base_state == "DOWN":
                        info.base_state = "IDLE" if node.registered else "UNKNOWN"
                    info.reason = ""
                    info.reason_uid = 0
                    info.reason_time = 0
                elif state:
                    raise SlurmError("Invalid node state specified")
                if reason:
                    info.reason = reason
                    info.reason_uid = caller.uid
                    info.reason_user = _user_name(caller.uid)
                    info.reason_time = now
                self._save_node(node)
        for effect in effects:
            effect()
        self.wake.set()

    def _fail_jobs_on(self, name: str, now: int) -> list[Callable[[], None]]:
        """A node went DOWN: its running jobs end as NODE_FAIL (or are requeued); other nodes of those
        jobs clean up."""
        effects: list[Callable[[], None]] = []
        for job in self.jobs.values():
            if job.state not in ACTIVE_STATES or name not in (a.node for a in job.allocation):
                continue
            others = [self.nodes[a.node] for a in job.allocation if a.node != name]
            self._end_by_node_failure(job, now)
            self._save(job)
            for other in others:
                if other.available:
                    effects.append(partial(self.actions.terminate, other.info, job.job_id, 0, "node_fail"))
        return effects

    def register_node(self, req: controller_pb2.RegisterNodeRequest) -> controller_pb2.RegisterNodeResponse:
        now = self._now()
        with self.lock:
            node = self.nodes.get(req.name)
            if node is None:
                return controller_pb2.RegisterNodeResponse(accepted=False, message=f"Unknown node name {req.name}")
            info = node.info
            info.hardware.CopyFrom(req.hardware)
            info.version = req.version
            info.noded_start_time = req.start_time
            noderec.note_registered(info)  # LastBusyTime
            previous_boot = info.boot_time
            info.boot_time = req.hardware.boot_time
            node.registered = True
            node.last_contact = self.clock()
            info.not_responding = False
            if req.hardware.gpus:
                node.gpu_types.update({g.index: g.type for g in req.hardware.gpus})
            problems = registration_problems(node.conf, req.hardware)
            if problems:
                info.drain = True
                info.reason = ", ".join(problems)
                info.reason_time = now
                info.reason_uid = 0
                info.reason_user = "slurm"
                log.warning("node %s drained: %s", req.name, info.reason)
            rts = self.cfg.return_to_service
            if info.base_state == "DOWN":
                if rts == 2 or (rts == 1 and info.reason == "Not responding"):
                    info.base_state = "IDLE"
                    info.reason = "" if not problems else info.reason
            elif info.base_state in ("UNKNOWN", ""):
                info.base_state = "IDLE"
            effects = self._reconcile_after_register(req, previous_boot, now)
            self._save_node(node)
        for effect in effects:
            effect()
        self.wake.set()
        return controller_pb2.RegisterNodeResponse(accepted=True, ctld_start_time=self.started)

    def _reconcile_after_register(
        self, req: controller_pb2.RegisterNodeRequest, previous_boot: int, now: int
    ) -> list[Callable[[], None]]:
        """Square what a (re-)registering node runs with what the controller believes.

        A node that rebooted lost its jobs (NODE_FAIL or requeued, as Slurm's "node unexpectedly
        rebooted"); a job the node still runs that the controller does not have running there (ended,
        requeued or moved while the node was unreachable) is terminated there. Jobs that merely
        finished while nobody listened are left alone: their supervisors' reports are still on the way. A batch job a previous controller
        started on this node that the node neither runs nor has finished never got there (that
        controller stopped between the start and the launch): it is requeued, or ends NODE_FAIL with
        --no-requeue, as Slurm's "batch job missing from batch node".
        """
        effects: list[Callable[[], None]] = []
        rebooted = previous_boot and req.hardware.boot_time and abs(req.hardware.boot_time - previous_boot) > 60
        for job in self.jobs.values():
            on_node = any(a.node == req.name for a in job.allocation)
            if rebooted and on_node and job.state in ACTIVE_STATES:
                log.warning("node %s rebooted: job %d lost (NODE_FAIL)", req.name, job.job_id)
                self._end_by_node_failure(job, now)
                self._save(job)
        effects.extend(self._terminate_orphans(req.name, req.running_jobs))
        if req.reports_finished:
            effects.extend(self._requeue_missing(req, now))
        return effects

    def _requeue_missing(self, req: controller_pb2.RegisterNodeRequest, now: int) -> list[Callable[[], None]]:
        """Recovered batch jobs of this node that it never got (see _reconcile_after_register)."""
        effects: list[Callable[[], None]] = []
        known = set(req.running_jobs) | set(req.finished_jobs)
        for job_id in sorted(self._unconfirmed):
            job = self.jobs.get(job_id)
            if job is None or job.state != RUNNING:
                self._unconfirmed.discard(job_id)
                continue
            if job.batch_host != req.name:
                continue
            self._unconfirmed.discard(job_id)
            if job_id in known:
                continue
            log.warning("batch job %d missing from its node %s: %s", job_id, req.name,
                        "requeued" if job.requeue else "NODE_FAIL")
            for a in job.allocation:
                other = self.nodes.get(a.node)
                if a.node != req.name and other is not None and other.available:
                    effects.append(partial(self.actions.terminate, other.info, job_id, 0, "missing"))
            if job.requeue:
                self._requeue(job, now, jobs_pb2.NODE_FAIL, now, ran=False)
            else:
                self._finish(job, jobs_pb2.NODE_FAIL, 0, 0, now)
            self._save(job)
        return effects

    def _terminate_orphans(self, name: str, running: Iterable[int]) -> list[Callable[[], None]]:
        """TerminateJob for what node `name` says it runs of jobs the controller does not have running
        there (ended, requeued, or running elsewhere now: while the node was unreachable)."""
        node = self.nodes[name]
        effects: list[Callable[[], None]] = []
        for job_id in running:
            known = self.jobs.get(job_id)
            if known is not None and known.state in ACTIVE_STATES and any(a.node == name for a in known.allocation):
                continue
            log.info("node %s still runs job %d, which has ended there: terminating it", name, job_id)
            effects.append(partial(self.actions.terminate, node.info, job_id, self.cfg.kill_wait, "orphan"))
        return effects

    def node_contact(self, name: str, ok: bool, running: Iterable[int] | None = None) -> None:
        """Result of a ping: refresh contact time, or notice the node stopped answering.

        What a node says it runs of jobs the controller has ended there is terminated. A DOWN node
        that answers again returns to service as ReturnToService says (1: DOWN for not responding,
        2: DOWN for any reason, once it had stopped responding), as a registration would, once it
        runs nothing of ended jobs (their CPUs are not free before)."""
        effects: list[Callable[[], None]] = []
        with self.lock:
            node = self.nodes.get(name)
            if node is None:
                return
            if ok:
                node.last_contact = self.clock()
                info = node.info
                if running is not None and node.registered:
                    effects = self._terminate_orphans(name, running)
                rts = self.cfg.return_to_service
                returns = (rts == 2 and info.not_responding) or (rts == 1 and info.reason == "Not responding")
                if info.base_state == "DOWN" and node.registered and running is not None and not effects and returns:
                    log.info("node %s responds again: returned to service", name)
                    info.base_state = "IDLE"
                    info.reason = ""
                    info.reason_uid = 0
                    info.reason_time = 0
                    info.not_responding = False
                    self._save_node(node)
                    self.wake.set()
                if info.not_responding and node.registered and not (info.base_state == "DOWN" and effects):
                    info.not_responding = False
                    self.wake.set()
            elif node.registered:
                node.info.not_responding = True
        for effect in effects:
            effect()

    # ------------------------------------------------------------------ housekeeping
    def housekeeping(self) -> None:
        """Time limits, --signal warnings, unresponsive nodes, and forgetting old finished jobs."""
        now = self._now()
        effects: list[Callable[[], None]] = []
        with self.lock:
            changed: list[jobs_pb2.JobInfo] = []
            for job in self.jobs.values():
                if job.state != RUNNING:
                    continue
                if job.final_state:  # preempted: RUNNING through its grace time, then COMPLETING
                    if now >= job.end_time:
                        job.state = COMPLETING
                        changed.append(job)
                    continue
                if job.time_limit_min >= 0 and now >= job.start_time + job.time_limit_min * 60:
                    effects.extend(jobsteps.terminate_elsewhere(self, job, "timeout"))
                    changed.append(job)
                    if not job.batch_flag:
                        self._finish(job, jobs_pb2.TIMEOUT, 0, 0, now)
                        continue
                    job.state = COMPLETING
                    job.final_state = jobs_pb2.TIMEOUT
                    target = self.nodes[job.batch_host].info
                    effects.append(partial(self.actions.terminate, target, job.job_id, self.cfg.kill_wait, "timeout"))
                elif (
                    job.spec.signal_num
                    and not job.warn_signal_sent
                    and job.time_limit_min >= 0
                    and now >= job.start_time + job.time_limit_min * 60 - job.spec.signal_secs
                ):
                    job.warn_signal_sent = True
                    effects.extend(
                        self._signal_effects(job, job.spec.signal_num, job.spec.signal_batch_only, False)
                    )
                    changed.append(job)
            resv.expire(self, now)
            timeout = self.cfg.slurmd_timeout
            wall = self.clock()
            for node in self.nodes.values():
                info = node.info
                if not node.registered or info.base_state == "DOWN" or timeout <= 0:
                    continue
                if wall - node.last_contact > timeout:
                    log.warning("node %s not responding for %ds: DOWN", info.name, timeout)
                    info.base_state = "DOWN"
                    info.not_responding = True
                    info.reason = "Not responding"
                    info.reason_time = now
                    info.reason_uid = 0
                    info.reason_user = "slurm"
                    self._save_node(node)
                    effects.extend(self._fail_jobs_on(info.name, now))
            expired = [
                j.job_id
                for j in self.jobs.values()
                if j.state in FINISHED_STATES and now - j.end_time >= self.cfg.min_job_age
            ]
            if changed:
                self._save(*changed)
            if expired:
                with self.store.transaction() as tx:
                    for job_id in expired:
                        tx.delete_job(job_id)
                for job_id in expired:
                    del self.jobs[job_id]
        for effect in effects:
            effect()

    def nodes_to_ping(self) -> list[cluster_pb2.NodeInfo]:
        with self.lock:
            return [n.info for n in self.nodes.values() if n.info.base_state != "FUTURE"]


JOB_PENDING_MSG = "Job is pending execution"


def _job_id_str(job: jobs_pb2.JobInfo) -> str:
    if job.array_job_id and job.array_task_id >= 0:
        return f"{job.array_job_id}_{job.array_task_id}"
    return str(job.job_id)


def _status(job: jobs_pb2.JobInfo) -> m.JobStatus:
    state = job.state
    if state == PENDING:
        phase = m.Phase.PENDING
    elif state in ACTIVE_STATES:
        phase = m.Phase.ACTIVE
    elif state == jobs_pb2.COMPLETED:
        phase = m.Phase.COMPLETED
    elif state == jobs_pb2.CANCELLED:
        phase = m.Phase.CANCELLED
    else:
        phase = m.Phase.FAILED
    return m.JobStatus(
        job_id=job.job_id,
        user_id=job.user_id,
        name=job.spec.name,
        phase=phase,
        array_job_id=job.array_job_id,
        array_task_id=job.array_task_id,
        end_time=job.end_time,
    )


def _group_members(always: set[int], group: str) -> set[int]:
    """Uids of a group's users (listed members and those whose primary group it is), plus `always`
    (root and SlurmUser pass every AllowGroups, as in Slurm). An unknown group has no members."""
    uids = set(always)
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        return uids
    uids.update(_uid_of(name) for name in entry.gr_mem)
    uids.update(p.pw_uid for p in pwd.getpwall() if p.pw_gid == entry.gr_gid)
    return uids


def _uid_of(user: str) -> int:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return 0


_USER_CACHE: dict[int, str] = {}
_GROUP_CACHE: dict[int, str] = {}


def _count(text: str, message: str) -> int:
    """An `scontrol update` count: ASCII digits within 32 bits, else SlurmError(message)."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 10 or int(value) > 2**31 - 1:
        raise SlurmError(message)
    return int(value)


def _user_name(uid: int) -> str:
    name = _USER_CACHE.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        _USER_CACHE[uid] = name
    return name


def _group_name(gid: int) -> str:
    name = _GROUP_CACHE.get(gid)
    if name is None:
        try:
            name = grp.getgrgid(gid).gr_name
        except KeyError:
            name = str(gid)
        _GROUP_CACHE[gid] = name
    return name
