"""`scontrol show` records against captures of real Slurm 22.05 (reference 03, 04, 06, 30, 66-69, 82)."""

from __future__ import annotations

import calendar

import pytest

from cli import show
from shoal.v1 import cluster_pb2, common_pb2, controller_pb2, jobs_pb2


def ts(h: int, m: int, s: int) -> int:
    return calendar.timegm((2026, 11, 29, h, m, s, 0, 0, 0))


NOW = ts(21, 40, 1)


pytestmark = pytest.mark.usefixtures("utc")  # the captures print UTC times


WORK = "/tmp/realslurm-golden-work"


def fill1(state: int = jobs_pb2.RUNNING) -> jobs_pb2.JobInfo:
    job = jobs_pb2.JobInfo(
        job_id=20, array_task_id=-1, user_id=1001, group_id=1001, user_name="alice", group_name="alice",
        priority=10632, account="research", qos="normal", state=state, state_reason="None",  # type: ignore[arg-type]
        requeue=True, batch_flag=1, time_limit_min=-2, submit_time=ts(21, 39, 56), eligible_time=ts(21, 39, 56),
        accrue_time=ts(21, 39, 56), start_time=ts(21, 39, 58), last_sched_eval=ts(21, 39, 58), partition="batch",
        alloc_node_sid="localhost:2438", nodes="node3", batch_host="node3", num_nodes=1, num_cpus=16, num_tasks=1,
        tres_alloc="cpu=16,mem=16000M,node=1,billing=16,gres/gpu=8", min_cpus_node=1, min_memory_cpu_mb=1000,
        std_out=f"{WORK}/slurm-20.out", std_err=f"{WORK}/slurm-20.out", std_in="/dev/null",
        tres_per_node="gres:gpu:8",
    )  # fmt: skip
    job.spec.name = "fill1"
    job.spec.work_dir = WORK
    return job


REF_66 = f"""\
JobId=20 JobName=fill1
   UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A
   Priority=10632 Nice=0 Account=research QOS=normal
   JobState=RUNNING Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A
   SubmitTime=2026-11-29T21:39:56 EligibleTime=2026-11-29T21:39:56
   AccrueTime=2026-11-29T21:39:56
   StartTime=2026-11-29T21:39:58 EndTime=Unknown Deadline=N/A
   SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T21:39:58 Scheduler=Main
   Partition=batch AllocNode:Sid=localhost:2438
   ReqNodeList=(null) ExcNodeList=(null)
   NodeList=node3
   BatchHost=node3
   NumNodes=1 NumCPUs=16 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=16,mem=16000M,node=1,billing=16,gres/gpu=8
   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*
   MinCPUsNode=1 MinMemoryCPU=1000M MinTmpDiskNode=0
   Features=(null) DelayBoot=00:00:00
   OverSubscribe=NO Contiguous=0 Licenses=(null) Network=(null)
   Command=(null)
   WorkDir={WORK}
   StdErr={WORK}/slurm-20.out
   StdIn=/dev/null
   StdOut={WORK}/slurm-20.out
   Power=
   TresPerNode=gres:gpu:8
   \n"""


def test_running_job() -> None:
    assert show.format_job(fill1(), NOW) == REF_66


def test_switches_line_after_stdout_as_slurm() -> None:
    job = fill1()
    job.spec.switches, job.spec.switch_wait_s = 1, 90
    lines = show.format_job(job, NOW).splitlines()
    assert lines[lines.index(f"   StdOut={job.std_out}") + 1 :][:2] == ["   Switches=1@00:01:30", "   Power="]


def test_cancelled_job() -> None:
    job = fill1(jobs_pb2.CANCELLED)
    job.end_time = ts(21, 40, 1)
    job.exit_signal = 15
    text = show.format_job(job, NOW + 100)
    assert "   JobState=CANCELLED Reason=None Dependency=(null)\n" in text
    assert "   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15\n" in text
    assert "   RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A\n" in text
    assert "   StartTime=2026-11-29T21:39:58 EndTime=2026-11-29T21:40:01 Deadline=N/A\n" in text


