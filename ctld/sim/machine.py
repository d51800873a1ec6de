"""The simulated machine and how a trace job becomes a JobRequest.

The issue's default machine is the trace's size (MaxProcs, else MaxNodes) as one-CPU nodes. The sim
stands for it with one node of that many CPUs (a pool), because a job of P processors fits the
pool exactly when P one-CPU nodes are free: an SWF job asks for processors, never for particular
nodes; every CPU is alike (no topology, features, GPUs); and the lowest free CPU ids the pool
hands out are the first free nodes the one-CPU machine would. Memory must not decide anything:
backfill adds up a node's memory over a job's whole run (what runs now plus every reservation
that begins before the job would end, even when they never overlap), which on a one-CPU node only
ever concerns a CPU that is busy anyway, but on the pool would refuse jobs the one-CPU machine
starts. So jobs ask 1 MB per CPU and the pool has more memory than any sum of them. Placement then
looks at one node instead of hundreds (22x less work in the check below). tests/unit/sim checks
that fcfs, easy and sjf start every job at the same time on both machines. Results count P nodes
for a job of P processors, as on the one-CPU machine. With a slurm.conf, its nodes and partitions are the
machine and jobs go to the default partition.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctld.sched.model import UNLIMITED, Config, JobRequest, Node, Partition
from ctld.sched.policy import policy_priority
from ctld.sim.swf import TraceJob

SIM_PARTITION = "sim"
POOL_MEMORY_MB = 1 << 40  # never the limit: see above


@dataclass(frozen=True, slots=True)
class Machine:
    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]
    config: Config
    partition: str  # where trace jobs go
    pool: bool = False  # one node standing for as many one-CPU nodes as it has CPUs
    # SchedulerParameters set over any policy's (`shoal sim --sched-params`): Config field -> value
    knobs: tuple[tuple[str, int], ...] = ()

    @property
    def cpus(self) -> int:
        part = next(p for p in self.partitions if p.name == self.partition)
        members = set(part.nodes)
        return sum(n.cpus for n in self.nodes if n.name in members)


def pool_machine(cpus: int, config: Config) -> Machine:
    node = Node(name="pool", cpus=cpus, real_memory_mb=POOL_MEMORY_MB, partitions=frozenset({SIM_PARTITION}))
    part = Partition(name=SIM_PARTITION, nodes=("pool",), max_time_min=UNLIMITED)
    return Machine((node,), (part,), config, SIM_PARTITION, pool=True)


def conf_machine(path: str) -> Machine:
    """The nodes, partitions and scheduler settings of a slurm.conf."""
    from ctld.sched_config import partitions, sched_config
    from shoal.conf import load_slurm_conf

    cfg = load_slurm_conf(path)
    nodes = tuple(
        Node(
            name=n.name,
            cpus=n.cpus,
            real_memory_mb=max(n.real_memory, n.cpus),
            features=frozenset(n.features),
            weight=n.weight,
            partitions=frozenset(p.name for p in cfg.partitions if n.name in p.nodes),
            sockets=n.sockets,
            cores_per_socket=n.cores_per_socket,
            threads_per_core=n.threads_per_core,
        )
        for n in cfg.nodes
    )
    parts = partitions(cfg)
    default = next(
        (p.name for p in cfg.partitions if p.is_default), parts[0].name if parts else SIM_PARTITION
    )
    return Machine(nodes, parts, sched_config(cfg), default)


def job_request(tj: TraceJob, policy: str, machine: Machine) -> JobRequest:
    """A trace job as the core sees it: P tasks of one CPU on as many nodes as it takes (on a
    slurm.conf's machine: in the partition and on the number of nodes it had, when the input says)."""
    procs = max(1, tj.procs)
    known = any(p.name == tj.partition for p in machine.partitions)
    nodes = tj.nodes if tj.nodes > 0 and not machine.pool else 0
    return JobRequest(
        job_id=tj.job_id,
        user_id=max(0, tj.user),
        name=f"swf{tj.job_id}",
        submit_time=tj.submit,
        partitions=(tj.partition if known else machine.partition,),
        admin_priority=policy_priority(policy, tj.submit, tj.estimate),
        min_nodes=nodes or 1,
        max_nodes=nodes or procs,
        num_tasks=procs,
        mem_per_cpu_mb=1,
        time_limit_min=max(1, -(-tj.estimate // 60)),
    )
