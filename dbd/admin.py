"""sacctmgr's operations on clusters, accounts, users, QOS and associations, and the limits ctld loads.

Keys arrive lower-case as sacctmgr takes them (case-insensitive, Slurm's names and short forms).
Every change bumps the association version, so ctld reloads at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from dbd.db import bump_version, version
from dbd.models import Account, Association, Cluster, Coordinator, Qos, User
from shoal.timefmt import parse_time_limit
from shoal.v1 import accounting_pb2 as pb

ADMIN_LEVELS = {
    "none": "None",
    "operator": "Operator",
    "admin": "Administrator",
    "administrator": "Administrator",
}

# usage limits, the same for associations and QOS
USAGE_KEYS: dict[str, tuple[str, str]] = {
    "grptresmins": ("grp_tres_mins", "tres"),
    "grptresrunmins": ("grp_tres_run_mins", "tres"),
    "maxtresminsperjob": ("max_tres_mins_per_job", "tres"),
    "maxtresmins": ("max_tres_mins_per_job", "tres"),
    "grpwall": ("grp_wall_min", "time"),
}
# sacctmgr key -> Association column, and its kind
ASSOC_KEYS: dict[str, tuple[str, str]] = {
    "fairshare": ("shares", "int"),
    "share": ("shares", "int"),
    "shares": ("shares", "int"),
    "priority": ("priority", "int"),
    "grpjobs": ("grp_jobs", "int"),
    "grpsubmitjobs": ("grp_submit_jobs", "int"),
    "grpsubmit": ("grp_submit_jobs", "int"),
    "maxjobs": ("max_jobs", "int"),
    "maxsubmitjobs": ("max_submit_jobs", "int"),
    "maxsubmit": ("max_submit_jobs", "int"),
    "grptres": ("grp_tres", "tres"),
    "maxtres": ("max_tres_per_job", "tres"),
    "maxtresperjob": ("max_tres_per_job", "tres"),
    "maxwall": ("max_wall_min", "time"),
    "maxwalldurationperjob": ("max_wall_min", "time"),
    "qos": ("qos", "text"),
    "defaultqos": ("default_qos", "text"),
    "maxborrowtres": ("max_borrow_tres", "borrow"),
    **USAGE_KEYS,
}
QOS_KEYS: dict[str, tuple[str, str]] = {
    "description": ("description", "text"),
    "priority": ("priority", "int"),
    "preempt": ("preempt", "text"),
    "preemptmode": ("preempt_mode", "text"),
    "gracetime": ("grace_time", "int"),
    "flags": ("flags", "text"),
    "usagefactor": ("usage_factor", "float"),
    "maxwall": ("max_wall_min", "time"),
    "maxwalldurationperjob": ("max_wall_min", "time"),
    "maxtresperjob": ("max_tres_per_job", "tres"),
    "maxtres": ("max_tres_per_job", "tres"),
    "grptres": ("grp_tres", "tres"),
    "grpjobs": ("grp_jobs", "int"),
    "maxjobsperuser": ("max_jobs_per_user", "int"),
    "maxjobspu": ("max_jobs_per_user", "int"),
    "maxsubmitjobsperuser": ("max_submit_per_user", "int"),
    "maxsubmitpu": ("max_submit_per_user", "int"),
    "maxtresperuser": ("max_tres_per_user", "tres"),
    "maxtrespu": ("max_tres_per_user", "tres"),
    **USAGE_KEYS,
}
ACCOUNT_KEYS = {"description": "description", "organization": "organization", "parent": "parent"}
USER_KEYS = {"defaultaccount": "default_account", "adminlevel": "admin_level"}
# per-user limits an association takes from the nearest association above it that sets them (22.05:
# an account's MaxJobs shows, and holds, on every user under it without a value of its own; -1 unsets
# a value, so the association inherits again; MaxTRESPerJob and MaxTRESMins are inherited TRES by TRES;
# Grp limits are the account's own, never its users', scenario 247)
INHERITED = ("max_jobs", "max_submit_jobs", "max_wall_min", "max_tres_per_job", "max_tres_mins_per_job")
TRES_INHERITED = ("max_tres_per_job", "max_tres_mins_per_job")
# comma lists that `key+=a,b` / `key-=a` change item by item
LIST_KEYS = {"qos", "flags", "preempt"}
# keys that select associations rather than set anything
SELECT_KEYS = {"cluster", "clusters", "account", "accounts", "user", "users", "partition", "name", "names"}


class AdminError(Exception):
    """A refused sacctmgr request; str() is what sacctmgr prints."""


def _convert(kind: str, key: str, value: str) -> object:
    if kind == "text":
        return "" if value == "-1" else value
    if kind == "tres":
        return "" if value == "-1" else _check_tres(value)
    if kind == "borrow":  # MaxBorrowTRES: only what GrpTRES guarantees and ctld counts
        if value == "-1":
            return ""
        for item in value.split(","):
            name, _, count = item.partition("=")
            if name.lower() not in ("cpu", "gres/gpu") or not count.isdigit():
                raise AdminError(f"Invalid value for {key}: {value} (cpu=N and gres/gpu=N may be borrowed)")
        return value.lower()
    if kind == "float":
        try:
            return float(value)
        except ValueError:
            raise AdminError(f"Invalid value for {key}: {value}") from None
    if value in ("-1", ""):
        return -1
    if kind == "time":
        try:
            return parse_time_limit(value)
        except ValueError:
            raise AdminError(f"Invalid value for {key}: {value}") from None
    if not value.lstrip("-").isdigit():
        raise AdminError(f"Invalid value for {key}: {value}")
    return int(value)


TRES_TYPES = ("cpu", "mem", "node", "billing", "energy", "gres/gpu")


def _check_tres(value: str) -> str:
    """A TRES list (`cpu=4,gres/gpu=2,mem=10G`) with sacctmgr's complaints about a bad one."""
    for item in value.split(","):
        name, sep, count = item.partition("=")
        base = name.lower()
        if base.startswith("gres/gpu:"):
            base = "gres/gpu"  # a typed GPU count (gres/gpu:h100=2)
        if base not in TRES_TYPES:
            raise AdminError(f"slurmdb_format_tres_str: no TRES known by type {name}")
        if not sep:
            raise AdminError(f"slurmdb_format_tres_str: no TRES id found for {name}")
        digits = count.rstrip("KMGTPkmgtp") if count != "-1" else "1"
        if not digits.isdigit() or len(count) - len(digits) > 1:
            unit = next((c for c in count if not c.isdigit()), count[:1])
            raise AdminError(f"Invalid unit type '{unit}'. Possible options are 'KMGTP'")
    return value


