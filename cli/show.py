"""`scontrol show` records: jobs, nodes, partitions and the configuration, as Slurm 22.05 prints them.

Pure functions from protobuf messages (and the controller's clock) to text, so scontrol stays a thin
command and tests compare records line by line with captures of real Slurm. A record's text ends with a
newline; scontrol adds the blank line that separates records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shoal import states
from shoal.arrayspec import format_task_ids
from shoal.depshow import shown_dependency
from shoal.hostlist import collect
from shoal.nodecount import num_nodes_text
from shoal.outpath import resolve_streams
from shoal.sizefmt import format_size_mb
from shoal.timefmt import format_hms, format_time_limit, format_timestamp
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2

INDENT = "   "


def _null(text: str) -> str:
    return text if text else "(null)"


def _dependency(job: jobs_pb2.JobInfo) -> str:
    return shown_dependency(
        job.spec.dependency, job.state == jobs_pb2.PENDING, job.state_reason == "DependencyNeverSatisfied"
    )


def _hosts(names: Sequence[str]) -> str:
    return collect(names) if names else "(null)"


def _run_seconds(job: jobs_pb2.JobInfo, now: int) -> int:
    return states.run_seconds(job, now)


def _num_nodes(job: jobs_pb2.JobInfo) -> str:
    return num_nodes_text(job)  # 22.05's rule, measured: shoal/nodecount.py


def _oversubscribe(job: jobs_pb2.JobInfo) -> str:
    from shoal.jobview import oversubscribe_text

    return oversubscribe_text(job)


def _job_head(job: jobs_pb2.JobInfo) -> str:
    if job.array_job_id and job.array_task_str:
        head = f"JobId={job.array_job_id} ArrayJobId={job.array_job_id} ArrayTaskId={job.array_task_str}"
        if job.array_max_tasks:
            head += f" ArrayTaskThrottle={job.array_max_tasks}"
    elif job.array_job_id and job.array_task_id >= 0:
        from shoal.jobview import in_array_record

        head = (
            f"JobId={job.array_job_id if in_array_record(job) else job.job_id} ArrayJobId={job.array_job_id}"
            f" ArrayTaskId={job.array_task_id}"
        )
        if job.array_max_tasks:
            head += f" ArrayTaskThrottle={job.array_max_tasks}"
    else:
        head = f"JobId={job.job_id}"
    return f"{head} JobName={job.spec.name}"


def _preempt_times(job: jobs_pb2.JobInfo) -> list[str]:
    """Slurm's PreemptEligibleTime/PreemptTime line, shown only for jobs started while preemption is on."""
    if not job.preempt_eligible_time:
        return []
    preempted = format_timestamp(job.preempt_time, unknown="None")
    return [f"PreemptEligibleTime={format_timestamp(job.preempt_eligible_time)} PreemptTime={preempted}"]


def _min_memory(job: jobs_pb2.JobInfo) -> str:
    if job.min_memory_cpu_mb:
        return f"MinMemoryCPU={format_size_mb(job.min_memory_cpu_mb)}"
    return f"MinMemoryNode={format_size_mb(job.min_memory_node_mb) if job.min_memory_node_mb else '0'}"


def _id_name(name: str, number: int) -> str:
    return f"{name or number}({number})"


_HOLDS_GRES = (jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING)


def _job_gres(job: jobs_pb2.JobInfo) -> str:
    """JOB_GRES=gpu:h100:4: every GPU the job was given, typed when all share one type."""
    gpus = sum(len(a.gpu_indices) for a in job.allocation)
    if not gpus:
        return "(null)"
    types = {a.gpu_type for a in job.allocation if a.gpu_indices}
    kind = f"{types.pop()}:" if len(types) == 1 and "" not in types else ""
    return f"gpu:{kind}{gpus}"


def _node_gres(job: jobs_pb2.JobInfo, alloc: jobs_pb2.NodeAlloc) -> str:
    """GRES=gpu:h100:2(IDX:0-1) while the job holds its GPUs; empty once it has ended, as 22.05."""
    if not alloc.gpu_indices or job.state not in _HOLDS_GRES:
        return ""
    kind = f"{alloc.gpu_type}:" if alloc.gpu_type else ""
    return f"gpu:{kind}{len(alloc.gpu_indices)}(IDX:{format_task_ids(alloc.gpu_indices)})"


