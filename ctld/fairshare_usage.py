"""The controller's usage ledger: billing seconds per association (fair-share) and CPU/GPU/wall seconds
per association and QOS (GrpTRESMins, GrpWall), accrued for the jobs that ran and decayed.

Each scheduling pass (accrue) first decays what is recorded by the time elapsed since the last pass
(PriorityDecayHalfLife) and then adds each job's usage for the part of that time it ran, times its
QOS's UsageFactor (billing: the partition's TRESBillingWeights; CPUs without weights); PriorityUsageResetPeriod clears
everything at its boundaries. The ledger is kept in the state store's meta table, so a restart keeps the usage.
The factors themselves are computed by the pure ctld.sched.fairshare.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ctld.record import JobRecord
from ctld.sched import fairshare
from ctld.sched.fairshare import ShareAssoc, ShareRow
from ctld.sched.model import UsedMinutes
from shoal.conf import SlurmConfig
from shoal.timefmt import parse_time_limit
from shoal.v1 import accounting_pb2 as pb

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


def job_tres(job: JobRecord) -> dict[str, float]:
    """What a running job holds: cpu, mem (MB), node, gres/gpu."""
    return {
        "cpu": float(sum(len(a.cpu_ids) for a in job.allocation)),
        "mem": float(sum(a.mem_mb for a in job.allocation)),
        "node": float(len(job.allocation)),
        "gres/gpu": float(sum(len(a.gpu_indices) for a in job.allocation)),
    }


@dataclass(frozen=True, slots=True)
class Charge:
    """A job the ledger charges for the part of [start, end) since its last pass (end 0: still running)."""

    assoc_id: int
    qos: str
    tres: Mapping[str, float]
    start: int
    end: int = 0
    usage_factor: float = 1.0  # the QOS's UsageFactor
    partition: str = ""  # whose TRESBillingWeights price the job


class UsageLedger:
    """Decayed usage per association id: billing seconds (fair-share) and CPU-, GPU- and wall-seconds
    (GrpTRESMins, GrpWall), the latter per QOS too. Not thread-safe: the controller's lock guards it."""

    def __init__(self, cfg: SlurmConfig) -> None:
        self.configure(cfg)
        self.usage: dict[int, float] = {}
        self.tres: dict[int, list[float]] = {}  # association -> [cpu, gpu, wall] seconds, decayed
        self.qos_tres: dict[str, list[float]] = {}
        self.last = 0
        self.awaits_seed = False  # asked dbd for the usage of finished jobs, not yet added (see seed)

    def configure(self, cfg: SlurmConfig) -> None:
        """Take slurm.conf's decay, reset period, billing weights and flags (at start and on reconfigure;
        the usage gathered so far is kept)."""
        self.half_life_s = _minutes(cfg.get("PriorityDecayHalfLife"), 7 * 1440) * 60
        self.reset_period = (cfg.get("PriorityUsageResetPeriod") or "NONE").strip()
        # TRESBillingWeights is a partition key in 22.05; a job is billed by its partition's weights
        self.weights_by_partition = {p.name: billing_weights(p.tres_billing_weights) for p in cfg.partitions}
        default = cfg.default_partition
        self.weights = self.weights_by_partition.get(default.name, ()) if default else ()
        flags = {w.strip().upper() for w in (cfg.get("PriorityFlags") or "").split(",")}
        self.max_tres = "MAX_TRES" in flags
        self.fair_tree = "NO_FAIR_TREE" not in flags

    def accrue(self, now: int, jobs: Iterable[Charge]) -> None:
        """Decay to `now`, then charge each job for the time it ran since the last call."""
        if self.last and fairshare.reset_due(self.last, now, self.reset_period):
            self.clear()
        elapsed = now - self.last if self.last else 0
        if elapsed > 0:
            self._decay(elapsed)
            for job in jobs:
                seconds = min(job.end or now, now) - max(job.start, self.last)
                if job.assoc_id and job.start and seconds > 0:
                    self._charge(job, seconds * job.usage_factor)
        self.last = max(self.last, now)

    def reset(self, assoc_ids: Iterable[int], qos: Iterable[str]) -> None:
        """`sacctmgr ... set RawUsage=0`: forget these associations' and QOS' usage (fair-share and the
        GrpTRESMins/GrpWall minutes); what their jobs run from now on counts again."""
        for assoc in assoc_ids:
            self.usage.pop(assoc, None)
            self.tres.pop(assoc, None)
        for name in qos:
            self.qos_tres.pop(name, None)

    def clear(self) -> None:
        self.usage.clear()
        self.tres.clear()
        self.qos_tres.clear()

    def _decay(self, elapsed: int) -> None:
        def down(v: float) -> float:
            return fairshare.decayed(v, elapsed, self.half_life_s)

        self.usage = {k: down(v) for k, v in self.usage.items()}
        self.tres = {k: [down(x) for x in v] for k, v in self.tres.items()}
        self.qos_tres = {k: [down(x) for x in v] for k, v in self.qos_tres.items()}

    def _charge(self, job: Charge, seconds: float) -> None:
        self.usage[job.assoc_id] = (
            self.usage.get(job.assoc_id, 0.0)
            + fairshare.billing(
                job.tres, self.weights_by_partition.get(job.partition, self.weights), self.max_tres
            )
            * seconds
        )
        for totals in (
            self.tres.setdefault(job.assoc_id, [0.0, 0.0, 0.0]),
            self.qos_tres.setdefault(job.qos, [0.0, 0.0, 0.0]),
        ):
            totals[0] += job.tres.get("cpu", 0.0) * seconds
            totals[1] += job.tres.get("gres/gpu", 0.0) * seconds
            totals[2] += seconds

    def seed(self, usage: Mapping[int, tuple[float, float]]) -> None:
        """Add dbd's decayed CPU- and GPU-seconds of finished jobs per association: what a ledger that
        started empty (a lost StateSaveLocation) would have accrued. Billing counts CPUs and GPUs only
        (dbd keeps no memory or node usage), priced by the default partition's weights."""
        for assoc, (cpu, gpu) in usage.items():
            tres = {"cpu": cpu, "gres/gpu": gpu}
            self.usage[assoc] = self.usage.get(assoc, 0.0) + fairshare.billing(
                tres, self.weights, self.max_tres
            )
            totals = self.tres.setdefault(assoc, [0.0, 0.0, 0.0])
            totals[0] += cpu
            totals[1] += gpu
        self.awaits_seed = False

    def used_minutes(self) -> tuple[dict[int, UsedMinutes], dict[str, UsedMinutes]]:
        """The decayed CPU-, GPU- and wall-minutes per association and per QOS (GrpTRESMins, GrpWall)."""

        def minutes(v: list[float]) -> UsedMinutes:
            return UsedMinutes(cpu=v[0] / 60, gpu=v[1] / 60, wall=v[2] / 60)

        return (
            {k: minutes(v) for k, v in self.tres.items()},
            {k: minutes(v) for k, v in self.qos_tres.items()},
        )

    def factors(self, tree: list[ShareAssoc]) -> dict[int, float]:
        return fairshare.factors(tree, self.usage, self.fair_tree)

    def rows(self, tree: list[ShareAssoc]) -> list[ShareRow]:
        return fairshare.share_rows(tree, self.usage, self.fair_tree)

    def dump(self) -> str:
        return json.dumps(
            {
                "last": self.last,
                "usage": {str(k): v for k, v in self.usage.items()},
                "tres": {str(k): v for k, v in self.tres.items()},
                "qos_tres": self.qos_tres,
                "awaits_seed": self.awaits_seed,
            }
        )

    def load(self, text: str | None) -> None:
        """Restore a dump(); anything unreadable starts from no usage."""
        try:
            data = json.loads(text or "{}")
            self.usage = {int(k): float(v) for k, v in data.get("usage", {}).items()}
            self.tres = {int(k): [float(x) for x in v] for k, v in data.get("tres", {}).items()}
            self.qos_tres = {str(k): [float(x) for x in v] for k, v in data.get("qos_tres", {}).items()}
            self.last = int(data.get("last", 0))
            self.awaits_seed = bool(data.get("awaits_seed", False))
        except (ValueError, TypeError, AttributeError):
            self.usage, self.tres, self.qos_tres, self.last, self.awaits_seed = {}, {}, {}, 0, False


def _minutes(text: str | None, default: int) -> int:
    if not text:
        return default
    try:
        return max(0, parse_time_limit(text.strip()))
    except ValueError:
        return default