PREEMPT_MODES = ("cluster", "off", "cancel", "requeue", "suspend", "gang", "within")


def _check_qos_preempt(session: Session, values: dict[str, str], adding: str = "") -> None:
    """Refuse, as sacctmgr does, a PreemptMode it does not know and a Preempt list naming no QOS."""
    for key, value in values.items():
        base = key.rstrip("+-")
        if base == "preemptmode" and value.lower() not in PREEMPT_MODES:
            raise AdminError(f"Bad Preempt Mode given: PreemptMode={value}")
        if base == "preempt":
            known = set(session.scalars(select(Qos.name))) | {adding}
            for name in (n for n in value.split(",") if n):
                if name not in known:
                    valid = ",".join(sorted(known - {""}))
                    raise AdminError(f"You gave a bad qos '{name}'. Valid QOS's are {valid}")


def _preempt_mode(mode: str | None) -> str:
    """As sacctmgr stores it: lower case, and OFF is the same as "cluster" (use slurm.conf's)."""
    mode = (mode or "").lower()
    return "cluster" if mode in ("", "off") else mode


def _apply(obj: object, table: dict[str, tuple[str, str]], values: dict[str, str]) -> list[str]:
    """Set the columns `values` names; `qos+`/`qos-` (and flags, preempt) add to or remove from a list."""
    done = []
    for key, value in values.items():
        base, op = key.rstrip("+-"), key[len(key.rstrip("+-")) :]
        if base not in table:
            continue
        column, kind = table[base]
        if op and base in LIST_KEYS:
            current = [q for q in str(getattr(obj, column)).split(",") if q]
            items = [q for q in value.split(",") if q]
            kept = (
                [*current, *(q for q in items if q not in current)]
                if op == "+"
                else [q for q in current if q not in items]
            )
            setattr(obj, column, ",".join(kept))
        elif kind == "tres" and value != "-1":
            # 22.05 changes a TRES limit item by item: `cpu=8` keeps the others, `cpu=-1` drops cpu
            _convert(kind, base, value)
            merged = {**_tres_items(getattr(obj, column) or ""), **_tres_items(_mem_in_units(value))}
            setattr(obj, column, _tres_text({k: v for k, v in merged.items() if v != "-1"}))
        else:
            setattr(obj, column, _convert(kind, base, value))
        done.append(f"{key}={value}")
    return done


def _mem_in_units(value: str) -> str:
    """A TRES list with its mem as 22.05's sacctmgr shows it (shoal.sizefmt: mem=2048 -> 2G, 1536 ->
    1.50G, 64000 -> 62.50G, 200 -> 200M; measured)."""
    from shoal.sizefmt import format_size_mb, parse_size_mb

    out = []
    for item in value.split(","):
        name, sep, count = item.partition("=")
        if name.lower() == "mem" and count != "-1":
            count = format_size_mb(parse_size_mb(count))
        out.append(f"{name}{sep}{count}")
    return ",".join(out)


def _tres_items(text: str) -> dict[str, str]:
    """`cpu=4,gres/gpu=1` as {name: count}, in its order."""
    out: dict[str, str] = {}
    for item in (i for i in text.split(",") if i):
        name, _, count = item.partition("=")
        out[name] = count
    return out


def _tres_text(items: dict[str, str]) -> str:
    """{name: count} as 22.05's sacctmgr lists a TRES limit: by name (billing, cpu, gres/gpu, mem, node;
    measured, scenario 248)."""
    return ",".join(f"{n}={items[n]}" for n in sorted(items, key=str.lower))


