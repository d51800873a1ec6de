"""Fair-share: usage per association, its decay, and the fair-share factor over the account tree.

Usage is counted in TRES-billing seconds (TRESBillingWeights; without weights billing is the CPU
count) and halves every PriorityDecayHalfLife. The factor comes from one of Slurm's two algorithms:

- Fair Tree (the default): at each level every child gets LevelFS = S / U, its share of its siblings'
  shares over its share of their usage (infinite without usage, 0 without shares); the tree is walked
  depth first, siblings in decreasing LevelFS (equal accounts are walked together), and users are
  ranked in the order they are reached: factor = rank / number of users, tied users share a rank.
- classic (PriorityFlags=NO_FAIR_TREE): F = 2^(-EffectvUsage / NormShares) with
  EffectvUsage = U + (EffectvUsage(parent) - U) * shares / siblings' shares, U = usage / total usage.

Pure: the tree and the usage in, numbers out.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

INF = math.inf


@dataclass(frozen=True, slots=True)
class ShareAssoc:
    """One association of the tree; a user's parent is its account's association, root has parent 0."""

    id: int
    parent_id: int
    account: str
    user: str = ""
    shares: int = 1


@dataclass(frozen=True, slots=True)
class ShareRow:
    """What sshare prints for one association (fairshare is NaN for accounts: printed blank)."""

    id: int
    account: str
    user: str
    depth: int
    raw_shares: int
    norm_shares: float
    raw_usage: float
    norm_usage: float
    effective_usage: float
    level_fs: float
    fairshare: float


def billing(tres: Mapping[str, float], weights: Sequence[tuple[str, float]], max_tres: bool = False) -> float:
    """A job's billing: the weighted sum (or largest, MAX_TRES) of its TRES; its CPUs without weights."""
    if not weights:
        return float(tres.get("cpu", 0))
    parts = [tres.get(name, 0) * weight for name, weight in weights]
    return max(parts, default=0.0) if max_tres else sum(parts)


def decayed(usage: float, elapsed_s: float, half_life_s: int) -> float:
    """Usage after `elapsed_s` seconds of decay (no decay when the half-life is 0)."""
    if half_life_s <= 0 or elapsed_s <= 0:
        return usage
    return float(usage * 0.5 ** (elapsed_s / half_life_s))