def test_a_reason_with_spaces_shows_with_underscores_as_slurm() -> None:
    job = fill1(jobs_pb2.PENDING)
    job.state_reason = "launch failed requeued held"
    assert "   JobState=PENDING Reason=launch_failed_requeued_held Dependency=(null)\n" in show.format_job(
        job, NOW
    )


def pending_array() -> list[jobs_pb2.JobInfo]:
    tasks = []
    for task in (1, 2, 3):
        job = fill1(jobs_pb2.PENDING)
        job.job_id = 30 + task - 1
        job.array_job_id, job.array_task_id = 30, task
        job.spec.name = "arr"
        job.state_reason = "Priority"
        job.submit_time, job.eligible_time, job.accrue_time = ts(21, 39, 58), ts(21, 40, 1), ts(21, 40, 1)
        job.start_time, job.last_sched_eval = 0, ts(21, 40, 1)
        job.nodes, job.batch_host, job.num_cpus, job.tres_alloc = "", "", 1, ""
        job.tres_req = "cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1"
        job.oversubscribe = True
        job.tres_per_node = "gres:gpu:1"
        job.std_out = job.std_err = f"{WORK}/slurm-30_{task}.out"  # each task's own, as ctld resolves it
        tasks.append(job)
    return tasks


REF_68 = f"""\
JobId=30 ArrayJobId=30 ArrayTaskId=1-3 JobName=arr
   UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A
   Priority=10632 Nice=0 Account=research QOS=normal
   JobState=PENDING Reason=Priority Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A
   SubmitTime=2026-11-29T21:39:58 EligibleTime=2026-11-29T21:40:01
   AccrueTime=2026-11-29T21:40:01
   StartTime=Unknown EndTime=Unknown Deadline=N/A
   SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T21:40:01 Scheduler=Main
   Partition=batch AllocNode:Sid=localhost:2438
   ReqNodeList=(null) ExcNodeList=(null)
   NodeList=
   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1
   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*
   MinCPUsNode=1 MinMemoryCPU=1000M MinTmpDiskNode=0
   Features=(null) DelayBoot=00:00:00
   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)
   Command=(null)
   WorkDir={WORK}
   StdErr={WORK}/slurm-30_4294967294.out
   StdIn=/dev/null
   StdOut={WORK}/slurm-30_4294967294.out
   Power=
   TresPerNode=gres:gpu:1
   \n"""


def test_pending_array_tasks_merge_into_one_record() -> None:
    merged = show.merge_pending_array_tasks(pending_array())
    assert len(merged) == 1
    assert show.format_job(merged[0], NOW) == REF_68


@pytest.mark.parametrize(
    ("nodes", "node_range", "nodelist", "shown"),
    [
        (1, (0, 0), "", "1"),  # no -N
        (1, (1, 0), "", "1-1"),  # -N1
        (2, (2, 0), "", "2-2"),  # -N2
        (2, (2, 4), "", "2-4"),  # -N2-4
        (1, (1, 0), "node1", "1"),  # -w node1: the count it implies is no range
    ],
    ids=["no -N", "-N1", "-N2", "-N2-4", "-w node1"],
)
def test_pending_num_nodes_as_2205(
    nodes: int, node_range: tuple[int, int], nodelist: str, shown: str
) -> None:
    job = pending_array()[0]
    job.array_job_id, job.array_task_id, job.num_nodes = 0, -1, nodes
    job.spec.min_nodes, job.spec.max_nodes = node_range
    job.spec.nodelist = nodelist
    assert f"   NumNodes={shown} " in show.format_job(job, NOW)


