"""Fluent builders for the JobInfo / LaunchBatchRequest messages the node agent receives."""

from __future__ import annotations

from shoal.v1 import jobs_pb2, node_pb2


class JobBuilder:
    """job(4).name("envjob").node("node1", cpus=2, tasks=2, gpus=[0, 1]).obj()"""

    def __init__(self, job_id: int) -> None:
        self._job = jobs_pb2.JobInfo(
            job_id=job_id,
            array_task_id=-1,
            user_id=1001,
            group_id=1001,
            user_name="alice",
            group_name="alice",
            partition="batch",
            account="research",
            qos="normal",
        )
        self._job.spec.name = "job"
        self._job.spec.work_dir = "/tmp/work"
        self._job.spec.submit_dir = "/tmp/work"
        self._job.spec.submit_host = "vm"

    def name(self, name: str) -> JobBuilder:
        self._job.spec.name = name
        return self

    def user(self, name: str, uid: int, gid: int) -> JobBuilder:
        self._job.user_name, self._job.user_id, self._job.group_id = name, uid, gid
        return self

    def node(
        self, name: str, cpus: int = 1, tasks: int = 0, gpus: list[int] | None = None, mem_mb: int = 0
    ) -> JobBuilder:
        self._job.allocation.append(
            jobs_pb2.NodeAlloc(node=name, cpus=cpus, tasks=tasks, gpu_indices=gpus or [], mem_mb=mem_mb)
        )
        names = [a.node for a in self._job.allocation]
        from shoal.hostlist import collect

        self._job.nodes = collect(names)
        self._job.batch_host = names[0]
        self._job.num_nodes = len(names)
        self._job.num_cpus = sum(a.cpus for a in self._job.allocation)
        return self

    def spec(self, **fields: object) -> JobBuilder:
        for key, value in fields.items():
            if key == "environment" and isinstance(value, dict):
                self._job.spec.environment.update(value)
            elif key == "argv" and isinstance(value, list):
                self._job.spec.argv.extend(value)
            else:
                setattr(self._job.spec, key, value)
        return self

    def set(self, **fields: object) -> JobBuilder:
        for key, value in fields.items():
            setattr(self._job, key, value)
        return self

    def obj(self) -> jobs_pb2.JobInfo:
        return self._job


def job(job_id: int = 1) -> JobBuilder:
    return JobBuilder(job_id)


def launch(job_info: jobs_pb2.JobInfo, node: str = "") -> node_pb2.LaunchBatchRequest:
    return node_pb2.LaunchBatchRequest(
        node=node or job_info.batch_host,
        job=job_info,
        cluster_name="realslurm",
        ctld_addr="127.0.0.1:6817",
        kill_wait=30,
        slurm_conf="/etc/slurm/slurm.conf",
    )