def allocation_lines(job: jobs_pb2.JobInfo) -> list[str]:
    """`scontrol -d show job`: JOB_GRES, then one line per run of nodes holding the same cores, memory
    and GPUs ("  Nodes=node[1-2] CPU_IDs=0-2 Mem=3000 GRES=gpu:h100:2(IDX:0-1)"), in node order."""
    if not job.allocation:
        return []
    lines = [f"JOB_GRES={_job_gres(job)}"]
    groups: list[tuple[str, list[str]]] = []
    for alloc in job.allocation:
        rest = f"CPU_IDs={format_task_ids(alloc.cpu_ids)} Mem={alloc.mem_mb} GRES={_node_gres(job, alloc)}"
        if groups and groups[-1][0] == rest:
            groups[-1][1].append(alloc.node)
        else:
            groups.append((rest, [alloc.node]))
    lines += [f"  Nodes={collect(names)} {rest}" for rest, names in groups]
    return lines


def job_lines(job: jobs_pb2.JobInfo, now: int, details: bool = False) -> list[str]:
    """The lines of one job record, first line unindented, the rest indented three spaces; `details`
    (scontrol -d) adds DerivedExitCode and the per-node allocation."""
    spec = job.spec
    time_min = format_time_limit(spec.time_min_min) if spec.time_min_min > 0 else "N/A"
    lines = [
        _job_head(job),
        f"UserId={_id_name(job.user_name, job.user_id)} GroupId={_id_name(job.group_name, job.group_id)}"
        " MCS_label=N/A",
        f"Priority={job.priority} Nice={spec.nice} Account={_null(job.account)} QOS={job.qos}",
        # as Slurm, white space in a reason becomes "_" here (squeue prints it as is)
        f"JobState={states.job_state_name(job.state)} Reason={(job.state_reason or 'None').replace(' ', '_')}"
        f" Dependency={_dependency(job)}",
        f"Requeue={int(job.requeue)} Restarts={job.restarts} BatchFlag={job.batch_flag} Reboot=0"
        f" ExitCode={job.exit_code}:{job.exit_signal}",
        f"RunTime={format_hms(_run_seconds(job, now))} TimeLimit={format_time_limit(job.time_limit_min)}"
        f" TimeMin={time_min}",
        f"SubmitTime={format_timestamp(job.submit_time)} EligibleTime={format_timestamp(job.eligible_time)}",
        f"AccrueTime={format_timestamp(job.accrue_time)}",
        f"StartTime={format_timestamp(job.start_time)} EndTime={format_timestamp(job.end_time)}"
        f" Deadline={spec.deadline or 'N/A'}",
        *_preempt_times(job),
        f"SuspendTime={format_timestamp(job.suspend_time, unknown='None')} SecsPreSuspend={job.pre_suspend_secs}"
        f" LastSchedEval={format_timestamp(job.last_sched_eval)} Scheduler={job.scheduler or 'Main'}",
        f"Partition={job.partition} AllocNode:Sid={_null(job.alloc_node_sid)}",
        f"ReqNodeList={_hosts(job.req_nodes)} ExcNodeList={_hosts(job.exc_nodes)}",
        f"NodeList={job.nodes}",
    ]
    if details:
        lines.insert(5, f"DerivedExitCode={job.derived_exit_code}:{job.derived_exit_signal}")
    if job.batch_host:
        lines.append(f"BatchHost={job.batch_host}")
    lines += [
        f"NumNodes={_num_nodes(job)} NumCPUs={job.num_cpus} NumTasks={job.num_tasks or 1}"
        f" CPUs/Task={spec.cpus_per_task or 1} ReqB:S:C:T=0:0:*:{spec.threads_per_core or '*'}",
        f"TRES={job.tres_alloc or job.tres_req}",
        f"Socks/Node=* NtasksPerN:B:S:C={spec.ntasks_per_node}:0:*:* CoreSpec=*",
        *(allocation_lines(job) if details else ()),
        f"MinCPUsNode={job.min_cpus_node or 1} {_min_memory(job)} MinTmpDiskNode=0",
        f"Features={_null(spec.constraint)} DelayBoot=00:00:00",
        f"OverSubscribe={_oversubscribe(job)} Contiguous={int(spec.contiguous)}"
        f" Licenses={_null(spec.licenses)} Network=(null)",
        f"Command={_null(spec.command)}",
        f"WorkDir={spec.work_dir}",
    ]
    if spec.reservation:
        lines.insert(-2, f"Reservation={spec.reservation}")
    if spec.comment:
        lines.append(f"Comment={spec.comment} ")
    lines += [
        f"StdErr={job.std_err}",
        f"StdIn={job.std_in or '/dev/null'}",
        f"StdOut={job.std_out}",
        "Power=",
    ]
    if spec.switches:
        lines.insert(-1, f"Switches={spec.switches}@{format_hms(spec.switch_wait_s)}")
    if spec.mail_user or spec.mail_type:
        lines.append(f"MailUser={_null(spec.mail_user)} MailType={spec.mail_type or 'NONE'}")
    if job.tres_per_node:
        lines.append(f"TresPerNode={job.tres_per_node}")
    if job.gpu_idle_since:  # shoal's own (SchedulerParameters shoal_gpu_idle_*): its GPUs sit idle
        lines.append(f"GpuIdle=yes Since={format_timestamp(job.gpu_idle_since)}")
    return lines