@pytest.mark.parametrize(
    ("state", "exclusive", "holds_alone", "shown"),
    [
        (jobs_pb2.PENDING, False, False, "OK"),
        (jobs_pb2.PENDING, True, False, "NO"),
        (jobs_pb2.RUNNING, False, False, "OK"),
        (jobs_pb2.RUNNING, True, True, "NO"),
        (jobs_pb2.CANCELLED, False, False, "OK"),  # cancelled before it started
    ],
    ids=["pending", "pending --exclusive", "running", "running --exclusive", "cancelled pending"],
)
def test_oversubscribe_as_2205(state: int, exclusive: bool, holds_alone: bool, shown: str) -> None:
    job = pending_array()[0]
    job.array_job_id, job.array_task_id, job.state = 0, -1, state
    job.spec.exclusive = exclusive
    job.oversubscribe = False
    if state == jobs_pb2.RUNNING:
        job.nodes, job.oversubscribe = "node3", not holds_alone
    assert f"   OverSubscribe={shown} " in show.format_job(job, NOW)


def test_array_task_record_head() -> None:
    # 22.05 (scenario 134): a task still in the pending array is shown under the array's id; one that
    # has started has its own
    task = pending_array()[1]
    assert show.format_job(task, NOW).splitlines()[0] == "JobId=30 ArrayJobId=30 ArrayTaskId=2 JobName=arr"
    task.state, task.nodes, task.start_time = jobs_pb2.RUNNING, "node1", NOW - 5
    assert show.format_job(task, NOW).splitlines()[0] == "JobId=31 ArrayJobId=30 ArrayTaskId=2 JobName=arr"


def test_pending_job_with_node_range_and_directives() -> None:
    job = pending_array()[0]
    job.array_job_id, job.array_task_id, job.job_id = 0, -1, 9
    job.spec.max_nodes = 1
    job.spec.comment = "hello world"
    job.spec.command = f"{WORK}/directives.sh"
    job.spec.nice = 10
    job.spec.cpus_per_task = 2
    job.spec.time_min_min = -1
    job.time_limit_min = 5
    lines = show.format_job(job, NOW).splitlines()
    assert lines[0] == "JobId=9 JobName=arr"
    assert "   Priority=10632 Nice=10 Account=research QOS=normal" in lines
    assert "   RunTime=00:00:00 TimeLimit=00:05:00 TimeMin=N/A" in lines
    assert "   NumNodes=1-1 NumCPUs=1 NumTasks=1 CPUs/Task=2 ReqB:S:C:T=0:0:*:*" in lines
    assert f"   Command={WORK}/directives.sh" in lines
    assert "   Comment=hello world " in lines
    assert lines[-1] == "   "


def test_oneliner() -> None:
    line = show.format_job_oneliner(fill1(), NOW)
    assert "\n" not in line
    assert line.startswith(
        "JobId=20 JobName=fill1 UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A Priority="
    )
    assert line.endswith("Power= TresPerNode=gres:gpu:8")


def node1(alloc: bool) -> cluster_pb2.NodeInfo:
    node = cluster_pb2.NodeInfo(
        name="node1", addr="127.0.0.1", hostname="vm", port=17001, state="MIXED" if alloc else "IDLE",
        base_state="MIXED" if alloc else "IDLE", cpus=16, boards=1, sockets=2, cores_per_socket=8,
        threads_per_core=1, real_memory_mb=64000, gres="gpu:h100:8", weight=1, alloc_cpus=4 if alloc else 0,
        alloc_mem_mb=4000 if alloc else 0, alloc_gpus=8 if alloc else 0, total_gpus=8,
        partitions=["batch", "debug"], boot_time=ts(21, 17, 16), noded_start_time=ts(21, 39, 43),
        last_busy_time=ts(21, 39, 52) if alloc else ts(21, 39, 43), version="22.05.8",
    )  # fmt: skip
    node.hardware.arch = "x86_64"
    node.hardware.os = "Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0"
    node.hardware.cpu_load = 0.15
    node.hardware.free_mem_mb = 23377
    node.hardware.cpus = 16
    return node


REF_69 = """\
NodeName=node1 Arch=x86_64 CoresPerSocket=8 
   CPUAlloc=4 CPUEfctv=16 CPUTot=16 CPULoad=0.15
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:h100:8
   NodeAddr=127.0.0.1 NodeHostName=vm Port=17001 Version=22.05.8
   OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=64000 AllocMem=4000 FreeMem=23377 Sockets=2 Boards=1
   State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=batch,debug 
   BootTime=2026-11-29T21:17:16 SlurmdStartTime=2026-11-29T21:39:43
   LastBusyTime=2026-11-29T21:39:52
   CfgTRES=cpu=16,mem=62.50G,billing=16,gres/gpu=8
   AllocTRES=cpu=4,mem=4000M,gres/gpu=8
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
"""  # noqa: W291


