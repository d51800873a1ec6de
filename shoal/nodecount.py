"""A job's NumNodes (scontrol show job) and NODES (squeue %D) as Slurm 22.05 shows them.

Measured on the real 22.05 (4 nodes of 16 CPUs; the table is tests/unit/test_nodecount.py):

- a job that runs (or ran) shows the nodes it holds, a plain number;
- a pending job without -N shows the estimate, a plain number (-n20 on 16-CPU nodes: 2);
- a pending -N N job shows N-N;
- a pending -N min-max job shows EXPECTED-MOST: MOST is max, capped by an explicit -n; EXPECTED is
  max capped by the job's task count (-n, or --ntasks-per-node x min) and by the partition's usable
  nodes, never below min (-N1-3: 3-3, -N1-3 -n2: 2-2, -N1-8: 4-8, -N1-3 --ntasks-per-node=2: 2-3,
  -N1-3 in a 2-node partition: 2-3, -N3-4 with a node down: 3-4), whatever its pending reason
  (Priority, Resources, BeginTime, Dependency);
- except a job held at submission (-H): EXPECTED stays its estimate (-H -N1-3: 1-3), also once released;
- a node count that only -w implies (-w node1 -n4) is no range: a plain number.
"""

from __future__ import annotations

from shoal.v1 import jobs_pb2


def _implied_by_nodelist(spec: jobs_pb2.JobSpec) -> bool:
    """The room sbatch leaves for -n beside -w without -N (max = ntasks): no -N range."""
    return bool(spec.nodelist) and spec.max_nodes > spec.min_nodes and spec.max_nodes == spec.num_tasks


def given_range(spec: jobs_pb2.JobSpec) -> bool:
    """-N min-max with max > min."""
    return spec.max_nodes > spec.min_nodes and not _implied_by_nodelist(spec)


def expected_nodes(spec: jobs_pb2.JobSpec, estimate: int, usable_nodes: int, held: bool) -> int:
    """The first number of a pending job's NumNodes (and squeue's NODES), figured at submission."""
    if held or not given_range(spec):
        return estimate
    tasks = spec.num_tasks or spec.ntasks_per_node * max(1, spec.min_nodes)
    top = min(spec.max_nodes, tasks) if tasks else spec.max_nodes
    if usable_nodes > 0:
        top = min(top, usable_nodes)
    return max(estimate, spec.min_nodes, top)


def num_nodes_text(job: jobs_pb2.JobInfo) -> str:
    """NumNodes= of `scontrol show job`."""
    spec = job.spec
    if job.state != jobs_pb2.PENDING or _implied_by_nodelist(spec):
        return str(job.num_nodes)
    if given_range(spec):
        most = max(min(spec.max_nodes, spec.num_tasks), spec.min_nodes) if spec.num_tasks else spec.max_nodes
        return f"{job.num_nodes}-{most}"
    if spec.max_nodes or (spec.min_nodes and not spec.nodelist):  # -N2 (or -N2-2): 2-2
        return f"{job.num_nodes}-{spec.max_nodes or spec.min_nodes}"
    return str(job.num_nodes)
