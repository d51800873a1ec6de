"""Accounting's part of multifactor priority: QOS and association priorities from dbd's cache.

An association without its own Priority takes its parent account's (up to root), as Slurm does.
Fair-share factors are not here: ctld/sched/fairshare.py computes them from the usage ctld/fairshare_usage.py keeps.
"""

from __future__ import annotations

from ctld.sched.model import PriorityInputs
from shoal.v1 import accounting_pb2 as pb


def priority_inputs(resp: pb.GetLimitsResponse) -> PriorityInputs:
    """The QOS and (inherited) association priorities of one GetLimits answer."""
    accounts = {a.account: a for a in resp.associations if not a.user and not a.partition}

    def effective(assoc: pb.Association) -> int:
        seen: set[str] = set()
        current: pb.Association | None = assoc
        while current is not None:
            if current.priority > 0:
                return int(current.priority)
            name = current.account if current.user or current.partition else current.parent
            if not name or name in seen:
                return 0
            seen.add(name)
            current = accounts.get(name)
        return 0

    return PriorityInputs(
        qos_priority={q.name: max(0, int(q.priority)) for q in resp.qos},
        assoc_priority={int(a.id): effective(a) for a in resp.associations},
    )
