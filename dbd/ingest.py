"""Store the records ctld sends, exactly once: a batch is applied in one transaction together with the
highest sequence number seen for (cluster, queue epoch); records at or below it are skipped.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from dbd.models import Cluster, Job, NodeEvent, Received, Step, Usage
from shoal.v1 import accounting_pb2 as pb

FINISHED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
     "DEADLINE"}
)
JOB_FIELDS = (
    "array_job_id", "array_task_id", "name", "uid", "gid", "user", "account", "partition", "qos", "tres_req",
    "tres_alloc", "nodelist", "alloc_cpus", "alloc_nodes", "req_cpus", "req_nodes", "req_mem_mb",
    "submit_time", "eligible_time", "start_time", "end_time", "time_limit_min", "state", "exit_code",
    "exit_signal", "derived_exit_code", "derived_exit_signal", "work_dir", "reason", "cancelled_by", "priority",
)
STEP_FIELDS = (
    "name", "nodelist", "num_tasks", "num_cpus", "num_nodes", "start_time", "end_time", "state", "exit_code",
    "exit_signal", "cpu_time_s", "max_rss_kb", "tres_alloc",
)


def apply_records(session: Session, req: pb.SendRecordsRequest) -> tuple[int, int]:
    """Apply the records (in sequence order) not applied before; returns (applied_through, newly applied)."""
    cluster, epoch, records = req.cluster, req.epoch, req.records
    row = session.get(Cluster, cluster)
    if row is None:
        row = Cluster(name=cluster)
        session.add(row)
    if req.cluster_cpus:
        row.cpus = req.cluster_cpus
    if req.control_host:
        row.control_host = req.control_host
    session.flush()
    received = session.scalars(
        select(Received).where(Received.cluster == cluster, Received.epoch == epoch).with_for_update()
    ).first()
    if received is None:
        received = Received(cluster=cluster, epoch=epoch, last_seq=0)
        session.add(received)
    applied = 0
    for record in records:
        if record.seq <= received.last_seq:
            continue
        kind = record.WhichOneof("kind")
        if kind == "job":
            _apply_job(session, cluster, record.job)
        elif kind == "step":
            _apply_step(session, cluster, record.step)
        elif kind == "node_event":
            _apply_event(session, cluster, record.node_event)
        received.last_seq = record.seq
        applied += 1
    return int(received.last_seq), applied


def _apply_job(session: Session, cluster: str, rec: pb.JobRecord) -> None:
    row = session.scalars(
        select(Job).where(Job.cluster == cluster, Job.job_id == rec.job_id, Job.submit_time == rec.submit_time)
    ).first()
    was_finished = row is not None and row.state in FINISHED
    if row is None:
        row = Job(cluster=cluster, job_id=rec.job_id)
        session.add(row)
    for field in JOB_FIELDS:
        setattr(row, field, getattr(rec, field))
    session.flush()
    if rec.state in FINISHED and not was_finished and rec.start_time and rec.end_time > rec.start_time:
        _add_usage(session, cluster, rec)


def _add_usage(session: Session, cluster: str, rec: pb.JobRecord) -> None:
    """Spread the job's CPU- and GPU-seconds over the hours it ran."""
    gpus = _tres_count(rec.tres_alloc, "gres/gpu")
    start, end = rec.start_time, rec.end_time
    hour = start - start % 3600
    while hour < end:
        seconds = min(end, hour + 3600) - max(start, hour)
        usage = session.scalars(
            select(Usage).where(
                Usage.cluster == cluster, Usage.account == rec.account, Usage.user == rec.user, Usage.hour == hour
            )
        ).first()
        if usage is None:
            usage = Usage(cluster=cluster, account=rec.account, user=rec.user, hour=hour, cpu_seconds=0,
                          gpu_seconds=0)
            session.add(usage)
        usage.cpu_seconds += seconds * rec.alloc_cpus
        usage.gpu_seconds += seconds * gpus
        session.flush()
        hour += 3600


def _tres_count(tres: str, name: str) -> int:
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == name and value.isdigit():
            return int(value)
    return 0


def _apply_step(session: Session, cluster: str, rec: pb.StepRecord) -> None:
    query = select(Job).where(Job.cluster == cluster, Job.job_id == rec.job_id)
    if rec.submit_time:
        query = query.where(Job.submit_time == rec.submit_time)
    job = session.scalars(query.order_by(Job.submit_time.desc())).first()
    if job is None:
        return  # a step of a job accounting never saw (records are ordered: the job comes first)
    row = session.scalars(select(Step).where(Step.job_row == job.id, Step.step_id == rec.step_id)).first()
    if row is None:
        row = Step(job_row=job.id, step_id=rec.step_id)
        session.add(row)
    for field in STEP_FIELDS:
        setattr(row, field, getattr(rec, field))
    session.flush()


def _apply_event(session: Session, cluster: str, rec: pb.NodeEventRecord) -> None:
    open_event = session.scalars(
        select(NodeEvent).where(
            NodeEvent.cluster == cluster, NodeEvent.node == rec.node, NodeEvent.end_time == 0
        ).order_by(NodeEvent.start_time.desc())
    ).first()
    if open_event is not None:
        open_event.end_time = rec.end_time or rec.start_time
    if rec.state:  # an empty state only closes the open event (the node is back)
        session.add(NodeEvent(cluster=cluster, node=rec.node, state=rec.state, reason=rec.reason,
                              reason_uid=rec.reason_uid, start_time=rec.start_time, end_time=rec.end_time))
    session.flush()