def format_job(job: jobs_pb2.JobInfo, now: int, details: bool = False) -> str:
    """`scontrol show job` record, ending with Slurm's indented empty line ("   \\n")."""
    lines = job_lines(job, now, details)
    return lines[0] + "\n" + "".join(f"{INDENT}{line}\n" for line in lines[1:]) + INDENT + "\n"


def format_job_oneliner(job: jobs_pb2.JobInfo, now: int, details: bool = False) -> str:
    """`scontrol -o show job`: the same fields on one line, separated by single spaces."""
    return " ".join(part.strip() for part in job_lines(job, now, details) if part.strip())


def _split_pending(job: jobs_pb2.JobInfo) -> bool:
    return job.state == jobs_pb2.PENDING and job.array_split and job.array_task_id >= 0


def merge_pending_array_tasks(jobs: Iterable[jobs_pb2.JobInfo]) -> list[jobs_pb2.JobInfo]:
    """Pending tasks of one array become one record "JobId=30 ArrayJobId=30 ArrayTaskId=1-3", as Slurm's
    meta record; running and finished tasks stay their own records, and so do pending tasks held or
    changed on their own (array_split): those follow their array's record, the last split first, as
    22.05 lists them (scenario 245; here by job id, the order shoal numbered them in)."""
    from cli.squeue import group_array_tasks

    out: list[jobs_pb2.JobInfo] = []
    for row in group_array_tasks(jobs, by_reason=True):
        if not row.task_str:
            out.append(row.job)
            continue
        merged = jobs_pb2.JobInfo()
        merged.CopyFrom(row.job)
        merged.job_id = row.job.array_job_id
        merged.array_task_str = row.task_str.split("%", 1)[0]
        merged.array_task_id = -1
        # the meta record is no one task: %a is Slurm's NO_VAL there (slurm-30_4294967294.out)
        merged.std_out, merged.std_err, merged.std_in = resolve_streams(merged, "%N")
        out.append(merged)
    # an array's split tasks right after its last unsplit pending record (none: where they stood)
    last_meta = {
        r.array_job_id: i
        for i, r in enumerate(out)
        if r.state == jobs_pb2.PENDING and r.array_job_id and not _split_pending(r)
    }
    moved: dict[int, list[jobs_pb2.JobInfo]] = {}
    for r in out:
        if _split_pending(r) and r.array_job_id in last_meta:
            moved.setdefault(r.array_job_id, []).append(r)
    if not moved:
        return out
    result: list[jobs_pb2.JobInfo] = []
    for i, r in enumerate(out):
        if _split_pending(r) and r.array_job_id in moved:
            continue
        result.append(r)
        if r.array_job_id in moved and last_meta[r.array_job_id] == i:
            result.extend(sorted(moved[r.array_job_id], key=lambda m: -m.job_id))
    return result