def test_allocated_node() -> None:
    assert show.format_node(node1(True), NOW) == REF_69


def test_idle_node() -> None:
    lines = show.format_node(node1(False), NOW).splitlines()
    assert lines[1] == "   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=0.15"
    assert lines[8] == "   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A"
    assert lines[13] == "   AllocTRES="


def test_drained_node_shows_its_reason() -> None:
    node = node1(False)
    node.state, node.drain = "IDLE+DRAIN", True
    node.reason, node.reason_user, node.reason_time = "maintenance", "root", ts(21, 40, 0)
    lines = show.format_node(node, NOW).splitlines()
    assert "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A" in lines
    assert lines[-1] == "   Reason=maintenance [root@2026-11-29T21:40:00]"


def test_a_node_waiting_for_its_reboot_shows_its_next_state_as_2205() -> None:
    node = node1(True)  # the real 22.05 after `scontrol reboot ASAP node4` with a job on node4
    node.state, node.drain, node.reboot_requested, node.next_state = (
        "MIXED+DRAIN+REBOOT_REQUESTED",
        True,
        True,
        "RESUME",
    )
    node.reason, node.reason_user, node.reason_time = "Reboot ASAP", "root", ts(21, 40, 0)
    lines = show.format_node(node, NOW).splitlines()
    at = lines.index(
        "   State=MIXED+DRAIN+REBOOT_REQUESTED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A"
    )
    assert lines[at + 1 : at + 3] == ["   NextState=RESUME", "   Partitions=batch,debug "]
    assert lines[-1] == "   Reason=Reboot ASAP [root@2026-11-29T21:40:00]"
    assert not any("NextState" in line for line in show.format_node(node1(True), NOW).splitlines())


def partitions() -> list[cluster_pb2.PartitionInfo]:
    return [
        cluster_pb2.PartitionInfo(name="batch", nodes="node[1-4]", is_default=True, max_time_min=-2, state="UP",
                                  default_time_min=-1, total_nodes=4, total_cpus=64, priority_tier=1,
                                  priority_job_factor=1, oversubscribe="NO"),
        cluster_pb2.PartitionInfo(name="debug", nodes="node[1-2]", max_time_min=60, state="UP",
                                  default_time_min=30, total_nodes=2, total_cpus=32, priority_tier=1,
                                  priority_job_factor=2, oversubscribe="NO"),
    ]  # fmt: skip


REF_03 = """\
PartitionName=batch
   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL
   AllocNodes=ALL Default=YES QoS=N/A
   DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO
   MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED
   Nodes=node[1-4]
   PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO
   OverTimeLimit=NONE PreemptMode=OFF
   State=UP TotalCPUs=64 TotalNodes=4 SelectTypeParameters=NONE
   JobDefaults=(null)
   DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED
   TRES=cpu=64,mem=250G,node=4,billing=64,gres/gpu=32
"""


def test_partition_with_nodes() -> None:
    nodes = [node1(False)]
    for i in (2, 3, 4):
        n = node1(False)
        n.name = f"node{i}"
        nodes.append(n)
    assert show.format_partition(partitions()[0], nodes) == REF_03
    debug = show.format_partition(partitions()[1], nodes).splitlines()
    assert debug[3] == "   DefaultTime=00:30:00 DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO"
    assert debug[4] == "   MaxNodes=UNLIMITED MaxTime=01:00:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED"
    assert debug[-1] == "   TRES=cpu=32,mem=125G,node=2,billing=32,gres/gpu=16"