@dataclass(frozen=True)
class Inherited:
    """An association's per-user limits as 22.05 lists and enforces them (-1, "": none)."""

    max_jobs: int = -1
    max_submit_jobs: int = -1
    max_wall_min: int = -1
    max_tres_per_job: str = ""
    max_tres_mins_per_job: str = ""


def _parent_key(row: Association, parents: dict[str, str]) -> tuple[str, str, str] | None:
    """(cluster, account, user) of the association above `row`: a user's account, an account's parent."""
    if row.user or row.partition:
        return (row.cluster, row.account, "")
    parent = parents.get(row.account, "")
    return (row.cluster, parent, "") if parent else None


def inherited(session: Session) -> dict[int, Inherited]:
    """assoc id -> its inherited limits: its own value, else that of the nearest association above
    it that has one (TRES by TRES for MaxTRESPerJob)."""
    rows = list(session.scalars(select(Association)))
    parents = {a.name: a.parent for a in session.scalars(select(Account))}
    by_key = {(r.cluster, r.account, r.user): r for r in rows if not r.partition}
    out: dict[int, Inherited] = {}

    def resolve(row: Association, depth: int = 0) -> Inherited:
        if row.id in out:
            return out[row.id]
        key = _parent_key(row, parents)
        above = by_key.get(key) if key else None
        up = (
            resolve(above, depth + 1)
            if above is not None and above is not row and depth < 64
            else Inherited()
        )
        tres = {**_tres_items(up.max_tres_per_job), **_tres_items(row.max_tres_per_job)}
        minutes = {**_tres_items(up.max_tres_mins_per_job), **_tres_items(row.max_tres_mins_per_job)}
        out[row.id] = Inherited(
            max_jobs=row.max_jobs if row.max_jobs >= 0 else up.max_jobs,
            max_submit_jobs=row.max_submit_jobs if row.max_submit_jobs >= 0 else up.max_submit_jobs,
            max_wall_min=row.max_wall_min if row.max_wall_min >= 0 else up.max_wall_min,
            max_tres_per_job=_tres_text(tres),
            max_tres_mins_per_job=_tres_text(minutes),
        )
        return out[row.id]

    for row in rows:
        resolve(row)
    return out


def _inheritors(session: Session, accounts: list[Association], values: dict[str, str]) -> list[Association]:
    """The user associations under `accounts` that take a limit `values` sets from them (22.05 lists
    these with the account's own in a modify's answer): down the tree, sub-accounts too, until one
    has its own value."""
    columns = {ASSOC_KEYS[k.rstrip("+-")][0] for k in values if k.rstrip("+-") in ASSOC_KEYS}
    columns &= set(INHERITED)
    tres = {
        column: {
            n
            for k, v in values.items()
            if ASSOC_KEYS.get(k.rstrip("+-"), ("",))[0] == column
            for n in _tres_items(v)
        }
        for column in TRES_INHERITED
    }
    if not columns:
        return []
    rows = list(session.scalars(select(Association).order_by(Association.id)))
    parents = {a.name: a.parent for a in session.scalars(select(Account))}
    below: dict[tuple[str, str, str], list[Association]] = {}
    for row in rows:
        key = _parent_key(row, parents)
        if key is not None:
            below.setdefault(key, []).append(row)

    def takes(row: Association, column: str) -> bool:
        if column in TRES_INHERITED:
            own = _tres_items(str(getattr(row, column)))
            return not tres[column] or any(n not in own for n in tres[column])
        return int(getattr(row, column)) < 0

    out: list[Association] = []
    seen = {a.id for a in accounts}
    todo = [(a, columns) for a in accounts]
    while todo:
        row, open_columns = todo.pop()
        for child in below.get((row.cluster, row.account, ""), []) if not row.user else []:
            still = {c for c in open_columns if takes(child, c)}
            if still and child.id not in seen:
                seen.add(child.id)
                if child.user:  # 22.05 lists a sub-account's users, not the sub-account's own
                    out.append(child)
                todo.append((child, still))
    return out


def _sets(table: dict[str, tuple[str, str]], values: dict[str, str]) -> bool:
    return any(k.rstrip("+-") in table for k in values)


def _list(values: dict[str, str], *keys: str) -> list[str]:
    for key in keys:
        if values.get(key):
            return [v for v in values[key].split(",") if v]
    return []


def _clusters(session: Session, values: dict[str, str]) -> list[str]:
    named = _list(values, "cluster", "clusters")
    if named:
        return named
    return list(session.scalars(select(Cluster.name).order_by(Cluster.name)))


def _ensure_root(session: Session, cluster: str) -> None:
    if session.get(Account, "root") is None:
        session.add(Account(name="root", parent="", description="default root account", organization="root"))
    _ensure_assoc(session, cluster, "root", "", "", parent_ok=True)
    if session.get(User, "root") is None:
        session.add(User(name="root", default_account="root", admin_level="Administrator"))
    _ensure_assoc(session, cluster, "root", "root", "", parent_ok=True)


