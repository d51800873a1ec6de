"""The scheduler core's data: a read-only snapshot in, decisions out.

The controller builds a `Snapshot` from its state at the start of every cycle; the core never mutates it.
Tentative allocations live in an `Overlay` (see placement.py) that is committed or discarded whole.
Times are integer unix seconds passed in by the caller; the core never reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

UNLIMITED = -2  # minutes: no time limit (matches shoal.timefmt.UNLIMITED)


class Phase(Enum):
    """Where a job is, as far as scheduling cares."""

    PENDING = "PENDING"
    ACTIVE = "ACTIVE"  # RUNNING, SUSPENDED or COMPLETING: holds resources
    COMPLETED = "COMPLETED"  # finished with exit code 0
    FAILED = "FAILED"  # finished otherwise (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY ...)
    CANCELLED = "CANCELLED"


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU of a node and where it sits (topology fields default to "unknown")."""

    index: int  # minor number on its node
    type: str  # Slurm type name ("h100"); "" when untyped
    numa_node: int = -1
    link_group: int = -1  # NVLink clique / NVSwitch fabric: GPUs with one value talk over NVLink
    pcie_switch: int = -1  # GPUs with one value share a PCIe switch
    cpus: frozenset[int] = frozenset()  # CPU ids affine to this GPU


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """What is already taken on a node by running jobs."""

    cpu_ids: frozenset[int] = frozenset()
    mem_mb: int = 0
    gpu_indices: frozenset[int] = frozenset()
    exclusive: bool = False  # a job holds the whole node (--exclusive / OverSubscribe=EXCLUSIVE)
    jobs: int = 0
    users: frozenset[int] = frozenset()  # uids of the jobs on it (ExclusiveUser needs them)
    user_exclusive: bool = False  # a job of an ExclusiveUser partition is on it: its user's jobs only


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: int
    real_memory_mb: int
    gpus: tuple[Gpu, ...] = ()
    features: frozenset[str] = frozenset()
    weight: int = 1
    partitions: frozenset[str] = frozenset()
    available: bool = True  # up, responding, not drained: may take new work
    usage: NodeUsage = NodeUsage()
    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    state: str = "UP"  # UP, DOWN, DRAIN, INACTIVE
    max_time_min: int = UNLIMITED
    default_time_min: int = -1  # -1 = none: a job without --time gets max_time
    max_nodes: int = 0  # 0 = unlimited
    min_nodes: int = 1
    priority_tier: int = 1
    priority_job_factor: int = 1
    exclusive: bool = False  # OverSubscribe=EXCLUSIVE
    def_mem_per_cpu_mb: int = 0  # 0 = use the cluster default
    def_mem_per_gpu_mb: int = 0  # DefMemPerGPU; 0 = use the cluster default
    # who may use it (access.py); None = everyone. Names are lower case.
    allow_accounts: frozenset[str] | None = None
    deny_accounts: frozenset[str] = frozenset()
    allow_uids: frozenset[int] | None = None  # AllowGroups resolved to users (root and SlurmUser included)
    allow_qos: frozenset[str] | None = None
    deny_qos: frozenset[str] = frozenset()
    root_only: bool = False
    exclusive_user: bool = False  # ExclusiveUser=YES: its jobs' nodes are not shared with other users
    preempt_mode: str = ""  # PreemptMode= of the partition ("" = the cluster's; see preemption.py)
    grace_time_s: int = 0  # GraceTime= (preempt/partition_prio)
    total_cpus: int = 0  # the CPUs of its nodes as configured; 0 = not known (no PartitionConfig check)


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """GPUs asked for. Counts are 0 when not given; `type` "" = any type."""

    per_node: int = 0  # --gres=gpu:N / --gpus-per-node
    total: int = 0  # --gpus / -G (spread over the job's nodes)
    per_task: int = 0  # --gpus-per-task
    type: str = ""
    per_socket: int = 0  # --gpus-per-socket: this many on each socket the job uses on a node