def test_partition_shows_its_preemption_settings() -> None:
    part = partitions()[1]
    part.preempt_mode, part.grace_time = "REQUEUE", 30
    lines = show.format_partition(part).splitlines()
    assert lines[3] == "   DefaultTime=00:30:00 DisableRootJobs=NO ExclusiveUser=NO GraceTime=30 Hidden=NO"
    assert lines[7] == "   OverTimeLimit=NONE PreemptMode=REQUEUE"


def test_partition_without_nodes_has_no_memory_tres() -> None:
    assert show.format_partition(partitions()[0]).splitlines()[-1] == "   TRES=cpu=64,node=4,billing=64"


def test_config() -> None:
    resp = controller_pb2.GetConfigResponse(
        now=ts(21, 39, 43),
        entries=[
            common_pb2.KeyValue(key="AccountingStorageBackupHost", value="(null)"),
            common_pb2.KeyValue(key="AccountingStorageHost", value="vm"),
            common_pb2.KeyValue(key="AuthType", value="auth/munge"),
            common_pb2.KeyValue(key="BOOT_TIME", value="2026-11-29T21:39:42"),
        ],
    )
    assert (
        show.format_config(resp)
        == """\
Configuration data as of 2026-11-29T21:39:43
AccountingStorageBackupHost = (null)
AccountingStorageHost   = vm
AuthType                = auth/munge
BOOT_TIME               = 2026-11-29T21:39:42
"""
    )


def test_preempt_times_follow_the_start_time_while_preemption_is_on() -> None:
    job = fill1()
    assert not any(
        line.startswith("   PreemptEligibleTime") for line in show.format_job(job, NOW).splitlines()
    )
    job.preempt_eligible_time = ts(21, 49, 56)
    lines = show.format_job(job, NOW).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("   StartTime="))
    assert lines[start + 1] == "   PreemptEligibleTime=2026-11-29T21:49:56 PreemptTime=None"
    job.preempt_time = ts(21, 50, 10)
    assert "   PreemptEligibleTime=2026-11-29T21:49:56 PreemptTime=2026-11-29T21:50:10" in show.format_job(
        job, NOW
    )


def test_a_task_held_apart_is_its_own_record_as_2205() -> None:
    """22.05 (probed here): `scontrol hold A_2` splits task 2 off the array's pending record;
    `scontrol show job A` lists the record (ArrayTaskId=0-1,3, Reason=BeginTime) and task 2 (its own
    Reason=JobHeldUser), where squeue merges them into one row with both reasons."""
    jobs = pending_array()  # tasks 1-3, Reason=Priority
    jobs[1].state_reason, jobs[1].array_split = "JobHeldUser", True  # task 2, held on its own
    merged = show.merge_pending_array_tasks(jobs)
    assert [(j.job_id, j.array_task_str, j.array_task_id, j.state_reason) for j in merged] == [
        (30, "1,3", -1, "Priority"),
        (31, "", 2, "JobHeldUser"),
    ]
    assert [show.format_job(j, NOW).split(" JobName")[0] for j in merged] == [
        "JobId=30 ArrayJobId=30 ArrayTaskId=1,3",
        "JobId=31 ArrayJobId=30 ArrayTaskId=2",
    ]


def test_split_tasks_stay_their_own_records_after_the_arrays_newest_first() -> None:
    """Scenario 245 (22.05): hold A_2, hold then release A_4: the array's record (0-1,3,5), then task 4's
    record and task 2's, each with its own JobId, although task 4 waits for what the others wait for."""
    jobs = pending_array() + pending_array()
    for job, task in zip(jobs, range(6), strict=True):  # tasks 0-5, ids 30-35
        job.job_id, job.array_task_id = 30 + task, task
    jobs[2].state_reason, jobs[2].array_split = "JobHeldUser", True
    jobs[4].array_split = True  # released again: Reason=Priority, as the array's record
    merged = show.merge_pending_array_tasks(jobs)
    assert [show.format_job(j, NOW).split(" JobName")[0] for j in merged] == [
        "JobId=30 ArrayJobId=30 ArrayTaskId=0-1,3,5",
        "JobId=34 ArrayJobId=30 ArrayTaskId=4",
        "JobId=32 ArrayJobId=30 ArrayTaskId=2",
    ]