def reset_due(last: int, now: int, period: str) -> bool:
    """Whether PriorityUsageResetPeriod (NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY, YEARLY) passed
    a boundary between `last` and `now` (UTC epoch seconds)."""
    period = period.upper()
    if period in ("", "NONE") or now <= last:
        return False
    if period == "NOW":
        return last == 0
    a, b = time.gmtime(last), time.gmtime(now)  # calendar arithmetic only: no clock is read
    if period == "DAILY":
        return (a.tm_year, a.tm_yday) != (b.tm_year, b.tm_yday)
    if period == "WEEKLY":
        return last // 86400 // 7 != now // 86400 // 7 or now - last >= 7 * 86400
    if period == "MONTHLY":
        return (a.tm_year, a.tm_mon) != (b.tm_year, b.tm_mon)
    if period == "QUARTERLY":
        return (a.tm_year, (a.tm_mon - 1) // 3) != (b.tm_year, (b.tm_mon - 1) // 3)
    if period == "YEARLY":
        return a.tm_year != b.tm_year
    return False


def last_reset(now: int, period: str) -> int:
    """The latest PriorityUsageResetPeriod boundary at or before `now` (0 when usage is never reset;
    `now` for NOW), in UTC, the calendar periods as reset_due counts them."""
    period = period.upper()
    if period == "NOW":
        return now
    if period == "DAILY":
        return now - now % 86400
    if period == "WEEKLY":
        return now // (7 * 86400) * 7 * 86400
    t = time.gmtime(now)
    month = {"MONTHLY": t.tm_mon, "QUARTERLY": (t.tm_mon - 1) // 3 * 3 + 1, "YEARLY": 1}.get(period)
    return 0 if month is None else calendar.timegm((t.tm_year, month, 1, 0, 0, 0, 0, 0, 0))


def share_rows(
    assocs: Iterable[ShareAssoc], usage: Mapping[int, float], fair_tree: bool = True
) -> list[ShareRow]:
    """Every association's row, in tree order (users before accounts at each level, by name), as sshare lists them."""
    tree = _Tree(list(assocs), usage)
    rows: list[ShareRow] = []
    factors = tree.fair_tree() if fair_tree else {}
    for node, depth in tree.walk():
        a = tree.by_id[node]
        norm_usage = tree.total(node) / tree.root_usage if tree.root_usage else 0.0
        if fair_tree:  # Fair Tree shows shares and usage relative to the siblings
            norm_shares, eff = tree.level(node) if a.parent_id in tree.by_id else (0.0, 1.0)
            fs = factors.get(node, math.nan) if a.user else math.nan
            lfs = tree.level_fs(node)
        else:
            norm_shares = tree.norm_shares(node) if a.parent_id in tree.by_id else 0.0
            eff = tree.classic_effective(node)
            fs = (2.0 ** (-eff / norm_shares) if norm_shares > 0 else 0.0) if a.user else math.nan
            lfs = math.nan
        rows.append(
            ShareRow(
                id=node,
                account=a.account,
                user=a.user,
                depth=depth,
                raw_shares=a.shares,
                norm_shares=norm_shares,
                raw_usage=tree.total(node),
                norm_usage=norm_usage,
                effective_usage=eff,
                level_fs=lfs,
                fairshare=fs,
            )
        )
    return rows


def factors(
    assocs: Iterable[ShareAssoc], usage: Mapping[int, float], fair_tree: bool = True
) -> dict[int, float]:
    """Association id -> fair-share factor, for the users' associations."""
    return {row.id: row.fairshare for row in share_rows(assocs, usage, fair_tree) if row.user}


class _Tree:
    def __init__(self, assocs: list[ShareAssoc], usage: Mapping[int, float]) -> None:
        self.by_id = {a.id: a for a in assocs}
        self.children: dict[int, list[int]] = {}
        for a in sorted(assocs, key=lambda x: (x.user == "", x.account if not x.user else x.user, x.id)):
            if a.parent_id in self.by_id:
                self.children.setdefault(a.parent_id, []).append(a.id)
        self.roots = [a.id for a in assocs if a.parent_id not in self.by_id]
        self._total: dict[int, float] = {}
        for root in self.roots:
            self._sum(root, usage)
        self.root_usage = sum(self._total[r] for r in self.roots)

    def _sum(self, node: int, usage: Mapping[int, float]) -> float:
        total = usage.get(node, 0.0) + sum(self._sum(c, usage) for c in self.children.get(node, []))
        self._total[node] = total
        return total

    def total(self, node: int) -> float:
        return self._total.get(node, 0.0)

    def walk(self) -> Iterable[tuple[int, int]]:
        stack = [(r, 0) for r in reversed(self.roots)]
        while stack:
            node, depth = stack.pop()
            yield node, depth
            stack.extend((c, depth + 1) for c in reversed(self.children.get(node, [])))

    def level(self, node: int) -> tuple[float, float]:
        """(share among siblings, usage among siblings)."""
        parent = self.by_id[node].parent_id
        sibs = self.children.get(parent, [node])
        shares = sum(self.by_id[s].shares for s in sibs)
        used = sum(self.total(s) for s in sibs)
        return (
            self.by_id[node].shares / shares if shares else 0.0,
            self.total(node) / used if used else 0.0,
        )

    def norm_shares(self, node: int) -> float:
        value = 1.0
        current = node
        while self.by_id[current].parent_id in self.by_id:
            value *= self.level(current)[0]
            current = self.by_id[current].parent_id
        return value

    def level_fs(self, node: int) -> float:
        share, used = self.level(node)
        if share == 0:
            return 0.0
        return INF if used == 0 else share / used

    def classic_effective(self, node: int) -> float:
        a = self.by_id[node]
        if a.parent_id not in self.by_id:
            return 1.0
        own = self.total(node) / self.root_usage if self.root_usage else 0.0
        parent = self.classic_effective(a.parent_id)
        if self.by_id[a.parent_id].parent_id not in self.by_id:
            return own  # the root's children: their own usage
        sibs = self.children.get(a.parent_id, [])
        shares = sum(self.by_id[s].shares for s in sibs)
        return own + (parent - own) * (a.shares / shares) if shares else own

    def fair_tree(self) -> dict[int, float]:
        order: list[list[int]] = []  # groups of tied users, best first
        self._rank(self.roots, order)
        count = sum(len(group) for group in order)
        out: dict[int, float] = {}
        remaining = count
        for group in order:
            for user in group:
                out[user] = remaining / count if count else 0.0
            remaining -= len(group)
        return out

    def _rank(self, nodes: list[int], order: list[list[int]]) -> None:
        """Walk `nodes` (one merged level) in decreasing LevelFS; tied accounts are walked together."""
        scored: dict[float, list[int]] = {}
        for node in nodes:
            scored.setdefault(
                self.level_fs(node) if self.by_id[node].parent_id in self.by_id else INF, []
            ).append(node)
        for _, group in sorted(scored.items(), key=lambda item: -item[0]):
            users = [n for n in group if self.by_id[n].user]
            if users:
                order.append(users)
            merged = [c for n in group if not self.by_id[n].user for c in self.children.get(n, [])]
            if merged:
                self._rank(merged, order)
