"""The accounting schema as typed SQLAlchemy 2 models; Alembic migrations (dbd/migrations) create it.

Strings have lengths so the same models work on MariaDB/MySQL and SQLite. Limits use -1 for "none",
as sacctmgr prints them blank.
"""

from __future__ import annotations

from typing import Annotated

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

Name = Annotated[str, mapped_column(String(128), nullable=False, default="")]
LongText = Annotated[str, mapped_column(Text, nullable=False, default="")]
Limit = Annotated[int, mapped_column(BigInteger, nullable=False, default=-1)]
Time = Annotated[int, mapped_column(BigInteger, nullable=False, default=0)]
Num = Annotated[int, mapped_column(BigInteger, nullable=False, default=0)]
# columns added by a later migration carry a server default, so existing rows get one
UsageText = Annotated[str, mapped_column(String(128), nullable=False, default="", server_default="")]
AddedNum = Annotated[int, mapped_column(BigInteger, nullable=False, default=0, server_default="0")]
UsageLimit = Annotated[int, mapped_column(BigInteger, nullable=False, default=-1, server_default="-1")]
Id = Annotated[
    int, mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
]


class Base(DeclarativeBase):
    pass


class Meta(Base):
    """Small counters: the association version ctld polls."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)


class Cluster(Base):
    __tablename__ = "clusters"
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    control_host: Mapped[Name]
    cpus: Mapped[Num]
    created: Mapped[Time]
    gpus: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")


class Account(Base):
    """An account; `parent` makes the tree (root has parent "")."""

    __tablename__ = "accounts"
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    parent: Mapped[Name]
    description: Mapped[Name]
    organization: Mapped[Name]


class User(Base):
    __tablename__ = "users"
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    default_account: Mapped[Name]
    admin_level: Mapped[str] = mapped_column(String(32), nullable=False, default="None")


class Coordinator(Base):
    """A user who coordinates an account (sacctmgr add coordinator): acts on and sees its users' jobs."""

    __tablename__ = "coordinators"
    user: Mapped[str] = mapped_column(String(128), primary_key=True)
    account: Mapped[str] = mapped_column(String(128), primary_key=True)


class Association(Base):
    """cluster/account/user[/partition] with shares and limits; user "" is the account's own."""

    __tablename__ = "associations"
    __table_args__ = (UniqueConstraint("cluster", "account", "user", "partition", name="uq_assoc"),)
    id: Mapped[Id]
    cluster: Mapped[Name]
    account: Mapped[Name]
    user: Mapped[Name]
    partition: Mapped[Name]
    shares: Mapped[int] = mapped_column(BigInteger, nullable=False, default=1)
    priority: Mapped[Limit]
    grp_jobs: Mapped[Limit]
    grp_submit_jobs: Mapped[Limit]
    max_jobs: Mapped[Limit]
    max_submit_jobs: Mapped[Limit]
    grp_tres: Mapped[Name]
    max_tres_per_job: Mapped[Name]
    max_wall_min: Mapped[Limit]
    qos: Mapped[Name]  # comma list
    default_qos: Mapped[Name]
    # MaxBorrowTRES (beyond Slurm): how far past grp_tres it may borrow idle quota of sibling associations
    max_borrow_tres: Mapped[str] = mapped_column(String(128), nullable=False, default="", server_default="")
    grp_tres_mins: Mapped[UsageText]
    grp_tres_run_mins: Mapped[UsageText]
    max_tres_mins_per_job: Mapped[UsageText]
    grp_wall_min: Mapped[UsageLimit]


class Qos(Base):
    __tablename__ = "qos"
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    description: Mapped[Name]
    priority: Mapped[Num]
    preempt: Mapped[Name]
    preempt_mode: Mapped[str] = mapped_column(String(32), nullable=False, default="cluster")
    grace_time: Mapped[Num]
    flags: Mapped[Name]
    usage_factor: Mapped[float] = mapped_column(Float, nullable=False, default=1.0)
    max_wall_min: Mapped[Limit]
    max_tres_per_job: Mapped[Name]
    grp_tres: Mapped[Name]
    grp_jobs: Mapped[Limit]
    max_jobs_per_user: Mapped[Limit]
    max_submit_per_user: Mapped[Limit]
    max_tres_per_user: Mapped[UsageText]  # MaxTRESPerUser
    grp_tres_mins: Mapped[UsageText]
    grp_tres_run_mins: Mapped[UsageText]
    max_tres_mins_per_job: Mapped[UsageText]
    grp_wall_min: Mapped[UsageLimit]