@dataclass(frozen=True, slots=True)
class Dependency:
    """One term of --dependency: kind in after, afterany, afterok, afternotok, aftercorr, singleton."""

    kind: str
    job_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class DependencySpec:
    terms: tuple[Dependency, ...] = ()
    any_of: bool = False  # '?' separated: one satisfied term suffices


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A pending job as the scheduler sees it."""

    job_id: int
    user_id: int
    name: str
    submit_time: int
    partitions: tuple[str, ...]  # candidates in the user's order (effective partition chosen at start)
    priority: int = 0  # computed by priority.py unless the admin set one
    admin_priority: int | None = None
    nice: int = 0
    site_factor: int = 0  # SiteFactor (scontrol update job, operators): added as is under multifactor
    min_nodes: int = 1
    max_nodes: int = 0  # 0 = same as min_nodes
    spread_nodes: int = 0  # -N A-B: start on up to this many nodes when they are free (0: as few as fit)
    num_tasks: int = 1
    ntasks_per_node: int = 0  # 0 = not given
    cpus_per_task: int = 1
    mem_per_node_mb: int = 0  # 0 = not given
    mem_per_cpu_mb: int = 0  # 0 = not given
    gpus: GpuRequest = GpuRequest()
    cpus_per_gpu: int = 0  # --cpus-per-gpu, 0 = not given
    mem_per_gpu_mb: int = 0  # --mem-per-gpu, 0 = not given
    time_limit_min: int = -1  # -1 = not given (partition default/max applies), UNLIMITED
    required_nodes: frozenset[str] = frozenset()  # -w
    excluded_nodes: frozenset[str] = frozenset()  # -x
    features: frozenset[str] = frozenset()  # -C (AND of plain feature names)
    exclusive: bool = False
    begin_time: int = 0
    held_user: bool = False
    held_admin: bool = False
    dependency: DependencySpec = DependencySpec()
    array_job_id: int = 0  # 0 = not an array task
    array_task_id: int = -1
    array_max_running: int = 0  # the %N throttle, 0 = none
    assoc_id: int = 0  # accounting association (0 = none; see assoc_limits.py)
    qos: str = ""
    reservation: str = ""  # --reservation (access was checked at submit)
    account: str = ""
    max_switches: int = 0  # --switches=N: at most N leaf switches (0 = any; see topology.py)
    switch_wait_s: int = -1  # --switches=N@time: how long to wait for them (-1 = max_switch_wait)


@dataclass(frozen=True, slots=True)
class JobStatus:
    """Every job the controller knows (pending, active, finished): for dependencies and throttles."""

    job_id: int
    user_id: int
    name: str
    phase: Phase
    array_job_id: int = 0
    array_task_id: int = -1
    end_time: int = 0


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding resources; its end is start + limit (for backfill and --test-only)."""

    job_id: int
    nodes: tuple[str, ...]
    end_time: int  # 0 = unknown / unlimited
    partition: str = ""
    allocation: tuple[NodeAllocation, ...] = ()  # what it holds; () = unknown (whole nodes freed at its end)
    assoc_id: int = 0  # accounting association (0 = none)
    qos: str = ""
    priority: int = 0  # for preemption: the lowest priority goes first
    user_id: int = -1  # whose job: QOS per-user limits (MaxJobsPerUser, MaxTRESPerUser) count it
    start_time: int = 0  # when it started (quota reclaim takes the youngest borrowers first)
    releasing: bool = False  # already ending (COMPLETING, or being preempted): never preempted twice
    suspended: bool = False  # SUSPENDED: holds what it has (ctld/job_suspend.py), and is not preempted
    gang_suspended: bool = False  # suspended by preemption (SUSPEND): resumed once its CPUs/GPUs are free


@dataclass(frozen=True, slots=True)
class PreemptConfig:
    """PreemptType, the cluster's PreemptMode and PreemptExemptTime (see preemption.py)."""

    type: str = "preempt/none"  # or preempt/qos, preempt/partition_prio
    mode: str = "OFF"  # OFF, CANCEL, REQUEUE or SUSPEND
    exempt_time_s: int = 0  # a job runs at least this long before it may be preempted
    gang: bool = False  # GANG: jobs suspended by preemption are resumed (SUSPEND needs it)


