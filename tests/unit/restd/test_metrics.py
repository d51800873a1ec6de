"""restd's OpenMetrics against Slurm 25.11's list: every name, type and label, read by a real parser."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from restd import metrics
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2

TSV = Path(__file__).resolve().parents[2] / "data" / "slurm-25.11-openmetrics.tsv"


def _slurm() -> dict[str, tuple[str, str]]:
    """name -> (type, label) as Slurm 25.11 serves them."""
    rows = [line.split("\t") for line in TSV.read_text().splitlines()[1:] if line.strip()]
    return {r[0]: (r[1].lower(), r[2] if len(r) > 2 else "") for r in rows}


def _answers() -> tuple[
    controller_pb2.GetJobsResponse,
    controller_pb2.GetNodesResponse,
    controller_pb2.GetPartitionsResponse,
    controller_pb2.GetDiagResponse,
]:
    jobs = controller_pb2.GetJobsResponse(
        jobs=[
            jobs_pb2.JobInfo(
                job_id=1,
                state=jobs_pb2.RUNNING,
                partition="batch",
                user_name="alice",
                account="phys",
                num_cpus=4,
                num_gpus=2,
                mem_mb=1000,
                num_nodes=1,
                start_time=10,
            ),
            jobs_pb2.JobInfo(
                job_id=2,
                state=jobs_pb2.PENDING,
                partition="batch",
                user_name="bob",
                account="chem",
                num_nodes=2,
                held=True,
            ),
            jobs_pb2.JobInfo(
                job_id=3,
                state=jobs_pb2.COMPLETED,
                partition="debug",
                user_name="alice",
                account="phys",
                start_time=5,
            ),
        ]
    )
    nodes = controller_pb2.GetNodesResponse(
        nodes=[
            cluster_pb2.NodeInfo(
                name="n1",
                state="MIXED",
                base_state="MIXED",
                cpus=8,
                alloc_cpus=4,
                real_memory_mb=4000,
                alloc_mem_mb=1000,
                total_gpus=8,
                alloc_gpus=2,
            ),
            cluster_pb2.NodeInfo(
                name="n2",
                state="IDLE+DRAIN",
                base_state="IDLE",
                drain=True,
                cpus=8,
                real_memory_mb=4000,
                total_gpus=8,
            ),
        ]
    )
    parts = controller_pb2.GetPartitionsResponse(
        partitions=[
            cluster_pb2.PartitionInfo(name="batch", nodes="n[1-2]", total_cpus=16, total_nodes=2),
            cluster_pb2.PartitionInfo(name="debug", nodes="n2", total_cpus=8, total_nodes=1),
        ]
    )
    diag = controller_pb2.GetDiagResponse(
        now=100, since=50, jobs_submitted=3, sched_cycles=2, sched_cycle_sum_us=300, sched_depth_sum=4
    )
    return jobs, nodes, parts, diag


def _served() -> dict[str, object]:
    jobs, nodes, parts, diag = _answers()
    text = (
        "".join(
            metrics.exposition(f)[: -len("# EOF\n")]
            for f in (
                metrics.jobs_families(jobs),
                metrics.nodes_families(nodes),
                metrics.partitions_families(parts, nodes, jobs),
                metrics.scheduler_families(diag),
            )
        )
        + "# EOF\n"
    )
    return {fam.name: fam for fam in text_string_to_metric_families(text)}


def test_every_slurm_name_with_its_type_and_label() -> None:
    served = _served()
    slurm = _slurm()
    assert len(slurm) == 197
    assert sorted(served) == sorted(slurm)  # all 197, and nothing of our own on these endpoints
    for name, (kind, label) in slurm.items():
        fam = served[name]
        assert fam.type == kind, name  # type: ignore[attr-defined]
        for sample in fam.samples:  # type: ignore[attr-defined]
            assert sorted(sample.labels) == ([label] if label else []), name


def test_values_from_the_answers() -> None:
    served = _served()

    def value(name: str, **labels: str) -> float:
        fam = served[name]
        return next(s.value for s in fam.samples if s.labels == labels)  # type: ignore[attr-defined]

    assert (
        value("slurm_jobs"),
        value("slurm_jobs_running"),
        value("slurm_jobs_pending"),
        value("slurm_jobs_hold"),
        value("slurm_jobs_completed"),
        value("slurm_jobs_finished"),
    ) == (3, 1, 1, 1, 1, 1)
    assert (value("slurm_jobs_cpus_alloc"), value("slurm_jobs_gpus_alloc")) == (4, 2)
    assert (
        value("slurm_nodes"),
        value("slurm_nodes_mixed"),
        value("slurm_nodes_idle"),
        value("slurm_nodes_drain"),
        value("slurm_nodes_drained"),
        value("slurm_nodes_draining"),
    ) == (2, 1, 1, 1, 1, 0)
    assert value("slurm_node_cpus_idle", node="n1") == 4
    assert value("slurm_node_memory_alloc_bytes", node="n1") == 1000 * 1024 * 1024
    assert value("slurm_partition_jobs_running", partition="batch") == 1
    assert value("slurm_partition_jobs_completed", partition="debug") == 1
    assert value("slurm_partition_nodes_drained", partition="debug") == 1
    assert value("slurm_partition_gpus", partition="batch") == 16
    assert value("slurm_partition_jobs_max_job_nodes", partition="batch") == 2
    assert value("slurm_partition_jobs_max_job_nodes_nohold", partition="batch") == 0
    assert (
        value("slurm_sdiag_jobs_submitted"),
        value("slurm_sched_mean_cycle"),
        value("slurm_schedule_cycle_cnt"),
    ) == (3, 150, 2)


def test_users_and_accounts() -> None:
    jobs, *_ = _answers()
    text = metrics.exposition(metrics.users_accounts_families(jobs))
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    running = {s.labels["username"]: s.value for s in fams["slurm_user_jobs_running"].samples}
    assert running == {"alice": 1, "bob": 0}
    pending = {s.labels["account"]: s.value for s in fams["slurm_account_jobs_pending"].samples}
    assert pending == {"chem": 1, "phys": 0}


def test_label_values_are_escaped() -> None:
    text = metrics.exposition([metrics.Family("slurm_node_cpus").add(1, node='a"b\\c')])
    [fam] = list(text_string_to_metric_families(text))
    assert fam.samples[0].labels == {"node": 'a"b\\c'}


def test_node_states_of_drain_and_reboot_agree_with_sinfo() -> None:
    """slurm_nodes_* count a node in each state sinfo shows it in (draining while jobs remain)."""
    nodes = controller_pb2.GetNodesResponse(
        nodes=[
            cluster_pb2.NodeInfo(
                name="n1", base_state="MIXED", alloc_cpus=2, drain=True, reboot_requested=True
            ),
            cluster_pb2.NodeInfo(name="n2", base_state="IDLE", drain=True, completing=True),
            cluster_pb2.NodeInfo(name="n3", base_state="DOWN", drain=True, reboot_issued=True),
            cluster_pb2.NodeInfo(name="n4", base_state="IDLE", drain=True),
        ]
    )
    counts = {
        f.name: f.samples[0][1] for f in metrics.nodes_families(nodes) if f.name.startswith("slurm_nodes")
    }
    assert (
        counts["slurm_nodes_drain"],
        counts["slurm_nodes_draining"],
        counts["slurm_nodes_drained"],
        counts["slurm_nodes_reboot_req"],
        counts["slurm_nodes_reboot_issued"],
    ) == (4, 2, 2, 1, 1)
