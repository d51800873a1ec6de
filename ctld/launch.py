"""What a node needs to start a job: the signed LaunchBatch request and the job's topology address."""

from __future__ import annotations

from ctld import record
from ctld.record import JobRecord
from ctld.state import ClusterState
from shoal.auth.job_credential import sign_job_credential
from shoal.conf import SlurmConfig
from shoal.v1 import node_pb2

CREDENTIAL_LIFETIME_S = 3600


def sign_credential(state: ClusterState, job: JobRecord) -> node_pb2.JobCredential:
    """The job's credential for its nodes (noded launches and runs its Prolog only for a valid one)."""
    cred = node_pb2.JobCredential(
        job_id=job.job_id,
        uid=job.user_id,
        gid=job.group_id,
        nodes=job.nodes,
        expiry=state.now() + CREDENTIAL_LIFETIME_S,
    )
    return sign_job_credential(state.key, cred)


def batch_request(state: ClusterState, job: JobRecord) -> node_pb2.LaunchBatchRequest:
    cfg = state.cfg
    addr, pattern = topology_address(cfg, job.batch_host)
    return node_pb2.LaunchBatchRequest(
        node=job.batch_host,
        job=record.wire(job),
        credential=sign_credential(state, job),
        cluster_name=cfg.cluster_name,
        ctld_addr=f"{cfg.control_addr}:{cfg.slurmctld_port}",
        kill_wait=cfg.kill_wait,
        slurm_conf=str(cfg.path),
        topology_addr=addr,
        topology_addr_pattern=pattern,
    )


def topology_address(cfg: SlurmConfig, node: str) -> tuple[str, str]:
    """SLURM_TOPOLOGY_ADDR and _PATTERN of `node`: its switch path under topology/tree, else its name."""
    if cfg.topology is None:
        return node, "node"
    return cfg.topology.address(node)
