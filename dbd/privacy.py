"""slurmdbd.conf PrivateData: what sacct and sacctmgr show a plain user, as 22.05's slurmdbd.

Measured on the real one: with `jobs`, sacct lists a user's own jobs and those of the accounts they
coordinate; with `users`, `sacctmgr show user` lists only the caller, and `show assoc` their own
associations, the accounts above them, and every association of an account they coordinate; with
`accounts`, `show account` lists only the accounts they coordinate (none: "Access/permission
denied"). root, SlurmUser and AdminLevel Operator/Administrator see everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from dbd.admin import coordinated, is_admin
from dbd.models import Account, Association

JOBS = "jobs"
USERS = "users"
ACCOUNTS = "accounts"
ACCESS_DENIED = "Access/permission denied"


@dataclass(frozen=True)
class Viewer:
    """A plain user under PrivateData: their name and the accounts they coordinate (sub-accounts too)."""

    user: str
    words: frozenset[str]
    accounts: frozenset[str]

    def limits(self, word: str) -> bool:
        return word in self.words


def viewer(session: Session, words: frozenset[str], user: str, privileged: bool) -> Viewer | None:
    """The caller as PrivateData limits them, or None when nothing is hidden from them."""
    if not words or privileged or is_admin(session, user):
        return None
    return Viewer(user, words, frozenset(coordinated(session).get(user, [])))


def filter_rows(session: Session, kind: str, rows: list[dict[str, str]], who: Viewer) -> list[dict[str, str]]:
    """The `sacctmgr show` rows `who` may see (kind as dbd.admin names it)."""
    if kind == "user" and who.limits(USERS):
        return [r for r in rows if r.get("user") == who.user]
    if kind == "account" and who.limits(ACCOUNTS):
        return [r for r in rows if r.get("account") in who.accounts]
    if kind == "association" and who.limits(USERS):
        above = _accounts_above(session, who)
        return [
            r
            for r in rows
            if r.get("account") in who.accounts
            or r.get("user") == who.user
            or (not r.get("user") and r.get("account") in above)
        ]
    return rows


def _accounts_above(session: Session, who: Viewer) -> set[str]:
    """The accounts the user has an association in, and every account above those."""
    parents = {a.name: a.parent for a in session.scalars(select(Account))}
    mine = set(session.scalars(select(Association.account).where(Association.user == who.user)))
    out: set[str] = set()
    for name in mine:
        while name and name not in out:
            out.add(name)
            name = parents.get(name, "")
    return out