@dataclass(frozen=True, slots=True)
class QosPreempt:
    """A QOS's preemption settings from accounting (sacctmgr): whom it preempts, how its jobs end."""

    name: str
    preempt: frozenset[str] = frozenset()  # QOS whose jobs this QOS's jobs may preempt
    mode: str = ""  # "" = the cluster's PreemptMode; OFF, CANCEL, REQUEUE or SUSPEND
    grace_time_s: int = 0


@dataclass(frozen=True, slots=True)
class PriorityConfig:
    """PriorityType and the priority/multifactor knobs (see priority.py); weights 0 = factor unused."""

    type: str = "priority/basic"  # or priority/multifactor
    weight_age: int = 0
    weight_assoc: int = 0
    weight_fairshare: int = 0
    weight_job_size: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    weight_tres: tuple[tuple[str, float], ...] = ()  # (("cpu", 1000.0), ("gres/gpu", 2000.0))
    max_age_s: int = 7 * 86400  # PriorityMaxAge
    favor_small: bool = False  # PriorityFavorSmall
    flags: frozenset[str] = frozenset()  # PriorityFlags, upper case (NO_NORMAL_ALL already expanded)


@dataclass(frozen=True, slots=True)
class Config:
    """Scheduling knobs from slurm.conf (the subset the core uses)."""

    def_mem_per_cpu_mb: int = 0  # 0 = unset
    def_mem_per_node_mb: int = 0  # 0 = unset: a job without --mem gets the whole node's memory
    def_mem_per_gpu_mb: int = 0  # DefMemPerGPU; 0 = unset
    max_job_test: int = 10000
    enforce_part_limits: str = "NO"  # EnforcePartLimits: NO, ANY (= YES) or ALL
    scheduler: str = "sched/builtin"  # or sched/backfill
    # sched/backfill (SchedulerParameters; Slurm's defaults)
    bf_window_min: int = 1440  # how far ahead reservations are planned
    bf_resolution_s: int = 60  # planned times are rounded up to this
    bf_max_job_test: int = 500  # jobs the backfill pass considers
    bf_max_job_user: int = 0  # 0 = no per-user limit on jobs considered
    bf_max_job_array_resv: int = 20  # tasks of one array that get a reservation (later ones: none)
    bf_reservations: int = 0  # shoal: top jobs that get a reservation; 0 = every job tested, 1 = EASY
    # shoal's own (starve.py): short jobs first; a reservation for each starving job (0 = off)
    short_first_min: int = 0  # jobs with a time limit of at most this many minutes go first
    starve_wait_min: int = 0  # a job waiting this long starves
    starve_xfactor: int = 0  # ... or once (wait + limit) / limit reaches this
    starve_max: int = 0  # at most this many starving jobs (the oldest) get one; 0 = all
    wait_target_min: int = 0  # starving jobs get one only while one's planned start misses this wait
    bf_strict: bool = (
        False  # `shoal sim --backfill-rule strict`: backfill only jobs ending by the first reservation
    )
    max_switch_wait_s: int = 300  # the longest a job waits for its --switches count
    priority: PriorityConfig = PriorityConfig()
    preempt: PreemptConfig = PreemptConfig()


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]
    pending: tuple[JobRequest, ...]
    running: tuple[RunningJob, ...]
    jobs: tuple[JobStatus, ...]  # every known job, for dependencies, singleton and array throttles
    config: Config = Config()
    accounting: AccountingLimits | None = None  # association/QOS limits to enforce (None = not enforced)
    priority_inputs: PriorityInputs | None = None  # accounting's part of multifactor priority
    reservations: tuple[Reservation, ...] = ()  # advance reservations not yet over (see reservations.py)
    topology: Topology | None = None  # topology/tree switches (None = flat network)
    qos_preempt: tuple[QosPreempt, ...] = ()  # preempt/qos: each QOS's Preempt list, PreemptMode, GraceTime


