"""The controller's fair-share usage: billing seconds per association, accrued for running jobs and decayed.

Each scheduling pass (accrue) first decays what is recorded by the time elapsed since the last pass
(PriorityDecayHalfLife) and then adds each running job's billing for that time to its association
(TRESBillingWeights; CPUs without weights); PriorityUsageResetPeriod clears everything at its
boundaries. The ledger is kept in the state store's meta table, so a restart keeps the usage.
The factors themselves are computed by the pure ctld.sched.fairshare.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from ctld.sched import fairshare
from ctld.sched.fairshare import ShareAssoc, ShareRow
from shoal.conf import SlurmConfig
from shoal.timefmt import parse_time_limit
from shoal.v1 import accounting_pb2 as pb
from shoal.v1 import jobs_pb2

META_KEY = "fairshare_usage"


def share_tree(resp: pb.GetLimitsResponse) -> list[ShareAssoc]:
    """The association tree of one GetLimits answer: accounts under their parent, users under their account."""
    accounts = {a.account: int(a.id) for a in resp.associations if not a.user and not a.partition}
    out: list[ShareAssoc] = []
    for a in resp.associations:
        parent = a.account if a.user or a.partition else a.parent
        out.append(
            ShareAssoc(
                id=int(a.id),
                parent_id=accounts.get(parent, 0) if parent else 0,
                account=a.account,
                user=a.user,
                shares=max(0, int(a.shares)),
            )
        )
    return out


def billing_weights(text: str) -> tuple[tuple[str, float], ...]:
    """`CPU=1.0,Mem=0.25G,GRES/gpu=2.0` -> per-unit weights (Mem per MB; a G/T suffix is per GB/TB)."""
    out: list[tuple[str, float]] = []
    for word in text.split(","):
        name, sep, value = word.partition("=")
        if not sep:
            continue
        value = value.strip().upper()
        scale = {"K": 1024.0, "M": 1.0, "G": 1 / 1024, "T": 1 / 1024**2}.get(value[-1:], 1.0)
        try:
            weight = float(value.rstrip("KMGT")) * scale
        except ValueError:
            continue
        out.append((name.strip().lower(), weight))
    return tuple(out)


def job_tres(job: jobs_pb2.JobInfo) -> dict[str, float]:
    """What a running job holds: cpu, mem (MB), node, gres/gpu."""
    return {
        "cpu": float(sum(len(a.cpu_ids) for a in job.allocation)),
        "mem": float(sum(a.mem_mb for a in job.allocation)),
        "node": float(len(job.allocation)),
        "gres/gpu": float(sum(len(a.gpu_indices) for a in job.allocation)),
    }


class UsageLedger:
    """Decayed billing seconds per association id (not thread-safe: the controller's lock guards it)."""

    def __init__(self, cfg: SlurmConfig) -> None:
        self.half_life_s = _minutes(cfg.get("PriorityDecayHalfLife"), 7 * 1440) * 60
        self.reset_period = (cfg.get("PriorityUsageResetPeriod") or "NONE").strip()
        self.weights = billing_weights(cfg.get("TRESBillingWeights") or "")
        flags = {w.strip().upper() for w in (cfg.get("PriorityFlags") or "").split(",")}
        self.max_tres = "MAX_TRES" in flags
        self.fair_tree = "NO_FAIR_TREE" not in flags
        self.usage: dict[int, float] = {}
        self.last = 0

    def accrue(self, now: int, running: Iterable[tuple[int, Mapping[str, float]]]) -> None:
        """Decay to `now`, then charge each (association, TRES) for the time since the last call."""
        if self.last and fairshare.reset_due(self.last, now, self.reset_period):
            self.usage.clear()
        elapsed = now - self.last if self.last else 0
        if elapsed > 0:
            self.usage = {k: fairshare.decayed(v, elapsed, self.half_life_s) for k, v in self.usage.items()}
            for assoc, tres in running:
                if assoc:
                    charge = fairshare.billing(tres, self.weights, self.max_tres) * elapsed
                    self.usage[assoc] = self.usage.get(assoc, 0.0) + charge
        self.last = max(self.last, now)

    def factors(self, tree: list[ShareAssoc]) -> dict[int, float]:
        return fairshare.factors(tree, self.usage, self.fair_tree)

    def rows(self, tree: list[ShareAssoc]) -> list[ShareRow]:
        return fairshare.share_rows(tree, self.usage, self.fair_tree)

    def dump(self) -> str:
        return json.dumps({"last": self.last, "usage": {str(k): v for k, v in self.usage.items()}})

    def load(self, text: str | None) -> None:
        """Restore a dump(); anything unreadable starts from no usage."""
        try:
            data = json.loads(text or "{}")
            self.usage = {int(k): float(v) for k, v in data.get("usage", {}).items()}
            self.last = int(data.get("last", 0))
        except (ValueError, TypeError, AttributeError):
            self.usage, self.last = {}, 0


def _minutes(text: str | None, default: int) -> int:
    if not text:
        return default
    try:
        return max(0, parse_time_limit(text.strip()))
    except ValueError:
        return default