class Job(Base):
    """One job record; (cluster, job_id, submit_time) identifies it (ids may be reused)."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("cluster", "job_id", "submit_time", name="uq_job"),
        Index("ix_jobs_cluster_job", "cluster", "job_id"),
        Index("ix_jobs_cluster_array", "cluster", "array_job_id"),
        Index("ix_jobs_cluster_end", "cluster", "end_time"),
        Index("ix_jobs_user", "user"),
        Index("ix_jobs_cluster_submit", "cluster", "submit_time"),
        Index("ix_jobs_cluster_user", "cluster", "user"),
        Index("ix_jobs_cluster_account", "cluster", "account"),
    )
    id: Mapped[Id]
    cluster: Mapped[Name]
    job_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    array_job_id: Mapped[Num]
    array_task_id: Mapped[Limit]
    name: Mapped[Name]
    uid: Mapped[Num]
    gid: Mapped[Num]
    user: Mapped[Name]
    account: Mapped[Name]
    partition: Mapped[Name]
    qos: Mapped[Name]
    tres_req: Mapped[Name]
    tres_alloc: Mapped[Name]
    nodelist: Mapped[LongText]
    alloc_cpus: Mapped[Num]
    alloc_nodes: Mapped[Num]
    req_cpus: Mapped[Num]
    req_nodes: Mapped[Num]
    req_mem_mb: Mapped[Num]
    submit_time: Mapped[Time]
    eligible_time: Mapped[Time]
    start_time: Mapped[Time]
    end_time: Mapped[Time]
    time_limit_min: Mapped[Limit]
    state: Mapped[str] = mapped_column(String(32), nullable=False, default="PENDING")
    exit_code: Mapped[Num]
    exit_signal: Mapped[Num]
    derived_exit_code: Mapped[Num]
    derived_exit_signal: Mapped[Num]
    work_dir: Mapped[LongText]
    reason: Mapped[Name]
    cancelled_by: Mapped[Limit]
    priority: Mapped[Num]
    suspended_secs: Mapped[Time]  # scontrol suspend: time not run (sacct Suspended, not in Elapsed)
    suspend_time: Mapped[Time]  # while SUSPENDED: since when


class Step(Base):
    __tablename__ = "steps"
    __table_args__ = (UniqueConstraint("job_row", "step_id", name="uq_step"),)
    id: Mapped[Id]
    job_row: Mapped[int] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True
    )
    step_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    name: Mapped[Name]
    nodelist: Mapped[LongText]
    num_tasks: Mapped[Num]
    num_cpus: Mapped[Num]
    num_nodes: Mapped[Num]
    start_time: Mapped[Time]
    end_time: Mapped[Time]
    state: Mapped[str] = mapped_column(String(32), nullable=False, default="RUNNING")
    exit_code: Mapped[Num]
    exit_signal: Mapped[Num]
    cpu_time_s: Mapped[Num]
    max_rss_kb: Mapped[Num]
    tres_alloc: Mapped[Name]
    gpu_util_avg: Mapped[AddedNum]  # the .batch step's GPUs (TRESUsageInAve/Max gres/gpuutil, gres/gpumem)
    gpu_util_max: Mapped[AddedNum]
    gpu_mem_max_mb: Mapped[AddedNum]


class NodeEvent(Base):
    __tablename__ = "node_events"
    __table_args__ = (
        Index("ix_events_node", "cluster", "node", "start_time"),
        Index("ix_events_cluster_time", "cluster", "start_time"),
    )
    id: Mapped[Id]
    cluster: Mapped[Name]
    node: Mapped[Name]
    state: Mapped[Name]
    reason: Mapped[Name]
    reason_uid: Mapped[Num]
    start_time: Mapped[Time]
    end_time: Mapped[Time]
    cpus: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    gpus: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")


class Usage(Base):
    """TRES-seconds per association per hour: the input of fair-share and of sreport."""

    __tablename__ = "usage_hourly"
    __table_args__ = (
        UniqueConstraint("cluster", "account", "user", "hour", name="uq_usage"),
        Index("ix_usage_cluster_hour", "cluster", "hour"),
    )
    id: Mapped[Id]
    cluster: Mapped[Name]
    account: Mapped[Name]
    user: Mapped[Name]
    hour: Mapped[Time]
    cpu_seconds: Mapped[Num]
    gpu_seconds: Mapped[Num]


class Received(Base):
    """The highest record sequence applied per (cluster, ctld queue epoch): exactly-once delivery."""

    __tablename__ = "received"
    cluster: Mapped[str] = mapped_column(String(128), primary_key=True)
    epoch: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_seq: Mapped[Num]