def _ensure_assoc(
    session: Session, cluster: str, account: str, user: str, partition: str, parent_ok: bool = False
) -> tuple[Association, bool]:
    row = session.scalars(
        select(Association).where(
            Association.cluster == cluster,
            Association.account == account,
            Association.user == user,
            Association.partition == partition,
        )
    ).first()
    if row is not None:
        return row, False
    row = Association(cluster=cluster, account=account, user=user, partition=partition, qos="normal")
    session.add(row)
    session.flush()
    return row, True


def modify(session: Session, req: pb.ModifyRequest) -> list[str]:
    """Apply (or, without commit, describe) one add/modify/delete; returns the change lines."""
    where = {k.lower(): v for k, v in req.where.items()}
    values = {k.lower(): v for k, v in req.set.items()}
    names = [n for n in req.names if n]
    action, kind = req.action, _kind(req.kind)
    if action == "add":
        changes = _add(session, kind, names, {**where, **values})
    elif action == "modify":
        changes = _modify(session, kind, names, where, values)
    elif action == "delete":
        changes = _delete(session, kind, names, {**where, **values})
    else:
        raise AdminError(f"Unknown action '{req.action}'")
    if changes:
        bump_version(session)
    return changes


def kind_of(text: str) -> str:
    """The entity sacctmgr named (account, user, ...), as the functions here name it."""
    return _kind(text)


def _kind(text: str) -> str:
    text = text.lower()
    for kind in ("cluster", "account", "user", "qos", "association", "coordinator"):
        if text == kind or text == kind + "s" or (len(text) >= 3 and kind.startswith(text)):
            return kind
    raise AdminError(f"Unknown entity '{text}'")


def _add(session: Session, kind: str, names: list[str], values: dict[str, str]) -> list[str]:
    names = names or _list(values, "name", "names")
    if kind == "coordinator":
        return _add_coordinators(session, names, _list(values, "account", "accounts"))
    if not names and kind != "association":
        raise AdminError(f"You need to give a name for the {kind}")
    changes: list[str] = []
    if kind == "cluster":
        for name in names:
            if session.get(Cluster, name) is not None:
                raise AdminError(f"This cluster {name} already exists.  Not adding.")
            session.add(Cluster(name=name))
            session.flush()
            _ensure_root(session, name)
            changes.append(f"  Cluster        {name}")
        return changes
    if kind == "qos":
        for name in names:
            if session.get(Qos, name) is not None:
                raise AdminError(f"This QOS {name} already exists.  Not adding.")
            _check_qos_preempt(session, values, adding=name)
            qos = Qos(name=name)
            session.add(qos)
            _apply(qos, QOS_KEYS, values)
            qos.preempt_mode = _preempt_mode(qos.preempt_mode)
            changes.append(f"  Name           = {name}")
        return changes
    clusters = _clusters(session, values)
    if not clusters:
        raise AdminError("No cluster exists yet: add one with 'sacctmgr add cluster NAME'")
    partition = values.get("partition", "")
    if kind == "account":
        parent = values.get("parent", "root")
        for cluster in clusters:
            _ensure_root(session, cluster)
        if parent != "root" and session.get(Account, parent) is None:
            raise AdminError(f"Parent account {parent} doesn't exist.")
        assocs: list[str] = []
        for name in names:
            if session.get(Account, name) is None:
                session.add(
                    Account(
                        name=name,
                        parent=parent,
                        description=values.get("description", name),
                        organization=values.get("organization", parent if parent != "root" else name),
                    )
                )
                changes.append(f"  {name}")
            for cluster in clusters:
                row, new = _ensure_assoc(session, cluster, name, "", partition)
                _apply(row, ASSOC_KEYS, values)
                if new:
                    assocs.append(f"  A = {name:<10} C = {cluster:<10}")
        # 22.05's plan: the new accounts, their settings (its words for the defaults), the associations
        if changes:
            changes += [
                " Settings",
                f"  Description     = {values.get('description', 'Account Name')}",
                f"  Organization    = {values.get('organization', 'Parent/Account Name')}",
            ]
        if assocs:
            changes += [" Associations", *assocs]
        return changes
    if kind in ("user", "association"):
        accounts = _list(values, "account", "accounts", "defaultaccount")
        users = names if kind == "user" else _list(values, "user", "users")
        if not accounts:
            raise AdminError("You need to specify an account for the user")
        for account in accounts:
            if session.get(Account, account) is None:
                raise AdminError(f"There is no account {account}")
        level = ADMIN_LEVELS.get(values.get("adminlevel", "none").lower())
        if level is None:
            raise AdminError(f"Invalid AdminLevel '{values['adminlevel']}'")
        for name in users:
            user = session.get(User, name)
            if user is None:
                user = User(
                    name=name, default_account=values.get("defaultaccount", accounts[0]), admin_level=level
                )
                session.add(user)
                changes.append(f"  {name}")
            elif "adminlevel" in values:
                user.admin_level = level
            for cluster in clusters:
                for account in accounts:
                    row, new = _ensure_assoc(session, cluster, account, name, partition)
                    _apply(row, ASSOC_KEYS, values)
                    if new:
                        changes.append(f"  U = {name:<9} A = {account:<10} C = {cluster:<10}")
        return changes
    raise AdminError(f"Cannot add {kind}")


