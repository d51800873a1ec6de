"""ctld's side of accounting: the agent queue to shoal-dbd and the association/QOS cache.

Records (jobs, steps, node events) are appended to the state store's queue inside the same
transaction as the state change that caused them, so a kill -9 loses none; a background thread
sends them in sequence order in batches and drops them once dbd has stored them. dbd skips any
sequence number it already applied, so each record is stored exactly once, and ctld keeps
scheduling while dbd is away. dbd pushes association/QOS changes; the same thread polls dbd's
association version as a safety net (REFRESH_EVERY_S) and reloads the cache (kept in the store too, so
a restart while dbd is down still enforces limits).

Public entry points for the rest of ctld: `record_jobs`, `record_step`, `record_node` (inside a
store transaction), `admit` (submit-time checks), `attach`/`assoc_id`/`limits` (scheduler snapshot).
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ctld import record
from ctld.errors import SlurmError
from ctld.fairshare_usage import share_tree
from ctld.priority_inputs import priority_inputs
from ctld.sched import model as m
from ctld.sched.assoc_limits import submit_refusal
from ctld.sched.fairshare import ShareAssoc
from ctld.store import StateStore
from shoal.conf import SlurmConfig
from shoal.states import FINISHED_STATES, JOB_STATE_NAMES
from shoal.v1 import accounting_pb2 as pb
from shoal.v1 import cluster_pb2, jobs_pb2

if TYPE_CHECKING:
    from shoal.rpc.client import Stub

log = logging.getLogger("shoal.ctld.accounting")

SLURMDBD = "accounting_storage/slurmdbd"
INVALID_ACCOUNT = "Invalid account or account/partition combination specified"
INVALID_QOS = "Invalid qos specification"
OPERATOR = "Operator"
ADMINISTRATOR = "Administrator"
NO_ADMIN_LEVEL = "None"
ADMIN_LEVELS = (OPERATOR, ADMINISTRATOR)
BATCH_STEP = -4
EXTERN_STEP = -5  # PrologFlags=Contain's `JOBID.extern`
BATCH_SIZE = 500
# dbd pushes every association/QOS change to ctld before sacctmgr returns (Controller.PushLimits, to the
# address ctld names in its GetLimits calls), so the poll is only a safety net: a push lost while ctld was
# down or busy. It also runs at start, whenever dbd was unreachable, and once the connection to dbd was
# lost (dbd restarted: it learns where to push from the next poll). Each poll costs dbd ~0.6 ms of CPU.
REFRESH_EVERY_S = 30.0
LINGER_S = 0.05  # records of a burst (a stream of submissions) travel together: fewer dbd transactions
# While records keep coming (a stream of jobs), at most one batch per SEND_INTERVAL_S: each SendRecords
# costs dbd ~1 ms of CPU (gRPC and the transaction) whatever its size, and a job makes 4-6 records at
# three moments (submit, start, end), so sending on every wake cost dbd about one call per job. A record
# after a quiet spell still leaves after LINGER_S; a backlog (full batches) drains without pause.
SEND_INTERVAL_S = 0.25
SEND = "/shoal.v1.Accounting/SendRecords"
GET_LIMITS = "/shoal.v1.Accounting/GetLimits"
GET_USAGE = "/shoal.v1.Accounting/GetUsage"


# Ended by the controller (the script was signalled): the job's own exit code is 0:0, its .batch CANCELLED.
_SIGNALLED = frozenset({jobs_pb2.CANCELLED, jobs_pb2.TIMEOUT, jobs_pb2.PREEMPTED, jobs_pb2.REQUEUED})
# A run is over: finished jobs, and the earlier run of a requeued job (recorded as REQUEUED).
_RUN_ENDED = FINISHED_STATES | {jobs_pb2.REQUEUED}
# The script runs (or its job is being cleaned up): the `.batch` step is RUNNING in accounting.
_RUNNING = frozenset({jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING})


def job_record(job: record.JobRecord) -> pb.JobRecord:
    """What accounting keeps of a job, with the states and exit codes sacct prints."""
    state = jobs_pb2.RUNNING if job.state == jobs_pb2.COMPLETING else job.state
    exit_code, exit_signal = job.exit_code, job.exit_signal
    if state in _SIGNALLED:
        exit_code, exit_signal = 0, 0  # the job's own code; its .batch step shows the signal
    started = job.start_time > 0 and bool(job.nodes)
    return pb.JobRecord(
        job_id=job.job_id,
        array_job_id=job.array_job_id,
        array_task_id=job.array_task_id,
        name=job.spec.name,
        uid=job.user_id,
        gid=job.group_id,
        user=job.user_name,
        account=job.account,
        partition=job.partition,
        qos=job.qos,
        tres_req=job.tres_req,
        tres_alloc=job.tres_alloc if started else "",
        nodelist=job.nodes if started else "",
        alloc_cpus=job.num_cpus if started else 0,
        alloc_nodes=job.num_nodes if started else 0,
        req_cpus=job.num_cpus,
        req_nodes=job.num_nodes,
        req_mem_mb=job.mem_mb,
        submit_time=job.submit_time,
        eligible_time=job.eligible_time,
        start_time=job.start_time if started else 0,
        end_time=job.end_time if state in _RUN_ENDED else 0,
        time_limit_min=job.time_limit_min,
        state=JOB_STATE_NAMES.get(state, "PENDING"),
        exit_code=exit_code,
        exit_signal=exit_signal,
        derived_exit_code=job.derived_exit_code,
        derived_exit_signal=job.derived_exit_signal,
        work_dir=job.spec.work_dir,
        reason=job.state_reason,
        cancelled_by=job.cancelled_by_uid if job.cancelled_by else -1,
        priority=job.priority,
        suspended_secs=job.suspended_secs,
        suspend_time=job.suspend_time if job.state == jobs_pb2.SUSPENDED else 0,
    )


def batch_step_record(job: record.JobRecord) -> pb.StepRecord:
    """The `.batch` step of a batch job: RUNNING from the job's start (22.05's sacct lists it while the
    script runs; SUSPENDED while its job is), then how it ended: a cancelled or timed-out job's script
    was signalled."""
    state, code, sig = JOB_STATE_NAMES.get(job.state, "FAILED"), job.exit_code, job.exit_signal
    running = job.state in _RUNNING
    if running:  # SUSPENDED with its job (22.05's, measured), else RUNNING
        state, code, sig = "SUSPENDED" if job.state == jobs_pb2.SUSPENDED else "RUNNING", 0, 0
    elif job.state in _SIGNALLED:
        state, code, sig = "CANCELLED", 0, sig or 15
    elif job.state == jobs_pb2.FAILED and sig and not code:
        state = "CANCELLED"  # killed by a signal: the script was cancelled, the job failed
    first = job.allocation[0] if job.allocation else None
    cpus = len(first.cpu_ids) if first is not None else job.num_cpus
    return pb.StepRecord(
        job_id=job.job_id,
        step_id=BATCH_STEP,
        name="batch",
        nodelist=job.batch_host,
        num_tasks=1,
        num_cpus=cpus,
        num_nodes=1,
        start_time=job.start_time,
        end_time=0 if running else job.end_time,
        state=state,
        exit_code=code,
        exit_signal=sig,
        submit_time=job.submit_time,
        tres_alloc=f"cpu={cpus},mem={first.mem_mb if first else 0}M,node=1",
        max_rss_kb=job.batch_usage.max_rss_kb,
        cpu_time_s=_seconds(job.batch_usage.cpu_time_us),
        gpu_util_avg=job.batch_usage.gpu_util_avg,
        gpu_util_max=job.batch_usage.gpu_util_max,
        gpu_mem_max_mb=job.batch_usage.gpu_mem_max_mb,
    )


def extern_step_record(job: record.JobRecord) -> pb.StepRecord:
    """The `.extern` step of a job under PrologFlags=Contain: one task on each of the job's nodes, its
    whole allocation, from the job's start to its end; COMPLETED 0:0 however the job ended (22.05's,
    a cancelled job's too: nothing of the user's ran in it)."""
    ended = job.state in _RUN_ENDED
    return pb.StepRecord(
        job_id=job.job_id,
        step_id=EXTERN_STEP,
        name="extern",
        nodelist=job.nodes,
        num_tasks=job.num_nodes,
        num_cpus=job.num_cpus,
        num_nodes=job.num_nodes,
        start_time=job.start_time,
        end_time=job.end_time if ended else 0,
        state="COMPLETED" if ended else "RUNNING",
        submit_time=job.submit_time,
        tres_alloc=job.tres_alloc,
    )


def step_record(job: record.JobRecord, step: jobs_pb2.JobStep) -> pb.StepRecord:
    """An srun step (`N.0`, ...) as sacct shows it: RUNNING while it runs, then how it ended."""
    state = JOB_STATE_NAMES.get(step.state, "RUNNING")
    tres = f"cpu={step.num_cpus},node={step.num_nodes}"
    if step.num_gpus:
        tres += f",gres/gpu={step.num_gpus}"
    return pb.StepRecord(
        job_id=step.job_id,
        step_id=step.step_id,
        name=step.name,
        nodelist=step.nodes,
        num_tasks=step.num_tasks,
        num_cpus=step.num_cpus,
        num_nodes=step.num_nodes,
        start_time=step.start_time,
        end_time=step.end_time,
        state=state,
        exit_code=step.exit_code,
        exit_signal=step.exit_signal,
        submit_time=job.submit_time,
        tres_alloc=tres,
        max_rss_kb=step.usage.max_rss_kb,
        cpu_time_s=_seconds(step.usage.cpu_time_us),
    )


def _seconds(microseconds: int) -> int:
    """CPU time in whole seconds, rounded (StepRecord keeps seconds)."""
    return (microseconds + 500_000) // 1_000_000


def _node_state(info: cluster_pb2.NodeInfo) -> tuple[str, str]:
    """("DOWN"/"DRAIN"/"", reason): the node states accounting records as events."""
    if info.base_state == "DOWN" or info.not_responding:
        return "DOWN", info.reason
    if info.drain:
        return "DRAIN", info.reason
    return "", ""


class Accounting:
    """The dbd agent queue and the association/QOS cache of one controller."""

    def __init__(self, cfg: SlurmConfig, store: StateStore, key: bytes) -> None:
        self.enabled = cfg.accounting_storage_type == SLURMDBD
        self.configure(cfg)
        self.cluster = cfg.cluster_name
        self._control_host = cfg.control_addr
        self._store = store
        self._key = key
        self._target = f"{cfg.accounting_storage_host or cfg.control_addr}:{cfg.accounting_storage_port}"
        self._control_target = f"{cfg.control_addr}:{cfg.slurmctld_port}"  # where dbd pushes changes
        # what was last queued for each job in memory (an unchanged save queues nothing); `forget` drops a
        # job's entries when it leaves memory, so these hold as many jobs as the controller does
        self._sent: dict[int, bytes] = {}  # job id -> last job record
        self._sent_steps: dict[int, dict[int, bytes]] = {}  # job id -> step id -> last step record
        self._nodes: dict[str, tuple[str, str]] = {}
        self.wake = threading.Event()
        self._cache_lock = threading.Lock()
        self._take_lock = threading.Lock()  # the poller and dbd's pushes load the cache one at a time
        self._cache = pb.GetLimitsResponse()
        self._limits: m.AccountingLimits | None = None
        self._qos_preempt: tuple[m.QosPreempt, ...] = ()
        self._assoc_index: dict[tuple[str, str, str], int] = {}
        self._default_account: dict[str, str] = {}
        self._admin_levels: dict[str, str] = {}  # user -> Operator | Administrator (others: None)
        self._coords: dict[str, frozenset[str]] = {}  # user -> accounts coordinated, sub-accounts too
        self._usage_wanted: pb.GetUsageRequest | None = None  # see request_usage
        self._usage_found: list[pb.AssocUsage] | None = None
        self._epoch = store.get_meta("acct_epoch") or ""
        if self.enabled:
            if not self._epoch:
                self._epoch = uuid.uuid4().hex
                with store.transaction() as tx:
                    tx.set_meta("acct_epoch", self._epoch)
            saved = store.get_meta("acct_limits")
            if saved:
                self._load_cache(pb.GetLimitsResponse.FromString(base64.b64decode(saved)))

    # ------------------------------------------------------------------ records (inside a transaction)
    def configure(self, cfg: SlurmConfig) -> None:
        """AccountingStorageEnforce and the cluster's size (at start and on reconfigure; the storage
        type, host and port need a restart, ctld/reconfigure.py refuses a change of them)."""
        enforce = {w.lower() for w in cfg.accounting_storage_enforce}
        self.enforce_assoc = self.enabled and bool(enforce & {"associations", "limits", "qos", "safe"})
        self.enforce_limits = self.enabled and bool(enforce & {"limits", "qos", "safe"})
        self.enforce_qos = self.enabled and bool(enforce & {"qos", "safe"})
        self.safe = self.enabled and "safe" in enforce
        self._cluster_cpus = sum(n.cpus for n in cfg.nodes)
        self._cluster_gpus = sum(n.gres_count("gpu") for n in cfg.nodes)
        self._node_gpus = {n.name: n.gres_count("gpu") for n in cfg.nodes}

    def record_jobs(self, tx: StateStore, jobs: Iterable[record.JobRecord]) -> None:
        """Queue a record for each job whose accounting view changed (and `.batch` when it ends).

        What was queued is remembered only once `tx` commits: were the commit to fail, the same save
        made again must queue the record again, not be taken for one already sent."""
        if not self.enabled:
            return
        sent: dict[int, bytes] = {}  # this transaction's records, over self._sent once it commits
        steps: dict[int, dict[int, bytes]] = {}
        queue: list[bytes] = []  # in order, queued in one statement (an array's tasks: one each)
        for job in jobs:
            rec = job_record(job)
            data = rec.SerializeToString(deterministic=True)
            was = sent.get(job.job_id, self._sent.get(job.job_id))
            if was != data:
                sent[job.job_id] = data
                queue.append(pb.AcctRecord(job=rec).SerializeToString())
                ended = job.state in _RUN_ENDED and job.batch_flag and rec.start_time
                if ended and (was is None or pb.JobRecord.FromString(was).state != rec.state):
                    queue.append(pb.AcctRecord(step=batch_step_record(job)).SerializeToString())
            self._record_steps(queue, job, steps)
        tx.enqueue_records(queue)
        tx.after_commit(lambda: self._remember(sent, steps))

    def _remember(self, sent: dict[int, bytes], steps: dict[int, dict[int, bytes]]) -> None:
        self._sent.update(sent)
        for job_id, records in steps.items():
            self._sent_steps.setdefault(job_id, {}).update(records)
        self.wake.set()  # committed: the sender finds the records

    def _record_steps(
        self, queue: list[bytes], job: record.JobRecord, pending: dict[int, dict[int, bytes]]
    ) -> None:
        """Queue a record for each srun step that started or ended since the last save (after its
        job's record: dbd files a step under a job it already has; a step stored twice is updated), the
        `.extern` step of a job that has one, and the `.batch` step of a running batch job (record_jobs
        sends its last record when the job ends). `pending`: what this transaction queued so far."""
        records = [step_record(job, step) for step in job.steps]
        if job.extern_step and job.start_time and job.nodes:
            records.insert(0, extern_step_record(job))
        if (
            job.batch_flag
            and job.batch_host
            and job.start_time
            and not job.prolog_pending
            and job.state in _RUNNING
        ):
            records.insert(0, batch_step_record(job))
        if not records:
            return
        sent = self._sent_steps.get(job.job_id, {})
        queued = pending.get(job.job_id, {})
        for rec in records:
            data = rec.SerializeToString(deterministic=True)
            if queued.get(rec.step_id, sent.get(rec.step_id)) != data:
                queued[rec.step_id] = data
                queue.append(pb.AcctRecord(step=rec).SerializeToString())
        if queued:
            pending[job.job_id] = queued

    def forget(self, job_ids: Iterable[int]) -> None:
        """Jobs that left memory (MinJobAge, ctld/job_lifecycle.py): drop their last records. A job's
        records are in the store's queue by then; should it come back, its first save is queued again."""
        for job_id in job_ids:
            self._sent.pop(job_id, None)
            self._sent_steps.pop(job_id, None)

    def remembered(self) -> tuple[int, int]:
        """(jobs, steps) whose last record is kept: as many as are in memory, not every job ever run."""
        return len(self._sent), sum(len(steps) for steps in self._sent_steps.values())

    def record_step(self, tx: StateStore, step: pb.StepRecord) -> None:
        """Queue a step record (srun steps, .extern); call inside the transaction that saves the change."""
        if self.enabled:
            tx.enqueue_record(pb.AcctRecord(step=step).SerializeToString())
            tx.after_commit(self.wake.set)

    def record_node(self, tx: StateStore, info: cluster_pb2.NodeInfo, now: int) -> None:
        """Queue a node event when a node goes down/drained or comes back."""
        if not self.enabled:
            return
        state = _node_state(info)
        previous = self._nodes.get(info.name, ("", ""))
        if state == previous:
            return
        event = pb.NodeEventRecord(
            node=info.name,
            state=state[0],
            reason=state[1],
            reason_uid=info.reason_uid,
            start_time=info.reason_time or now,
            cpus=info.cpus,
            gpus=self._node_gpus.get(info.name, 0),
        )
        if not state[0]:
            event.start_time = now
        tx.enqueue_record(pb.AcctRecord(node_event=event).SerializeToString())
        tx.after_commit(lambda: self._node_recorded(info.name, state))

    def _node_recorded(self, node: str, state: tuple[str, str]) -> None:
        self._nodes[node] = state  # committed only: a failed commit leaves the event to queue again
        self.wake.set()

    # ------------------------------------------------------------------ enforcement
    def admit(self, job: record.JobRecord, count: int, queued: Mapping[record.CountKey, int]) -> None:
        """Submit-time checks: pick the account, refuse users without an association or over MaxSubmit.

        `queued`: pending and running jobs by (account, user_name, partition, qos, user_id), as
        ctld/job_table.py keeps them."""
        if not self.enabled:
            return
        self.fill_account(job)
        with self._cache_lock:
            if not self.enforce_assoc:
                return
            assoc_id = self._find(job.account, job.user_name, job.partition)
            if not assoc_id:
                raise SlurmError(INVALID_ACCOUNT)
            assoc = next(a for a in self._cache.associations if a.id == assoc_id)
            if self.enforce_qos and job.spec.qos and assoc.qos and job.spec.qos not in assoc.qos:
                raise SlurmError(INVALID_QOS)
            if not job.spec.qos and assoc.default_qos:
                job.qos = assoc.default_qos
            if not self.enforce_limits or self._limits is None:
                return
            by_assoc: Counter[tuple[int, str, int]] = Counter()
            for (account, user, partition, qos, uid), n in queued.items():
                by_assoc[(self._find(account, user, partition), qos, uid)] += n
            why = submit_refusal(self._limits, assoc_id, job.qos, job.user_id, count, by_assoc)
        if why:
            raise SlurmError(why)

    def fill_account(self, job: record.JobRecord) -> None:
        """A job without -A gets its user's default account (when accounting knows one)."""
        if job.account or not self.enabled:
            return
        with self._cache_lock:
            job.account = self._default_account.get(job.user_name, "")

    def _find(self, account: str, user: str, partition: str) -> int:
        for part in (partition, ""):
            found = self._assoc_index.get((account, user, part))
            if found:
                return found
        return 0

    def assoc_id(self, job: record.JobRecord) -> int:
        with self._cache_lock:
            return self._find(job.account, job.user_name, job.partition) if self.enabled else 0

    def attach(self, req: m.JobRequest, job: record.JobRecord | None) -> m.JobRequest:
        """The scheduler's view of a pending job, with its association and QOS.

        Kept on the record from cycle to cycle while the view and those two stay the same (a reload of
        the association cache that moves the job to another association makes a new one), so the
        core's answers remembered per request (ctld/sched/memo.py) hold across cycles."""
        if job is None or not self.enabled:  # fair-share needs the association even without enforcement
            return req
        assoc_id = self.assoc_id(job)
        kept = job.attached_request
        if kept is not None and kept[0] is req and kept[1].assoc_id == assoc_id and kept[1].qos == job.qos:
            return kept[1]
        attached = replace(req, assoc_id=assoc_id, qos=job.qos)
        job.attached_request = (req, attached)
        return attached

    def priority_inputs(self) -> m.PriorityInputs:
        """QOS and association priorities for priority/multifactor (see priority_inputs.py)."""
        with self._cache_lock:
            return priority_inputs(self._cache)

    def grp_tres_mins(self) -> dict[int, str]:
        """Each association's GrpTRESMins as sacctmgr set it (sshare -l), by association id."""
        with self._cache_lock:
            return {int(a.id): a.grp_tres_mins for a in self._cache.associations if a.grp_tres_mins}

    def share_tree(self) -> list[ShareAssoc]:
        """The association tree with its shares, for fair-share (see fairshare_usage.py)."""
        with self._cache_lock:
            return share_tree(self._cache)

    def usage_targets(
        self, kind: str, users: Sequence[str], accounts: Sequence[str], qos: Sequence[str], cluster: str
    ) -> tuple[set[int], set[str]]:
        """The associations (an account's with every one under it) and QOS whose usage `sacctmgr ... set
        RawUsage=0` clears; SlurmError with 22.05's words for one that does not exist."""
        with self._cache_lock:
            assocs = list(self._cache.associations)
            known_qos = {q.name for q in self._cache.qos}
        if kind == "qos":
            for name in qos:
                if name not in known_qos:
                    raise SlurmError(f"Failed to find QOS {name}")
            return set(), set(qos)
        ids: set[int] = set()
        for account in accounts:
            if kind == "account" or not users:
                found = [a for a in assocs if a.account == account and not a.user and not a.partition]
                if not found or kind != "account":  # `modify user account=A` without a user: 22.05 refuses
                    raise SlurmError(
                        f"Failed to find cluster {cluster} account {account} association in database"
                    )
                ids |= _subtree(assocs, account)
                continue
            for user in users:
                found = [a for a in assocs if a.account == account and a.user == user]
                if not found:
                    raise SlurmError(
                        f"Failed to find cluster {cluster} account {account} user {user} association in database"
                    )
                ids |= {a.id for a in found}
        return ids, set()

    def usage_factors(self) -> dict[str, float]:
        """QOS name -> UsageFactor (usage is charged times it; Slurm's default 1)."""
        with self._cache_lock:
            return {q.name: q.usage_factor for q in self._cache.qos if q.usage_factor >= 0}

    def qos_preempt(self) -> tuple[m.QosPreempt, ...]:
        """Each QOS's Preempt list, PreemptMode and GraceTime, for preempt/qos."""
        with self._cache_lock:
            return self._qos_preempt

    def admin_level(self, user: str) -> str:
        """sacctmgr's AdminLevel of `user` as dbd last pushed it: Operator, Administrator or None."""
        with self._cache_lock:
            return self._admin_levels.get(user, NO_ADMIN_LEVEL)

    def coordinated(self, user: str) -> frozenset[str]:
        """The accounts `user` coordinates (sacctmgr add coordinator), their sub-accounts included."""
        with self._cache_lock:
            return self._coords.get(user, frozenset())

    def accounts_of(self, user: str) -> set[str]:
        """The accounts `user` has an association in."""
        with self._cache_lock:
            return {account for account, name, _ in self._assoc_index if name == user}

    def limits(self) -> m.AccountingLimits | None:
        with self._cache_lock:
            return self._limits if self.enforce_limits else None

    # ------------------------------------------------------------------ the cache
    def _load_cache(self, resp: pb.GetLimitsResponse) -> None:
        by_key = {(a.account, a.user, a.partition): a.id for a in resp.associations}
        account_ids = {a.account: a.id for a in resp.associations if not a.user and not a.partition}
        assocs = tuple(
            m.AssocLimits(
                id=a.id,
                parent_id=account_ids.get(a.parent if not a.user else a.account, 0) if a.parent else 0,
                account=a.account,
                user=a.user,
                grp_jobs=a.grp_jobs,
                grp_submit_jobs=a.grp_submit_jobs,
                max_jobs=a.max_jobs,
                max_submit_jobs=a.max_submit_jobs,
                grp_cpus=_tres(a.grp_tres, "cpu"),
                grp_gpus=_tres(a.grp_tres, "gres/gpu"),
                max_cpus_per_job=_tres(a.max_tres_per_job, "cpu"),
                max_gpus_per_job=_tres(a.max_tres_per_job, "gres/gpu"),
                max_wall_min=a.max_wall_min,
                max_borrow_cpus=_tres(a.max_borrow_tres, "cpu"),
                max_borrow_gpus=_tres(a.max_borrow_tres, "gres/gpu"),
                usage=_usage_limits(a),
            )
            for a in resp.associations
        )
        qos = tuple(
            m.QosLimits(
                name=q.name,
                max_wall_min=q.max_wall_min,
                max_jobs_per_user=q.max_jobs_per_user,
                max_submit_per_user=q.max_submit_per_user,
                max_cpus_per_job=_tres(q.max_tres_per_job, "cpu"),
                max_gpus_per_job=_tres(q.max_tres_per_job, "gres/gpu"),
                grp_jobs=q.grp_jobs,
                grp_cpus=_tres(q.grp_tres, "cpu"),
                grp_gpus=_tres(q.grp_tres, "gres/gpu"),
                max_cpus_per_user=_tres(q.max_tres_per_user, "cpu"),
                max_gpus_per_user=_tres(q.max_tres_per_user, "gres/gpu"),
                usage=_usage_limits(q),
            )
            for q in resp.qos
        )
        qos_preempt = tuple(_qos_preempt(q) for q in resp.qos)
        with self._cache_lock:
            self._cache = resp
            self._qos_preempt = qos_preempt
            self._assoc_index = by_key
            self._default_account = {u.name: u.default_account for u in resp.users}
            self._admin_levels = {u.name: u.admin_level for u in resp.users if u.admin_level in ADMIN_LEVELS}
            self._coords = {u.name: frozenset(u.coord_accounts) for u in resp.users if u.coord_accounts}
            self._limits = m.AccountingLimits(
                assocs=assocs, qos=qos, enforce_qos=self.enforce_qos, safe=self.safe
            )

    # ------------------------------------------------------------------ the sender
    def run(self, stop: threading.Event) -> None:
        """Refresh the cache, fetch the usage asked for (request_usage) and send queued records until `stop`
        is set (a daemon thread)."""
        if not self.enabled:
            return
        from shoal.rpc.client import Stub

        stub = Stub(self._target, self._key)
        down = False
        refreshed = last_sent = float("-inf")
        while not stop.is_set():
            try:
                # the association/QOS cache: every REFRESH_EVERY_S, and at once after dbd was away
                # (the connection to dbd dropped: poll at once, see REFRESH_EVERY_S)
                lost = stub.disconnected()
                if down or lost or time.monotonic() - refreshed >= REFRESH_EVERY_S:
                    self._refresh(stub)
                    refreshed = time.monotonic()
                self._fetch_usage(stub)  # before any record: dbd's answer holds only jobs ended before
                sent = self._send_batch(stub)
                if sent:
                    last_sent = time.monotonic()
                if down:
                    log.info("accounting storage at %s is back", self._target)
                down = False
                if sent < BATCH_SIZE:  # drained: wait for more, then let a burst gather into one batch
                    if self.wake.wait(1.0):
                        stop.wait(max(LINGER_S, last_sent + SEND_INTERVAL_S - time.monotonic()))
                    self.wake.clear()
            except Exception as exc:  # dbd away (grpc.RpcError) or a bug: keep the records, retry
                if not down:
                    detail = exc.details() if hasattr(exc, "details") else str(exc)
                    log.warning(
                        "accounting storage at %s unreachable, queueing records: %s", self._target, detail
                    )
                down = True
                stop.wait(2.0)
        stub.close()

    # ------------------------------------------------------------------ usage of finished jobs
    def request_usage(self, half_life_s: int, since: int, now: int) -> None:
        """Ask dbd (once, before any record is sent) for the decayed usage per association since the
        last reset: the controller's ledger starts from it when it has none of its own."""
        if self.enabled:
            self._usage_wanted = pb.GetUsageRequest(
                cluster=self.cluster, now=now, half_life_s=half_life_s, since=since
            )

    def _fetch_usage(self, stub: Stub) -> None:
        want = self._usage_wanted
        if want is None:
            return
        resp = stub.call(GET_USAGE, want, pb.GetUsageResponse, timeout=30.0)
        with self._cache_lock:
            self._usage_found = list(resp.usage)
            self._usage_wanted = None
        log.info("usage of %d associations loaded from accounting storage", len(resp.usage))

    def take_usage(self) -> dict[int, tuple[float, float]] | None:
        """dbd's answer to request_usage as (CPU-, GPU-seconds) per association id, once; None before it."""
        with self._cache_lock:
            found, self._usage_found = self._usage_found, None
            if found is None:
                return None
            out: dict[int, tuple[float, float]] = {}
            for row in found:
                assoc = self._find(row.account, row.user, "")
                if assoc:
                    cpu, gpu = out.get(assoc, (0.0, 0.0))
                    out[assoc] = (cpu + row.cpu_seconds, gpu + row.gpu_seconds)
            return out

    def _send_batch(self, stub: Stub) -> int:
        queued = self._store.queued_records(BATCH_SIZE)
        if not queued:
            return 0
        req = pb.SendRecordsRequest(
            cluster=self.cluster,
            epoch=self._epoch,
            cluster_cpus=self._cluster_cpus,
            cluster_gpus=self._cluster_gpus,
            control_host=self._control_host,
        )
        for seq, data in queued:
            rec = req.records.add()
            rec.ParseFromString(data)
            rec.seq = seq
        resp = stub.call(SEND, req, pb.SendRecordsResponse, timeout=30.0)
        self._store.drop_records_through(resp.applied_through)
        return len(queued)

    def _refresh(self, stub: Stub) -> None:
        request = pb.GetLimitsRequest(
            cluster=self.cluster, known_version=self._cache.version, control_addr=self._control_target
        )
        resp = stub.call(GET_LIMITS, request, pb.GetLimitsResponse, timeout=10.0)
        if resp.changed:
            self._take(resp)

    def push(self, resp: pb.GetLimitsResponse) -> int:
        """dbd's push after an association/QOS change: loaded before dbd's (and so sacctmgr's) RPC returns,
        so a job submitted right after the change sees it. Returns the version now held."""
        if self.enabled and resp.changed:
            self._take(resp)
        return int(self._cache.version)

    def _take(self, resp: pb.GetLimitsResponse) -> None:
        """Load a newer association/QOS set (a poll answered before a push must not undo the push)."""
        with self._take_lock:
            if self._cache.version and resp.version < self._cache.version:
                return
            self._load_cache(resp)
            with self._store.transaction() as tx:
                tx.set_meta("acct_limits", base64.b64encode(resp.SerializeToString()).decode())
        log.info(
            "association/QOS cache loaded (version %d, %d associations)", resp.version, len(resp.associations)
        )


def _usage_limits(row: pb.Association | pb.Qos) -> m.UsageLimits:
    """GrpTRESMins, GrpTRESRunMins, GrpWall and MaxTRESMinsPerJob of an association or QOS."""
    limits = m.UsageLimits(
        grp_cpu_mins=_tres(row.grp_tres_mins, "cpu"),
        grp_gpu_mins=_tres(row.grp_tres_mins, "gres/gpu"),
        grp_cpu_run_mins=_tres(row.grp_tres_run_mins, "cpu"),
        grp_gpu_run_mins=_tres(row.grp_tres_run_mins, "gres/gpu"),
        grp_wall_min=row.grp_wall_min,
        max_cpu_mins_per_job=_tres(row.max_tres_mins_per_job, "cpu"),
        max_gpu_mins_per_job=_tres(row.max_tres_mins_per_job, "gres/gpu"),
    )
    return m.NO_USAGE_LIMITS if limits == m.NO_USAGE_LIMITS else limits  # the shared "none" the core skips


def _tres(text: str, name: str) -> int:
    """The count of `name` in a TRES list ("cpu=8,gres/gpu=2"), -1 when absent."""
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key.strip().lower() == name and value.strip().isdigit():
            return int(value)
    return -1


def _qos_preempt(qos: pb.Qos) -> m.QosPreempt:
    """A QOS's preemption terms; PreemptMode "cluster" (or unset) defers to slurm.conf's PreemptMode."""
    mode = qos.preempt_mode.strip().upper()
    if mode in ("", "CLUSTER", "OFF"):  # as Slurm: a QOS's OFF means "the cluster's"
        mode = ""
    elif mode not in ("CANCEL", "REQUEUE", "SUSPEND"):
        log.warning(
            "QOS %s: PreemptMode=%s is not supported; its jobs are not preempted", qos.name, qos.preempt_mode
        )
        mode = "OFF"
    preempt = frozenset(name.strip() for name in qos.preempt.split(",") if name.strip())
    return m.QosPreempt(name=qos.name, preempt=preempt, mode=mode, grace_time_s=max(0, int(qos.grace_time)))


def _subtree(assocs: Sequence[pb.Association], account: str) -> set[int]:
    """Ids of an account's association and of every association below it (sub-accounts, users)."""
    below = {account}
    grew = True
    while grew:
        more = {a.account for a in assocs if not a.user and not a.partition and a.parent in below}
        grew = not more <= below
        below |= more
    return {a.id for a in assocs if a.account in below}
