"""`sacctmgr modify user|account|qos ... set RawUsage=0`: clear fair-share usage in ctld's ledger.

As in 22.05 the reset reaches the controller's usage (sshare shows RawUsage 0 at once); sacctmgr first
asks without `commit` for the local cluster's name (its "No cluster specified, resetting on local
cluster X"), then commits once confirmed. An account's reset clears every association under it too
(measured on 22.05: `modify account physics set RawUsage=0` left physics' users at 0 as well). 22.05
recomputes EffectvUsage and FairShare at its next PriorityCalcPeriod pass; shoal at once.
"""

from __future__ import annotations

from ctld.errors import ACCESS_DENIED, PERMISSION_DENIED, SlurmError
from ctld.fairshare_usage import META_KEY
from ctld.state import ClusterState
from shoal.v1 import controller_pb2 as pb


def reset_usage(state: ClusterState, req: pb.ResetUsageRequest, operator: bool) -> pb.ResetUsageResponse:
    cluster = state.cfg.cluster_name
    if req.cluster and req.cluster != cluster:
        raise SlurmError(f"Failed to find cluster {req.cluster} in database")
    out = pb.ResetUsageResponse(cluster_name=cluster)
    if not req.commit:
        return out
    if not operator:
        raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
    assocs, qos = state.accounting.usage_targets(req.kind, req.users, req.accounts, req.qos, cluster)
    with state.transaction() as tx:
        state.accrue_usage()  # charged up to now, then cleared: running jobs count again from now
        state.shares.reset(assocs, qos)
        tx.set_meta(META_KEY, state.shares.dump())
    return out