def _matching_assocs(
    session: Session, kind: str, names: list[str], where: dict[str, str]
) -> list[Association]:
    stmt = select(Association)
    clusters = _list(where, "cluster", "clusters")
    accounts = _list(where, "account", "accounts")
    users = _list(where, "user", "users")
    if kind == "account":
        accounts = names or accounts
        if not users:
            stmt = stmt.where(Association.user == "")
    elif kind == "user":
        users = names or users
        stmt = stmt.where(Association.user != "")
    if clusters:
        stmt = stmt.where(Association.cluster.in_(clusters))
    if accounts:
        stmt = stmt.where(Association.account.in_(accounts))
    if users:
        stmt = stmt.where(Association.user.in_(users))
    if "partition" in where:
        stmt = stmt.where(Association.partition == where["partition"])
    return list(session.scalars(stmt.order_by(Association.id)))


def _modify(
    session: Session, kind: str, names: list[str], where: dict[str, str], values: dict[str, str]
) -> list[str]:
    """The change lines as 22.05 words them, titles included: ` Modified users...` (or accounts, qos)
    above the names whose own properties changed, ` Modified user associations...` (or account) above
    the associations whose limits changed, each section only when it has lines."""
    names = names or _list(where, "name", "names")
    if not values:
        raise AdminError("You didn't give anything to set")
    if kind == "qos":
        _check_qos_preempt(session, values)
        done = []
        for qos in session.scalars(select(Qos).where(Qos.name.in_(names)) if names else select(Qos)):
            _apply(qos, QOS_KEYS, values)
            qos.preempt_mode = _preempt_mode(qos.preempt_mode)
            done.append(f"  {qos.name}")
        return [" Modified qos...", *done] if done else []
    if kind == "cluster":
        raise AdminError("Nothing to modify on a cluster here")
    own: list[str] = []
    if kind == "user":
        for name in names or _list(where, "user", "users"):
            user = session.get(User, name)
            if user is None:
                continue
            for key, column in USER_KEYS.items():
                if key in values:
                    value = values[key]
                    if key == "adminlevel":
                        level = ADMIN_LEVELS.get(value.lower())
                        if level is None:
                            raise AdminError(f"Invalid AdminLevel '{value}'")
                        value = level
                    setattr(user, column, value)
                    own.append(f"  {name}")
    if kind == "account":
        for name in names or _list(where, "account", "accounts"):
            account = session.get(Account, name)
            if account is not None and any(k in values for k in ACCOUNT_KEYS):
                for key, column in ACCOUNT_KEYS.items():
                    if key in values:
                        setattr(account, column, values[key])
                own.append(f"  {name}")
    assocs: list[str] = []
    if _sets(ASSOC_KEYS, values):
        rows = _matching_assocs(session, kind, names, where)
        for row in rows:
            _apply(row, ASSOC_KEYS, values)
        own_rows = [r for r in rows if not r.user]
        rows += _inheritors(session, own_rows, values) if kind == "account" else []
        for row in _newest_first(session, rows):
            assocs.append(_assoc_line(session, row))
    title = "users" if kind == "user" else "accounts" if kind == "account" else "associations"
    changes = [f" Modified {title}...", *dict.fromkeys(own)] if own else []
    if assocs:
        whose = f"{kind} " if kind in ("user", "account") else ""
        changes += [f" Modified {whose}associations...", *assocs]
    return changes


def _assoc_line(session: Session, row: Association) -> str:
    """One association in a modify's answer (22.05): a user's padded to columns; an account's own
    names the parent account (`A = physics of root`)."""
    if row.user:
        return f"  C = {row.cluster:<10} A = {row.account:<20} U = {row.user:<9}"
    account = session.get(Account, row.account)
    parent = account.parent if account is not None else ""
    return f"  C = {row.cluster:<10} A = {row.account}" + (f" of {parent}" if parent else "")


def _newest_first(session: Session, rows: list[Association]) -> list[Association]:
    """`rows` in the order 22.05 lists a modify's associations: down the account tree, an account's own
    association before those under it, and under one account the newest first (Slurm places a new
    association leftmost among its siblings and answers in that order)."""
    if len(rows) < 2:
        return rows
    wanted = {row.id for row in rows}
    every = list(session.scalars(select(Association).order_by(Association.id)))
    parents = {a.name: a.parent for a in session.scalars(select(Account))}
    children: dict[tuple[str, str], list[Association]] = {}
    tops: list[Association] = []
    own = {(a.cluster, a.account): a for a in every if not a.user}
    for a in every:
        if a.user:
            key = (a.cluster, a.account)
        elif parents.get(a.account) and (a.cluster, parents[a.account]) in own:
            key = (a.cluster, parents[a.account])
        else:
            tops.append(a)
            continue
        children.setdefault(key, []).append(a)
    out: list[Association] = []

    def walk(a: Association) -> None:
        if a.id in wanted:
            out.append(a)
        if not a.user:
            for child in sorted(children.get((a.cluster, a.account), []), key=lambda c: -c.id):
                walk(child)

    for top in tops:
        walk(top)
    seen = {a.id for a in out}
    return out + [r for r in rows if r.id not in seen]


