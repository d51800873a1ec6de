"""The read RPCs: squeue/scontrol's jobs, sinfo/scontrol's nodes and partitions, scontrol show config.
They read the cluster state under its lock and write nothing."""

from __future__ import annotations

from collections.abc import Iterable

from ctld import privacy, snapshot
from ctld.job_select import select
from ctld.listing import ListingViews, with_fields
from ctld.nodes import gres_used, long_state
from ctld.record import JobRecord
from ctld.show_config import config_entries
from ctld.state import Caller, ClusterState
from shoal import hostlist
from shoal.conf.slurm import preempt_mode_text
from shoal.jobview import fold_row, pending_row
from shoal.states import FINISHED_STATES
from shoal.v1 import controller_pb2, jobs_pb2


def unavailable_partitions(state: ClusterState, caller: Caller | None) -> set[str]:
    """Partitions whose AllowGroups leave the caller out: sinfo, squeue and scontrol show them (and
    their jobs) only with -a or when named, as Slurm does. Root and SlurmUser pass every AllowGroups."""
    if caller is None:
        return set()
    return {
        p.name for p in state.partitions_view if p.allow_uids is not None and caller.uid not in p.allow_uids
    }


def get_jobs(
    state: ClusterState, req: controller_pb2.GetJobsRequest, caller: Caller | None = None
) -> controller_pb2.GetJobsResponse:
    """GetJobs as a message (in-process callers); the gRPC service sends `get_jobs_wire`'s bytes."""
    return controller_pb2.GetJobsResponse.FromString(get_jobs_wire(state, req, caller))


def get_jobs_wire(
    state: ClusterState, req: controller_pb2.GetJobsRequest, caller: Caller | None = None
) -> bytes:
    """GetJobs' answer, serialised: each listed job's listing view (ctld/listing.py), then `now` and
    whether the caller may load partitions."""
    with state.reading():
        wanted = set(req.job_ids)
        users = set(req.user_ids)
        candidates: Iterable[JobRecord] = state.jobs.values()
        if req.job_id_strs:
            candidates = [j for _, found in select(state, req.job_id_strs) for j in found]
        hidden = (
            set()
            if req.show_all
            else ({p.name for p in state.cfg.partitions if p.hidden} | unavailable_partitions(state, caller))
        )
        # jobs kept by MinJobAge go to listings that ask for them (squeue -t all, scontrol) and to
        # whoever names jobs (squeue -j, sbatch --wait, salloc): a plain squeue does not need them
        finished_too = req.include_finished or bool(req.job_ids or req.job_id_strs)
        who = privacy.viewer(state, caller)  # PrivateData=jobs: own and coordinated accounts' jobs only
        parts: list[bytes] = []
        views = state.listing
        fold = req.fold_pending_tasks
        tasks: dict[tuple[int, str], list[JobRecord]] = {}  # pending tasks folded: their group
        slots: dict[tuple[int, str], int] = {}  # ... and where its entry goes
        for job in candidates:
            if not finished_too and job.state in FINISHED_STATES:
                continue
            if hidden and all(name in hidden for name in job.partition.split(",")):
                continue
            if wanted and job.job_id not in wanted and job.array_job_id not in wanted:
                continue
            if users and job.user_id not in users:
                continue
            if who is not None and not privacy.sees(who, job):
                continue
            if fold and (key := pending_row(job)) is not None:
                if key not in tasks:
                    tasks[key], slots[key] = [], len(parts)
                    parts.append(b"")
                tasks[key].append(job)
                continue
            parts.append(views.entry_of(job, req.brief))
        for key, members in tasks.items():
            parts[slots[key]] = _folded(views, members, req.brief)
        if len(views) > 2 * len(state.jobs) + 64:
            views.forget(state.jobs)
        # the fields in number order, as the message's own serialisation writes them: jobs, then the rest
        tail = controller_pb2.GetJobsResponse(
            now=state.now(), partitions_private=privacy.private(state, caller, privacy.PARTITIONS)
        )
        parts.append(tail.SerializeToString())
        return b"".join(parts)


def _folded(views: ListingViews, members: list[JobRecord], brief: bool) -> bytes:
    """Pending tasks of one squeue row (shoal.jobview.pending_row, fold_row): its shown task's entry
    naming them all, with their reasons, as squeue's own group_array_tasks folds them."""
    if len(members) == 1:
        return views.entry_of(members[0], brief)
    first, listed, reason = fold_row(members)
    return with_fields(views.entry_of(first, brief), listed, reason)


def get_nodes(
    state: ClusterState, req: controller_pb2.GetNodesRequest, caller: Caller | None = None
) -> controller_pb2.GetNodesResponse:
    words = (privacy.NODES, privacy.PARTITIONS) if req.with_partitions else (privacy.NODES,)
    privacy.check_load(state, caller, *words)  # PrivateData=nodes/partitions: operators only
    with state.reading():
        usage = snapshot.usage(state)
        names = set(req.names)
        out = controller_pb2.GetNodesResponse(now=state.now())
        maint = snapshot.maint_nodes(state, out.now)
        completing = {
            a.node for j in state.jobs.values() if j.state == jobs_pb2.COMPLETING for a in j.allocation
        }
        for name, node in state.nodes.items():
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
            out.partitions.extend(
                get_partitions(state, controller_pb2.GetPartitionsRequest(), caller).partitions
            )
        return out


def get_partitions(
    state: ClusterState, req: controller_pb2.GetPartitionsRequest, caller: Caller | None = None
) -> controller_pb2.GetPartitionsResponse:
    privacy.check_load(state, caller, privacy.PARTITIONS)
    names = set(req.names)
    unavailable = unavailable_partitions(state, caller)
    out = controller_pb2.GetPartitionsResponse()
    for p in state.cfg.partitions:
        if names and p.name not in names:
            continue
        out.partitions.add(
            name=p.name,
            nodes=hostlist.collect(p.nodes),
            is_default=state.cfg.default_partition is not None and state.cfg.default_partition.name == p.name,
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
            total_cpus=sum(state.nodes[n].conf.cpus for n in p.nodes if n in state.nodes),
            total_nodes=len(p.nodes),
            hidden=p.hidden,
            exclusive_user=p.exclusive_user,
            root_only=p.root_only,
            deny_qos=p.deny_qos,
            def_mem_per_cpu_mb=p.def_mem_per_cpu or 0,
            max_mem_per_cpu_mb=p.max_mem_per_cpu or 0,
            preempt_mode=preempt_mode_text(p.preempt_mode or state.cfg.preempt_mode, state.cfg.preempt_gang),
            grace_time=p.grace_time,
            unavailable=p.name in unavailable,
        )
    return out


def get_config(state: ClusterState) -> controller_pb2.GetConfigResponse:
    out = controller_pb2.GetConfigResponse(now=state.now(), cluster_name=state.cfg.cluster_name)
    for key, value in config_entries(state.cfg, state.started, state.next_job_id):  # as 22.05 lists them
        out.entries.add(key=key, value=value)
    topo = state.cfg.topology
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