@dataclass(frozen=True, slots=True)
class Reservation:
    """An advance reservation: its nodes are kept for its own jobs over [start_time, end_time).

    DAILY repeats it every day from its start, WEEKLY every week, WEEKDAY on Monday to Friday and
    WEEKEND on Saturday and Sunday (days of the site's local time, `utc_offset_s` east of UTC);
    flags are upper case (MAINT, FLEX, DAILY ...).
    """

    name: str
    start_time: int
    end_time: int
    nodes: frozenset[str]
    flags: frozenset[str] = frozenset()
    utc_offset_s: int = 0


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch of topology/tree: every node below it and the leaf switches those hang from."""

    name: str
    level: int  # 0 = leaf
    nodes: frozenset[str]
    leaves: tuple[str, ...]  # leaf switches below (itself for a leaf)


@dataclass(frozen=True, slots=True)
class Topology:
    switches: tuple[Switch, ...]
    leaf_nodes: dict[str, frozenset[str]] = field(default_factory=dict)  # leaf switch -> its nodes


@dataclass(frozen=True, slots=True)
class PriorityInputs:
    """What multifactor priority needs from accounting: QOS and association priorities, fair-share."""

    qos_priority: dict[str, int] = field(default_factory=dict)  # QOS name -> Priority
    assoc_priority: dict[int, int] = field(default_factory=dict)  # association id -> effective Priority
    fairshare: dict[int, float] = field(default_factory=dict)  # association id -> fair-share factor 0..1


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """Limits on TRES-minutes and wall minutes (-1 = none), the same for an association and a QOS.

    grp_*_mins: GrpTRESMins, against decayed past usage; grp_*_run_mins: GrpTRESRunMins, against
    running jobs' remaining minutes; grp_wall_min: GrpWall; max_*_mins_per_job: MaxTRESMinsPerJob.
    """

    grp_cpu_mins: int = -1
    grp_gpu_mins: int = -1
    grp_cpu_run_mins: int = -1
    grp_gpu_run_mins: int = -1
    grp_wall_min: int = -1
    max_cpu_mins_per_job: int = -1
    max_gpu_mins_per_job: int = -1


NO_USAGE_LIMITS = UsageLimits()


@dataclass(frozen=True, slots=True)
class UsedMinutes:
    """Decayed usage of an association (or QOS): CPU-, GPU- and wall-minutes."""

    cpu: float = 0.0
    gpu: float = 0.0
    wall: float = 0.0


@dataclass(frozen=True, slots=True)
class AssocLimits:
    """One association's limits (-1 = none); `parent_id` links a user's association to its account's."""

    id: int
    parent_id: int = 0
    account: str = ""
    user: str = ""
    grp_jobs: int = -1
    grp_submit_jobs: int = -1
    max_jobs: int = -1
    max_submit_jobs: int = -1
    grp_cpus: int = -1
    grp_gpus: int = -1
    max_cpus_per_job: int = -1
    max_gpus_per_job: int = -1
    max_wall_min: int = -1
    # MaxBorrowTRES (beyond Slurm, see borrowing.py): how far past grp_cpus/grp_gpus it may borrow the
    # idle guaranteed quota of its siblings; -1 = no borrowing
    max_borrow_cpus: int = -1
    max_borrow_gpus: int = -1
    usage: UsageLimits = NO_USAGE_LIMITS


@dataclass(frozen=True, slots=True)
class QosLimits:
    """One QOS's limits (-1 = none); grp_* count all its running jobs, max_*_per_user one user's."""

    name: str
    max_wall_min: int = -1
    max_jobs_per_user: int = -1
    max_submit_per_user: int = -1
    max_cpus_per_job: int = -1
    max_gpus_per_job: int = -1
    grp_jobs: int = -1
    grp_cpus: int = -1
    grp_gpus: int = -1
    max_cpus_per_user: int = -1
    max_gpus_per_user: int = -1
    usage: UsageLimits = NO_USAGE_LIMITS