def _delete(session: Session, kind: str, names: list[str], where: dict[str, str]) -> list[str]:
    names = names or _list(where, "name", "names")
    if kind == "coordinator":
        return _delete_coordinators(session, names, _list(where, "account", "accounts"))
    changes: list[str] = []
    if kind == "qos":
        for name in names:
            if session.get(Qos, name) is not None:
                session.execute(delete(Qos).where(Qos.name == name))
                changes.append(f"  {name}")
        return changes
    if kind == "cluster":
        for name in names:
            if session.get(Cluster, name) is not None:
                session.execute(delete(Association).where(Association.cluster == name))
                session.execute(delete(Cluster).where(Cluster.name == name))
                changes.append(f"  {name}")
        return changes
    assocs = _matching_assocs(session, kind, names, where)
    for row in assocs:
        who = f"U = {row.user:<9} " if row.user else ""
        changes.append(f"  C = {row.cluster:<10} A = {row.account:<10} {who}".rstrip())
        session.delete(row)
    session.flush()
    if kind == "user":
        gone = []
        for name in dict.fromkeys([*(r.user for r in assocs), *names]):
            if session.get(User, name) is None:
                continue
            if not session.scalars(select(Association).where(Association.user == name)).first():
                session.execute(delete(User).where(User.name == name))  # left without associations
                gone.append(name)
        # 22.05's titled answer: their associations when accounts are named, else the users
        if assocs and _list(where, "account", "accounts"):
            lines = [f"  C = {r.cluster:<10} A = {r.account:<10} U = {r.user:<9}" for r in assocs]
            return [" Deleting user associations...", *lines]
        users = list(dict.fromkeys([*(r.user for r in assocs), *gone]))
        return [" Deleting users...", *(f"  {n}" for n in users)] if users else []
    if kind == "account":
        for name in names:
            if not session.scalars(select(Association).where(Association.account == name)).first():
                if session.scalars(select(Account).where(Account.parent == name)).first():
                    raise AdminError(f"Account {name} has child accounts; delete them first")
                session.execute(delete(Account).where(Account.name == name))
    return changes


def _add_coordinators(session: Session, users: list[str], accounts: list[str]) -> list[str]:
    """`add coordinator account=A names=U`: U may then act on A's (and its sub-accounts') users' jobs.
    The lines are 22.05's whole answer, its two titles included."""
    if not users or not accounts:
        raise AdminError("You need to specify a user list and account list here.")
    for name in users:
        if session.get(User, name) is None:
            raise AdminError(f"User {name} doesn't exist.")
    for name in accounts:
        if session.get(Account, name) is None:
            raise AdminError(f"Account {name} doesn't exist.")
    new = [(u, a) for u in users for a in accounts if session.get(Coordinator, (u, a)) is None]
    if not new:
        return []
    session.add_all(Coordinator(user=u, account=a) for u, a in new)
    session.flush()
    return [
        " Adding Coordinator User(s)",
        *(f"  {u}" for u in dict.fromkeys(u for u, _ in new)),
        " To Account(s) and all sub-accounts",
        *(f"  {a}" for a in dict.fromkeys(a for _, a in new)),
    ]


def _delete_coordinators(session: Session, users: list[str], accounts: list[str]) -> list[str]:
    """`delete coordinator [account=A] names=U`: without accounts, every account U coordinates."""
    if not users:
        raise AdminError("You need to specify a user list here.")
    stmt = select(Coordinator).where(Coordinator.user.in_(users))
    if accounts:
        stmt = stmt.where(Coordinator.account.in_(accounts))
    rows = list(session.scalars(stmt.order_by(Coordinator.user, Coordinator.account)))
    for row in rows:
        session.delete(row)
    session.flush()
    if not rows:
        return []
    return [
        " Removing Coordinators with user name",
        *(f"  {u}" for u in dict.fromkeys(row.user for row in rows)),
        " From Account(s)",
        *(f"  {a}" for a in dict.fromkeys(row.account for row in rows)),
        " Removed Coordinators (sub accounts not listed)...",
        *(f"  U = {row.user:<9} A = {row.account:<10}" for row in rows),
    ]


def coordinated(session: Session) -> dict[str, list[str]]:
    """user -> the accounts they coordinate, each with its sub-accounts (22.05's coordinator reach)."""
    children: dict[str, list[str]] = {}
    for account in session.scalars(select(Account)):
        children.setdefault(account.parent, []).append(account.name)
    out: dict[str, list[str]] = {}
    for row in session.scalars(select(Coordinator).order_by(Coordinator.user, Coordinator.account)):
        reach = out.setdefault(row.user, [])
        todo = [row.account]
        while todo:
            name = todo.pop()
            if name not in reach:
                reach.append(name)
                todo.extend(children.get(name, []))
    return out


def _direct_coords(session: Session) -> dict[str, str]:
    """user -> 'a,b': the accounts a user was made coordinator of (sacctmgr's Coord Accounts)."""
    out: dict[str, list[str]] = {}
    for row in session.scalars(select(Coordinator).order_by(Coordinator.account)):
        out.setdefault(row.user, []).append(row.account)
    return {user: ",".join(accounts) for user, accounts in out.items()}


