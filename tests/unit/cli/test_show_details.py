"""`scontrol -d show job` (per-node cores, memory and GPUs) and Scheduler=, against real Slurm 22.05.8.

The references were captured on the real cluster of this machine with
`sbatch -N2 --gres=gpu:2 -c 3 --wrap 'sleep 30'; scontrol -d show job N` (and the variants named).
"""

from __future__ import annotations

import calendar

import pytest

from cli import show
from shoal.v1 import jobs_pb2


def ts(h: int, m: int, s: int) -> int:
    return calendar.timegm((2026, 12, 1, h, m, s, 0, 0, 0))


pytestmark = pytest.mark.usefixtures("utc")  # the captures print UTC times


REF_569 = """\
JobId=569 JobName=wrap
   UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A
   Priority=2796 Nice=0 Account=research QOS=normal
   JobState=RUNNING Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   DerivedExitCode=0:0
   RunTime=00:00:02 TimeLimit=365-00:00:00 TimeMin=N/A
   SubmitTime=2026-12-01T09:54:36 EligibleTime=2026-12-01T09:54:36
   AccrueTime=2026-12-01T09:54:36
   StartTime=2026-12-01T09:54:36 EndTime=2027-12-01T09:54:36 Deadline=N/A
   SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-01T09:54:36 Scheduler=Backfill
   Partition=batch AllocNode:Sid=localhost:3961
   ReqNodeList=(null) ExcNodeList=(null)
   NodeList=node[1-2]
   BatchHost=node1
   NumNodes=2 NumCPUs=6 NumTasks=2 CPUs/Task=3 ReqB:S:C:T=0:0:*:*
   TRES=cpu=6,mem=6000M,node=2,billing=6,gres/gpu=4
   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*
   JOB_GRES=gpu:h100:4
     Nodes=node[1-2] CPU_IDs=0-2 Mem=3000 GRES=gpu:h100:2(IDX:0-1)
   MinCPUsNode=3 MinMemoryCPU=1000M MinTmpDiskNode=0
   Features=(null) DelayBoot=00:00:00
   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)
   Command=(null)
   WorkDir=/tmp
   StdErr=/tmp/slurm-569.out
   StdIn=/dev/null
   StdOut=/tmp/slurm-569.out
   Power=
   TresPerNode=gres:gpu:2
   \n"""


def job_569(state: int = jobs_pb2.RUNNING) -> jobs_pb2.JobInfo:
    job = jobs_pb2.JobInfo(
        job_id=569, array_task_id=-1, user_id=1001, group_id=1001, user_name="alice", group_name="alice",
        priority=2796, account="research", qos="normal", state=state, state_reason="None",  # type: ignore[arg-type]
        requeue=True, batch_flag=1, time_limit_min=365 * 24 * 60, submit_time=ts(9, 54, 36),
        eligible_time=ts(9, 54, 36), accrue_time=ts(9, 54, 36), start_time=ts(9, 54, 36),
        end_time=ts(9, 54, 36) + 365 * 86400, last_sched_eval=ts(9, 54, 36), partition="batch",
        alloc_node_sid="localhost:3961", nodes="node[1-2]", batch_host="node1", num_nodes=2, num_cpus=6,
        num_tasks=2, tres_alloc="cpu=6,mem=6000M,node=2,billing=6,gres/gpu=4", min_cpus_node=3,
        min_memory_cpu_mb=1000, std_out="/tmp/slurm-569.out", std_err="/tmp/slurm-569.out",
        std_in="/dev/null", tres_per_node="gres:gpu:2", oversubscribe=True,
    )  # fmt: skip
    job.spec.name = "wrap"
    job.spec.work_dir = "/tmp"
    job.spec.cpus_per_task = 3
    for node in ("node1", "node2"):
        job.allocation.add(
            node=node, cpus=3, mem_mb=3000, cpu_ids=[0, 1, 2], gpu_indices=[0, 1], gpu_type="h100"
        )
    job.scheduler = "Backfill"
    return job


def test_details_show_each_nodes_cores_memory_and_gpus() -> None:
    assert show.format_job(job_569(), ts(9, 54, 38), details=True) == REF_569


def test_without_details_no_allocation_lines() -> None:
    text = show.format_job(job_569(), ts(9, 54, 38))
    assert "DerivedExitCode" not in text and "JOB_GRES" not in text and "CPU_IDs" not in text


def test_nodes_with_different_cores_get_their_own_lines_and_no_gpus_print_null() -> None:
    """Reference job 571 (`-N1 -n4 --mem=100`): JOB_GRES=(null), GRES= empty, CPU_IDs as ranges."""
    job = job_569()
    del job.allocation[:]
    job.allocation.add(node="node1", cpus=4, mem_mb=100, cpu_ids=[3, 4, 8, 9])
    job.allocation.add(node="node2", cpus=4, mem_mb=100, cpu_ids=[0, 1, 2, 3])
    lines = show.format_job(job, ts(9, 54, 38), details=True).splitlines()
    at = lines.index("   JOB_GRES=(null)")
    assert lines[at + 1 : at + 3] == [
        "     Nodes=node1 CPU_IDs=3-4,8-9 Mem=100 GRES=",
        "     Nodes=node2 CPU_IDs=0-3 Mem=100 GRES=",
    ]


def test_ended_job_keeps_job_gres_but_no_longer_holds_gpu_indices() -> None:
    """Reference 569 once COMPLETED: `JOB_GRES=gpu:h100:4` / `Nodes=node[1-2] CPU_IDs=0-2 Mem=3000 GRES=`."""
    lines = show.format_job(job_569(jobs_pb2.COMPLETED), ts(9, 55, 10), details=True).splitlines()
    at = lines.index("   JOB_GRES=gpu:h100:4")
    assert lines[at + 1] == "     Nodes=node[1-2] CPU_IDs=0-2 Mem=3000 GRES="


def test_pending_job_has_derived_exit_code_but_no_allocation() -> None:
    """Reference 573 while pending: DerivedExitCode=0:0, no JOB_GRES and no Nodes= lines."""
    job = job_569(jobs_pb2.PENDING)
    del job.allocation[:]
    text = show.format_job(job, ts(9, 54, 38), details=True)
    assert "   DerivedExitCode=0:0\n" in text
    assert "JOB_GRES" not in text and "CPU_IDs" not in text


@pytest.mark.parametrize(("scheduler", "shown"), [("", "Main"), ("Main", "Main"), ("Backfill", "Backfill")])
def test_scheduler_names_the_pass_that_started_the_job(scheduler: str, shown: str) -> None:
    job = job_569()
    job.scheduler = scheduler
    assert f" LastSchedEval=2026-12-01T09:54:36 Scheduler={shown}\n" in show.format_job(job, ts(9, 54, 38))