# --- nodes -------------------------------------------------------------------------------------


def _gpu_count(gres: str) -> int:
    """ "gpu:h100:8,gpu:2" -> 10 (gres without a count counts one)."""
    total = 0
    for item in gres.split(","):
        parts = item.strip().split("(")[0].split(":")
        if not parts or parts[0] != "gpu":
            continue
        last = parts[-1]
        total += int(last) if last.isdigit() and len(parts) > 1 else 1
    return total


def node_cfg_tres(node: cluster_pb2.NodeInfo) -> str:
    gpus = node.total_gpus or _gpu_count(node.gres)
    tres = f"cpu={node.cpus},mem={format_size_mb(node.real_memory_mb)},billing={node.cpus}"
    return tres + (f",gres/gpu={gpus}" if gpus else "")


def node_alloc_tres(node: cluster_pb2.NodeInfo) -> str:
    parts: list[str] = []
    if node.alloc_cpus:
        parts.append(f"cpu={node.alloc_cpus}")
    if node.alloc_mem_mb:
        parts.append(f"mem={format_size_mb(node.alloc_mem_mb)}")
    if node.alloc_gpus:
        parts.append(f"gres/gpu={node.alloc_gpus}")
    return ",".join(parts)


def format_node(node: cluster_pb2.NodeInfo, now: int, details: bool = False) -> str:
    """`scontrol show node` record (trailing spaces where Slurm prints them); -d adds GresDrain/GresUsed."""
    hw = node.hardware
    registered = bool(node.noded_start_time or hw.cpus)
    load = f"{hw.cpu_load:.2f}" if registered else "N/A"
    free_mem = str(hw.free_mem_mb) if registered else "N/A"
    features = ",".join(node.features) or "(null)"
    lines = [
        f"NodeName={node.name} Arch={hw.arch or '(null)'} CoresPerSocket={node.cores_per_socket} ",
        f"CPUAlloc={node.alloc_cpus} CPUEfctv={node.cpus} CPUTot={node.cpus} CPULoad={load}",
        f"AvailableFeatures={features}",
        f"ActiveFeatures={features}",
        f"Gres={node.gres or '(null)'}",
        "GresDrain=N/A" if details else "",
        f"GresUsed={node.gres_used or '(null)'}" if details else "",
        f"NodeAddr={node.addr or node.name} NodeHostName={node.hostname or node.name}"
        + (f" Port={node.port}" if node.port else "")
        + f" Version={node.version or 'N/A'}",
        f"OS={hw.os} " if hw.os else "",
        f"RealMemory={node.real_memory_mb} AllocMem={node.alloc_mem_mb} FreeMem={free_mem}"
        f" Sockets={node.sockets} Boards={node.boards or 1}",
        f"State={node.state} ThreadsPerCore={node.threads_per_core} TmpDisk={node.tmp_disk_mb}"
        f" Weight={node.weight or 1} Owner=N/A MCS_label=N/A",
        f"NextState={node.next_state}" if node.next_state else "",  # while a reboot is pending
        f"Partitions={','.join(node.partitions)} " if node.partitions else "",
        f"BootTime={format_timestamp(node.boot_time or hw.boot_time, unknown='None')}"
        f" SlurmdStartTime={format_timestamp(node.noded_start_time, unknown='None')}",
        f"LastBusyTime={format_timestamp(node.last_busy_time, unknown='None')}",
        f"CfgTRES={node_cfg_tres(node)}",
        f"AllocTRES={node_alloc_tres(node)}",
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    if node.reason:
        who = node.reason_user or str(node.reason_uid)
        lines.append(f"Reason={node.reason} [{who}@{format_timestamp(node.reason_time)}]")
    kept = [line for line in lines if line]
    return kept[0] + "\n" + "".join(f"{INDENT}{line}\n" for line in kept[1:])


# --- partitions --------------------------------------------------------------------------------


def _unlimited(value: int) -> str:
    return str(value) if value else "UNLIMITED"


def partition_tres(
    part: cluster_pb2.PartitionInfo, nodes: Sequence[cluster_pb2.NodeInfo] | None = None
) -> str:
    """TRES=cpu=..,mem=..,node=..,billing=..,gres/gpu=..; memory and GPUs need the partition's nodes."""
    if nodes is None:
        return f"cpu={part.total_cpus},node={part.total_nodes},billing={part.total_cpus}"
    from shoal.hostlist import expand

    members = set(expand(part.nodes))
    mine = [n for n in nodes if n.name in members]
    mem = sum(n.real_memory_mb for n in mine)
    gpus = sum(n.total_gpus or _gpu_count(n.gres) for n in mine)
    tres = (
        f"cpu={part.total_cpus},mem={format_size_mb(mem)},node={part.total_nodes},billing={part.total_cpus}"
    )
    return tres + (f",gres/gpu={gpus}" if gpus else "")


def format_partition(
    part: cluster_pb2.PartitionInfo, nodes: Sequence[cluster_pb2.NodeInfo] | None = None
) -> str:
    """`scontrol show partition` record. Pass the nodes to get mem= and gres/gpu= in TRES."""
    accounts = (
        f"DenyAccounts={part.deny_accounts}"
        if part.deny_accounts
        else f"AllowAccounts={part.allow_accounts or 'ALL'}"
    )
    qos = f"DenyQos={part.deny_qos}" if part.deny_qos else f"AllowQos={part.allow_qos or 'ALL'}"
    def_mem = (
        f"DefMemPerCPU={part.def_mem_per_cpu_mb}" if part.def_mem_per_cpu_mb else "DefMemPerNode=UNLIMITED"
    )
    max_mem = (
        f"MaxMemPerCPU={part.max_mem_per_cpu_mb}" if part.max_mem_per_cpu_mb else "MaxMemPerNode=UNLIMITED"
    )
    lines = [
        f"PartitionName={part.name}",
        f"AllowGroups={part.allow_groups or 'ALL'} {accounts} {qos}",
        f"AllocNodes=ALL Default={'YES' if part.is_default else 'NO'} QoS=N/A",
        f"DefaultTime={format_time_limit(part.default_time_min)} DisableRootJobs=NO"
        f" ExclusiveUser={'YES' if part.exclusive_user else 'NO'}"
        f" GraceTime={part.grace_time} Hidden={'YES' if part.hidden else 'NO'}",
        f"MaxNodes={_unlimited(part.max_nodes)} MaxTime={format_time_limit(part.max_time_min)}"
        f" MinNodes={part.min_nodes} LLN=NO MaxCPUsPerNode=UNLIMITED",
        f"Nodes={part.nodes or '(null)'}",
        f"PriorityJobFactor={part.priority_job_factor} PriorityTier={part.priority_tier}"
        f" RootOnly={'YES' if part.root_only else 'NO'}"
        f" ReqResv=NO OverSubscribe={part.oversubscribe or 'NO'}",
        f"OverTimeLimit=NONE PreemptMode={part.preempt_mode or 'OFF'}",
        f"State={part.state or 'UP'} TotalCPUs={part.total_cpus} TotalNodes={part.total_nodes}"
        " SelectTypeParameters=NONE",
        "JobDefaults=(null)",
        f"{def_mem} {max_mem}",
        f"TRES={partition_tres(part, nodes)}",
    ]
    return lines[0] + "\n" + "".join(f"{INDENT}{line}\n" for line in lines[1:])


# --- configuration -----------------------------------------------------------------------------


def format_switch(switch: controller_pb2.SwitchInfo) -> str:
    """`scontrol show topology`: SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-4] (Switches= above leaves)."""
    line = f"SwitchName={switch.name} Level={switch.level} LinkSpeed={switch.link_speed}"
    if switch.nodes:
        line += f" Nodes={switch.nodes}"
    if switch.switches:
        line += f" Switches={switch.switches}"
    return line


def format_config(resp: controller_pb2.GetConfigResponse) -> str:
    """`scontrol show config`: a dated title, then "Key = Value" with keys padded to one column."""
    lines = [f"Configuration data as of {format_timestamp(resp.now)}"]
    lines += [f"{entry.key:<23} = {entry.value}" for entry in resp.entries]
    return "\n".join(lines) + "\n"