# ---------------------------------------------------------------------------------- read side
def assoc_message(
    row: Association, parents: dict[str, str], inherit: Inherited | None = None
) -> pb.Association:
    """The association as ctld and sacctmgr see it: with `inherit` (from `inherited`), the limits
    it takes from above in place of its own."""
    got = inherit or Inherited(
        row.max_jobs, row.max_submit_jobs, row.max_wall_min, row.max_tres_per_job, row.max_tres_mins_per_job
    )
    return pb.Association(
        id=row.id,
        cluster=row.cluster,
        account=row.account,
        user=row.user,
        partition=row.partition,
        parent=parents.get(row.account, "") if not row.user else row.account,
        shares=row.shares,
        grp_jobs=row.grp_jobs,
        grp_submit_jobs=row.grp_submit_jobs,
        max_jobs=got.max_jobs,
        max_submit_jobs=got.max_submit_jobs,
        grp_tres=row.grp_tres,
        max_tres_per_job=got.max_tres_per_job,
        max_wall_min=got.max_wall_min,
        qos=[q for q in row.qos.split(",") if q],
        default_qos=row.default_qos,
        priority=row.priority,
        max_borrow_tres=row.max_borrow_tres,
        grp_tres_mins=row.grp_tres_mins,
        grp_tres_run_mins=row.grp_tres_run_mins,
        max_tres_mins_per_job=got.max_tres_mins_per_job,
        grp_wall_min=row.grp_wall_min,
    )


def qos_message(row: Qos) -> pb.Qos:
    return pb.Qos(
        name=row.name,
        description=row.description,
        priority=row.priority,
        preempt=row.preempt,
        preempt_mode=row.preempt_mode,
        grace_time=row.grace_time,
        flags=row.flags,
        usage_factor=row.usage_factor,
        max_wall_min=row.max_wall_min,
        max_tres_per_job=row.max_tres_per_job,
        grp_tres=row.grp_tres,
        grp_jobs=row.grp_jobs,
        max_jobs_per_user=row.max_jobs_per_user,
        max_submit_per_user=row.max_submit_per_user,
        grp_tres_mins=row.grp_tres_mins,
        grp_tres_run_mins=row.grp_tres_run_mins,
        max_tres_mins_per_job=row.max_tres_mins_per_job,
        grp_wall_min=row.grp_wall_min,
        max_tres_per_user=row.max_tres_per_user,
    )


def limits(session: Session, cluster: str, known_version: int) -> pb.GetLimitsResponse:
    """Everything ctld enforces for `cluster`, unless it already has the current version."""
    current = version(session)
    if known_version and known_version == current:
        return pb.GetLimitsResponse(version=current, changed=False)
    parents = {a.name: a.parent for a in session.scalars(select(Account))}
    out = pb.GetLimitsResponse(version=current, changed=True)
    inherit = inherited(session)
    for row in session.scalars(
        select(Association).where(Association.cluster == cluster).order_by(Association.id)
    ):
        out.associations.append(assoc_message(row, parents, inherit.get(row.id)))
    out.qos.extend(qos_message(q) for q in session.scalars(select(Qos).order_by(Qos.name)))
    coords = coordinated(session)
    for user in session.scalars(select(User).order_by(User.name)):
        out.users.add(
            name=user.name,
            default_account=user.default_account,
            admin_level=user.admin_level,
            coord_accounts=coords.get(user.name, []),
        )
    return out


def _limit(value: int) -> str:
    return "" if value < 0 else str(value)


def _wall(minutes: int) -> str:
    from shoal.timefmt import format_time_limit

    return "" if minutes < 0 else format_time_limit(minutes)


def assoc_fields(row: pb.Association) -> dict[str, str]:
    return {
        "cluster": row.cluster,
        "account": row.account,
        "user": row.user,
        "partition": row.partition,
        "share": str(row.shares),
        "priority": _limit(row.priority),
        "grpjobs": _limit(row.grp_jobs),
        "grptres": row.grp_tres,
        "grpsubmit": _limit(row.grp_submit_jobs),
        "maxjobs": _limit(row.max_jobs),
        "maxtres": row.max_tres_per_job,
        "maxsubmit": _limit(row.max_submit_jobs),
        "maxwall": _wall(row.max_wall_min),
        "qos": ",".join(row.qos),
        "defqos": row.default_qos,
        "parentname": row.parent if not row.user else "",
        "id": str(row.id),
        "maxborrowtres": row.max_borrow_tres,
        "grpwall": _wall(row.grp_wall_min),
        "grptresmins": row.grp_tres_mins,
        "maxtresmins": row.max_tres_mins_per_job,
        "grptresrunmin": row.grp_tres_run_mins,
    }