@dataclass(frozen=True, slots=True)
class AccountingLimits:
    """AccountingStorageEnforce=limits[,qos][,safe]: the associations and QOS the cycle checks, and
    the decayed usage (per association and per QOS) the GrpTRESMins/GrpWall limits compare against."""

    assocs: tuple[AssocLimits, ...] = ()
    qos: tuple[QosLimits, ...] = ()
    enforce_qos: bool = False
    safe: bool = False  # start a job under a GrpTRESMins/GrpWall limit only if it can run to its time limit
    assoc_used: dict[int, UsedMinutes] = field(default_factory=dict)  # the association's own jobs only
    qos_used: dict[str, UsedMinutes] = field(default_factory=dict)


# ---- decisions ----


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    node: str
    cpu_ids: tuple[int, ...]
    mem_mb: int
    gpu_indices: tuple[int, ...] = ()
    tasks: int = 1

    @property
    def cpus(self) -> int:
        return len(self.cpu_ids)


@dataclass(frozen=True, slots=True)
class Start:
    job_id: int
    partition: str
    time_limit_min: int  # effective limit (partition default/max applied)
    allocation: tuple[NodeAllocation, ...]
    exclusive: bool = False
    user_id: int = -1  # whose job: with `user_exclusive`, no other user's job may share its nodes
    user_exclusive: bool = False
    by_backfill: bool = False  # started by the backfill pass, not the main one (scontrol's Scheduler=)


@dataclass(frozen=True, slots=True)
class Pend:
    """The job waits for room: backfill may plan when and where it starts (Resources, Priority, a
    reservation's nodes). `busy`: the room is held by running jobs now — ending some of them
    (preemption, quota reclaim) would let it start; the one verdict that invites preemption."""

    reason: str  # the word squeue shows (ctld.sched.reasons)
    busy: bool = False


@dataclass(frozen=True, slots=True)
class Unresolvable:
    """Nothing the scheduler can do starts the job now: a hold, its begin time or dependencies, a
    limit, its partition or node configuration. No plan, no preemption."""

    reason: str  # the word squeue shows (ctld.sched.reasons, assoc_limits)


Waiting = Pend | Unresolvable
Verdict = Start | Pend | Unresolvable  # what the core says of one pending job


@dataclass(frozen=True, slots=True)
class CycleResult:
    starts: tuple[Start, ...] = ()
    verdicts: dict[int, Waiting] = field(default_factory=dict)  # pending job -> why it waits
    priorities: dict[int, int] = field(default_factory=dict)
    planned: dict[int, Planned] = field(default_factory=dict)  # pending job -> backfill's plan
    preemptions: tuple[
        Preemption, ...
    ] = ()  # running jobs to end (or suspend) so that waiting ones can start
    resumes: tuple[int, ...] = ()  # jobs suspended by preemption whose CPUs/GPUs are free again
    plans_kept: bool = False  # a main pass alone (backfill not due): the last backfill plans stand

    @property
    def reasons(self) -> dict[int, str]:
        """Pending job -> the Slurm reason word it shows."""
        return {job_id: verdict.reason for job_id, verdict in self.verdicts.items()}


@dataclass(frozen=True, slots=True)
class Preemption:
    """End a running job to free its resources: the one decision every preemption producer emits.

    `mode` is CANCEL (the job ends PREEMPTED) or REQUEUE (it goes back to pending); the job gets
    SIGCONT+SIGTERM at once and SIGKILL after `grace_time_s` (0 = the cluster's KillWait). SUSPEND
    stops the job in place: it lends its CPUs and GPUs (not its memory) to the preemptor, which starts
    in the same cycle, and is resumed (`CycleResult.resumes`) once no running job holds them.
    """

    job_id: int
    mode: str  # CANCEL, REQUEUE or SUSPEND
    grace_time_s: int = 0
    reason: str = ""  # for the log ("preempted by job 12", "quota reclaimed ...")
    preemptor: int = 0  # the waiting job it makes room for (0 = none)


@dataclass(frozen=True, slots=True)
class Planned:
    """When and where backfill expects a pending job to start (squeue --start, SCHEDNODES)."""

    start_time: int
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A job that could never run, refused at submit with Slurm's message."""

    message: str
    details: tuple[str, ...] = ()  # what Slurm says first, each on its own "error:" line