def show(session: Session, req: pb.ShowRequest) -> list[dict[str, str]]:
    """Rows for `sacctmgr show KIND`, keyed by lower-case column names."""
    kind = _kind(req.kind)
    where = {k.lower(): v for k, v in req.where.items()}
    names = _list(where, "name", "names")
    inherit = inherited(session) if kind in ("account", "user", "association") else {}
    if kind == "cluster":
        return [
            {"cluster": c.name, "controlhost": c.control_host, "share": "1", "qos": "normal"}
            for c in session.scalars(select(Cluster).order_by(Cluster.name))
            if not names or c.name in names
        ]
    if kind == "qos":
        rows = []
        for q in session.scalars(select(Qos).order_by(Qos.name)):
            if names and q.name not in names:
                continue
            rows.append(
                {
                    "name": q.name,
                    "priority": str(q.priority),
                    "gracetime": _hms(q.grace_time),
                    "preempt": q.preempt,
                    "preemptmode": q.preempt_mode,
                    "flags": q.flags,
                    "usagefactor": f"{q.usage_factor:.6f}",
                    "maxwall": _wall(q.max_wall_min),
                    "maxtres": q.max_tres_per_job,
                    "grptres": q.grp_tres,
                    "grpjobs": _limit(q.grp_jobs),
                    "maxjobspu": _limit(q.max_jobs_per_user),
                    "maxsubmitpu": _limit(q.max_submit_per_user),
                    "description": q.description,
                    "descr": q.description,
                    "grpwall": _wall(q.grp_wall_min),
                    "grptresmins": q.grp_tres_mins,
                    "maxtresmins": q.max_tres_mins_per_job,
                    "grptresrunmin": q.grp_tres_run_mins,
                    "maxtrespu": q.max_tres_per_user,
                }
            )
        return rows
    if kind == "account":
        accounts = [
            a for a in session.scalars(select(Account).order_by(Account.name)) if not names or a.name in names
        ]
        if not req.with_assoc:
            return [{"account": a.name, "descr": a.description, "org": a.organization} for a in accounts]
        out = []
        for a in accounts:
            for row in _matching_assocs(session, "association", [], {**where, "account": a.name}):
                out.append(
                    {
                        "account": a.name,
                        "descr": a.description,
                        "org": a.organization,
                        **_fields(session, row, inherit),
                    }
                )
        return out
    if kind == "user":
        users = [u for u in session.scalars(select(User).order_by(User.name)) if not names or u.name in names]
        coords = _direct_coords(session)
        if not req.with_assoc:
            return [
                {
                    "user": u.name,
                    "def acct": u.default_account,
                    "defaultaccount": u.default_account,
                    "admin": u.admin_level,
                    "adminlevel": u.admin_level,
                    "coordinatoraccounts": coords.get(u.name, ""),
                }
                for u in users
            ]
        out = []
        for u in users:  # 22.05 lists a user's associations by cluster, account and partition
            assocs = _matching_assocs(session, "user", [u.name], where)
            for row in sorted(assocs, key=lambda a: (a.cluster, a.account, a.partition)):
                out.append(
                    {
                        "def acct": u.default_account,
                        "defaultaccount": u.default_account,
                        "admin": u.admin_level,
                        "adminlevel": u.admin_level,
                        **_fields(session, row, inherit),
                    }
                )
        return out
    assocs = _matching_assocs(session, "association", [], where)
    return [_fields(session, row, inherit) for row in _tree_order(session, assocs)]


def _fields(session: Session, row: Association, inherit: dict[int, Inherited]) -> dict[str, str]:
    parents = {row.account: (session.get(Account, row.account) or Account(parent="")).parent}
    return assoc_fields(assoc_message(row, parents, inherit.get(row.id)))


def _hms(seconds: int) -> str:
    from shoal.timefmt import format_hms

    return format_hms(seconds)


def _tree_order(session: Session, rows: Iterable[Association]) -> list[Association]:
    """Associations as sacctmgr lists them: depth first through the account tree, users under accounts."""
    children: dict[str, list[str]] = {}
    for account in session.scalars(select(Account).order_by(Account.name)):
        children.setdefault(account.parent, []).append(account.name)
    order: dict[str, int] = {}

    def walk(name: str) -> None:
        order[name] = len(order)
        for child in children.get(name, []):
            walk(child)

    for top in children.get("", []):
        walk(top)
    return sorted(
        rows,
        key=lambda r: (
            r.cluster,
            order.get(r.account, len(order)),
            r.account,
            r.user != "",
            r.user,
            r.partition,
        ),
    )


def coordinator_may(session: Session, user: str, req: pb.ModifyRequest) -> bool:
    """A coordinator's own sacctmgr changes, as 22.05 lets them (measured): add or delete coordinators
    of, and modify users' associations in, accounts it coordinates (sub-accounts too). The request must
    name its accounts, all of them coordinated, and set association limits only (no AdminLevel, no
    default account)."""
    kind = _kind(req.kind)
    if not (kind == "coordinator" or (kind in ("user", "association") and req.action == "modify")):
        return False
    if kind != "coordinator" and not all(k.lower().rstrip("+-") in ASSOC_KEYS for k in req.set):
        return False
    given = {k.lower(): v for k, v in (*req.where.items(), *req.set.items())}
    accounts = _list(given, "account", "accounts")
    reach = coordinated(session).get(user, [])
    return bool(accounts) and all(a in reach for a in accounts)


def is_admin(session: Session, user: str) -> bool:
    row = session.get(User, user)
    return row is not None and row.admin_level in ("Administrator", "Operator")
