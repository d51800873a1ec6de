"""sacctmgr: view and change clusters, accounts, users, QOS and associations in shoal-dbd.

`sacctmgr [-i] [-n] [-p|-P] ACTION ENTITY [NAME...] [where K=V...] [set K=V...]`. Without -i a change
is first computed without committing, shown, and committed only when the user answers y.
`modify user|account|qos ... set RawUsage=0` goes to shoal-ctld instead, which keeps the usage.
"""

from __future__ import annotations

import select
import sys
from collections.abc import Sequence
from typing import TypeVar

from google.protobuf.message import Message

from cli.common import CommandError, run_main
from cli.options import NO_ARG, Opt, OptionError, parse_argv
from shoal import version_line
from shoal.v1 import accounting_pb2 as pb

M = TypeVar("M", bound=Message)
PROG = "sacctmgr"
ACTIONS = {
    "add": "add",
    "create": "add",
    "modify": "modify",
    "update": "modify",
    "delete": "delete",
    "remove": "delete",
    "show": "show",
    "list": "show",
}
FORMATS = {
    "association": "Cluster,Account,User,Partition,Share%9,Priority,GrpJobs%7,GrpTRES%13,GrpSubmit%9,"
    "GrpWall%11,GrpTRESMins%13,MaxJobs%7,MaxTRES%13,MaxTRESPerNode%14,MaxSubmit%9,MaxWall%11,"
    "MaxTRESMins%13,QOS%20,Def QOS%9,GrpTRESRunMins%13",
    "user": "User,Def Acct,Admin%9",
    "user_coord": "User,Def Acct,Admin%9,Coord Accounts%20",
    "user_assoc": "User,Def Acct,Admin%9,Cluster,Account,Partition,Share%9,Priority,MaxJobs%7,MaxNodes%8,"
    "MaxCPUs%8,MaxSubmit%9,MaxWall%11,MaxCPUMins%11,QOS%20,Def QOS%9",
    "account": "Account,Descr%20,Org%20",
    # 22.05's default columns; those shoal does not keep (PreemptExemptTime, UsageThres, GrpSubmit,
    # MaxTRESPerNode, the per-account limits, MinTRES) stay empty, as they are for a QOS without them
    "qos": "Name,Priority,GraceTime,Preempt,PreemptExemptTime%19,PreemptMode%11,Flags%40,UsageThres,UsageFactor%11,"
    "GrpTRES%13,GrpTRESMins%13,GrpTRESRunMins%13,GrpJobs%7,GrpSubmit%9,GrpWall%11,MaxTRES%13,"
    "MaxTRESPerNode%14,MaxTRESMins%13,MaxWall%11,MaxTRESPU%13,MaxJobsPU%9,MaxSubmitPU%11,MaxTRESPA%13,"
    "MaxJobsPA%9,MaxSubmitPA%11,MinTRES%13",
    "cluster": "Cluster,ControlHost%15,Share%9,QOS%20",
}
ALIASES = {
    "coordaccounts": "coordinatoraccounts",
    "coord": "coordinatoraccounts",
    "coordinators": "coordinatoraccounts",
    "defacct": "defaultaccount",
    "admin": "adminlevel",
    "fairshare": "share",
    "maxtresperjob": "maxtres",
    "grpsubmitjobs": "grpsubmit",
    "maxsubmitjobs": "maxsubmit",
    "defaultqos": "defqos",
    "maxwalldurationperjob": "maxwall",
    "description": "descr",
    "organization": "org",
    "parent": "parentname",
    "par name": "parentname",
    "parname": "parentname",
    "grptresrunmins": "grptresrunmin",
    "maxtresminsperjob": "maxtresmins",
    "maxtresminsperjobs": "maxtresmins",
    "maxtresperuser": "maxtrespu",
}
# Slurm's own title for each column, whatever case format= typed it in (22.05: `format=name,maxtrespu`
# prints Name|MaxTRESPU); a name not here keeps the typed text.
HEADERS = {
    "coordinatoraccounts": "Coord Accounts",
    "cluster": "Cluster",
    "account": "Account",
    "user": "User",
    "partition": "Partition",
    "share": "Share",
    "priority": "Priority",
    "grpjobs": "GrpJobs",
    "grptres": "GrpTRES",
    "grpsubmit": "GrpSubmit",
    "grpwall": "GrpWall",
    "grptresmins": "GrpTRESMins",
    "grptresrunmin": "GrpTRESRunMins",
    "maxjobs": "MaxJobs",
    "maxtres": "MaxTRES",
    "maxtrespernode": "MaxTRESPerNode",
    "maxsubmit": "MaxSubmit",
    "maxwall": "MaxWall",
    "maxtresmins": "MaxTRESMins",
    "maxnodes": "MaxNodes",
    "maxcpus": "MaxCPUs",
    "maxcpumins": "MaxCPUMins",
    "qos": "QOS",
    "defqos": "Def QOS",
    "parentname": "ParentName",
    "id": "ID",
    "lft": "LFT",
    "rgt": "RGT",
    "maxborrowtres": "MaxBorrowTRES",
    "name": "Name",
    "gracetime": "GraceTime",
    "preempt": "Preempt",
    "preemptexempttime": "PreemptExemptTime",
    "preemptmode": "PreemptMode",
    "flags": "Flags",
    "usagethres": "UsageThres",
    "usagefactor": "UsageFactor",
    "maxtrespu": "MaxTRESPU",
    "maxjobspu": "MaxJobsPU",
    "maxsubmitpu": "MaxSubmitPU",
    "maxtrespa": "MaxTRESPA",
    "maxjobspa": "MaxJobsPA",
    "maxsubmitpa": "MaxSubmitPA",
    "mintres": "MinTRES",
    "descr": "Descr",
    "org": "Org",
    "defaultaccount": "Def Acct",
    "adminlevel": "Admin",
    "controlhost": "ControlHost",
    "controlport": "ControlPort",
    "rpc": "RPC",
    "nodecount": "NodeCount",
    "nodenames": "NodeName",
    "tres": "TRES",
    "classification": "Class",
}
VERBS = {"add": "Adding", "delete": "Deleting"}
TITLES = {
    "account": "Account",
    "user": "User",
    "qos": "QOS",
    "cluster": "Cluster",
    "association": "Association",
    "coordinator": "Coordinator",
}
# 22.05's plural in " Problem adding accounts: ..." (a user's add refused after its plan)
PLURALS = {
    "account": "accounts",
    "user": "users",
    "qos": "QOS",
    "cluster": "clusters",
    "association": "associations",
    "coordinator": "coordinators",
}
# 22.05's options (getopt_long: they may come anywhere, short ones together); quiet, verbose and
# readonly change nothing here
OPTIONS = tuple(
    Opt(dest, (dest,), short, NO_ARG)
    for dest, short in (
        ("immediate", "i"),
        ("noheader", "n"),
        ("parsable2", "P"),
        ("parsable", "p"),
        ("quiet", "Q"),
        ("verbose", "v"),
        ("readonly", "r"),
        ("help", "h"),
        ("version", "V"),
    )
)
NOT_ADMIN = "Your user doesn't have privilege to perform this action"
DENIED = "Access/permission denied"


def _kind(text: str) -> str:
    text = text.lower()
    for kind in ("cluster", "account", "user", "qos", "association", "coordinator"):
        if text == kind or text == kind + "s" or text in ("assoc", "assocs") and kind == "association":
            return kind
    raise CommandError(f"Unknown entity '{text}'")


def parse_args(words: Sequence[str]) -> tuple[str, str, list[str], dict[str, str], dict[str, str], list[str]]:
    """(action, kind, names, where, set, flags) from sacctmgr's words."""
    if len(words) < 2:
        raise CommandError("You need to give an action and an entity, e.g. 'sacctmgr show assoc'")
    action = ACTIONS.get(words[0].lower())
    if action is None:
        raise CommandError(f"Unknown action '{words[0]}'")
    kind = _kind(words[1])
    names: list[str] = []
    where: dict[str, str] = {}
    values: dict[str, str] = {}
    flags: list[str] = []
    mode = ""
    for word in words[2:]:
        low = word.lower()
        if low in ("where", "set"):
            mode = low
            continue
        if "=" not in word:
            if low in ("withassoc", "withcoord", "withdeleted", "tree"):
                flags.append(low)
            else:
                names.extend(n for n in word.split(",") if n)
            continue
        key, _, value = word.partition("=")
        key = key.lower()
        if key.rstrip("+-") not in ("qos", "flags", "preempt"):  # lists take qos+=x / qos-=x
            key = key.rstrip("+-")
        if key in ("name", "names") and mode != "set":
            names.extend(n for n in value.split(",") if n)
        elif mode == "set" or (mode == "" and action == "add"):
            values[key] = value
        else:
            where[key] = value
    return action, kind, names, where, values, flags


def parse_format(text: str) -> list[tuple[str, str, int]]:
    """'cluster,Account%20' -> [(header, key, width)]: Slurm's header for a name it knows, in any case."""
    out = []
    for item in [i for i in text.split(",") if i]:
        name, _, width = item.partition("%")
        key = name.lower().replace(" ", "")
        key = ALIASES.get(key, key)
        header = HEADERS.get(key, name)
        out.append((header, key, int(width) if width.isdigit() else _default_width(key)))
    return out


def _default_width(key: str) -> int:
    """A column's width when format= gives none: the one the default layouts use for it, else 10
    (QOS Flags: 20, though the default QOS listing gives it 40, as Slurm's)."""
    if key == "flags":
        return 20
    for layout in FORMATS.values():
        for item in layout.split(","):
            name, _, width = item.partition("%")
            if (
                width.isdigit()
                and ALIASES.get(name.lower().replace(" ", ""), name.lower().replace(" ", "")) == key
            ):
                return int(width)
    return 10


def render(
    rows: Sequence[dict[str, str]], fields: list[tuple[str, str, int]], *, parsable: str, header: bool
) -> list[str]:
    lines = []
    if parsable:
        end = "|" if parsable == "p" else ""
        if header:
            lines.append("|".join(h for h, _, _ in fields) + end)
        lines.extend("|".join(r.get(k, "") for _, k, _ in fields) + end for r in rows)
        return lines

    def cell(value: str, width: int) -> str:
        return (value[: width - 1] + "+" if len(value) > width else value).rjust(width)

    if header:  # a title is cut to its column, without the "+" that marks a cut value
        lines.append(" ".join(h[:w].rjust(w) for h, _, w in fields) + " ")
        lines.append(" ".join("-" * w for _, _, w in fields) + " ")
    lines.extend(" ".join(cell(r.get(k, ""), w) for _, k, w in fields) + " " for r in rows)
    return lines


def _call(method: str, request: Message, response_type: type[M]) -> M:
    from shoal.agent.client import AgentError, call

    try:
        return call(f"/shoal.v1.Accounting/{method}", request, response_type, target="dbd")
    except AgentError as exc:
        raise CommandError(exc.message) from exc


def _confirm(question: str = "commit changes") -> bool:
    sys.stdout.write(f"Would you like to {question}? (You have 30 seconds to decide)\n(N/y): ")
    sys.stdout.flush()
    ready, _, _ = select.select([sys.stdin], [], [], 30.0)
    answer = sys.stdin.readline().strip().lower() if ready else ""
    sys.stdout.write("\n")
    return answer in ("y", "yes")


def reset_usage(kind: str, names: list[str], where: dict[str, str], value: str, immediate: bool) -> int:
    """`modify user|account|qos ... set RawUsage=0`: clear fair-share usage in ctld (22.05's checks, in
    its order, and its words; other keys given beside it are ignored, as there)."""
    from cli.common import ctld
    from shoal.v1 import controller_pb2

    text = value.strip()
    if not (text == "" or text.lstrip("+-").isdigit()):
        sys.stderr.write(
            f"{PROG}: error: Invalid value for RawUsage ({value})\n You didn't give me anything to set\n"
        )
        return 1
    accounts = [a for a in (where.get("account") or where.get("accounts") or "").split(",") if a]
    if kind == "user" and not accounts:
        raise CommandError("An account must be specified")
    if kind in ("account", "qos") and not names:
        raise CommandError("An association name is required to remove usage")
    if int(text or "0") != 0:
        raise CommandError("Raw usage can only be set to 0 (zero)")
    req = controller_pb2.ResetUsageRequest(
        kind=kind,
        users=names if kind == "user" else [],
        accounts=names if kind == "account" else accounts,
        qos=names if kind == "qos" else [],
        cluster=where.get("cluster", "") or where.get("clusters", ""),
    )
    resp = ctld("ResetUsage", req, controller_pb2.ResetUsageResponse)
    if not req.cluster:
        sys.stdout.write(f"No cluster specified, resetting on local cluster {resp.cluster_name}\n")
    if not immediate and not _confirm("reset usage"):
        sys.stdout.write(" Changes Discarded\n")
        return 0
    req.commit = True
    try:
        ctld("ResetUsage", req, controller_pb2.ResetUsageResponse)
    except CommandError as exc:
        if exc.message == DENIED:
            return 1  # 22.05 says nothing more to a user who may not
        raise
    return 0


def main(argv: list[str] | None = None) -> int:
    def body() -> int:
        given = list(sys.argv[1:] if argv is None else argv)
        immediate = parsable = ""
        header = True
        # options may come anywhere, as with Slurm's getopt (`sacctmgr show qos -P`, `-Pn`)
        try:
            found, words = parse_argv(PROG, given, OPTIONS, stop_at_positional=False)
        except OptionError as exc:
            sys.stderr.write("".join(line + "\n" for line in exc.lines))
            return exc.exit_code
        for opt in (f.opt.dest for f in found):
            if opt == "immediate":
                immediate = "i"
            elif opt == "noheader":
                header = False
            elif opt in ("parsable2", "parsable"):
                parsable = "P" if opt == "parsable2" else "p"
            elif opt == "help":
                print(__doc__)
                return 0
            elif opt == "version":
                print(version_line())
                return 0
        action, kind, names, where, values, flags = parse_args(words)
        if action == "modify" and "rawusage" in values and kind in ("user", "account", "qos"):
            return reset_usage(kind, names, where, values["rawusage"], bool(immediate))
        if action == "show":
            fmt = where.pop("format", "") or values.pop("format", "")
            with_assoc = "withassoc" in flags
            req = pb.ShowRequest(kind=kind, where=where, with_assoc=with_assoc)
            if names:
                req.where["names"] = ",".join(names)
            try:
                resp = _call("Show", req, pb.ShowResponse)
            except CommandError as exc:
                if exc.message != DENIED:
                    raise
                # 22.05 under slurmdbd.conf PrivateData (accounts): the refusal, then this line
                sys.stderr.write(f"{PROG}: error: {DENIED}\n Problem with query.\n")
                return 1
            key = "user_assoc" if kind == "user" and with_assoc else kind
            if kind == "user" and not with_assoc and "withcoord" in flags:
                key = "user_coord"
            fields = parse_format(fmt or FORMATS[key])
            for line in render([dict(r.fields) for r in resp.rows], fields, parsable=parsable, header=header):
                sys.stdout.write(line + "\n")
            return 0
        req_m = pb.ModifyRequest(
            action=action, kind=kind, names=names, where=where, set=values, commit=bool(immediate)
        )
        try:
            resp_m = _call("Modify", req_m, pb.ModifyResponse)
        except CommandError as exc:
            if exc.message != NOT_ADMIN:
                raise
            sys.stderr.write(f"{PROG}: error: {NOT_ADMIN}\n Error with request: {DENIED}\n")  # as 22.05
            return 1
        if resp_m.denied:  # 22.05: a user's add shows its plan, then the refusal, without asking
            sys.stdout.write(f" Adding {TITLES[kind]}(s)\n" + "".join(line + "\n" for line in resp_m.changes))
            sys.stderr.write(f" Problem adding {PLURALS[kind]}: {DENIED}\n")
            return 1
        if not resp_m.changes:
            sys.stdout.write(
                " Nothing new added.\n"
                if action == "add"
                else f" Nothing {'modified' if action == 'modify' else 'deleted'}\n"
            )
            return 0 if action == "add" else 1  # 22.05: a modify or delete that matched nothing fails
        if kind == "coordinator" or action == "modify" or (action, kind) == ("delete", "user"):
            pass  # dbd's lines are 22.05's whole answer, titles included
        elif action == "add":
            sys.stdout.write(f" Adding {TITLES[kind]}(s)\n")
        else:
            sys.stdout.write(f" {VERBS[action]} {kind}(s)...\n")
        for line in resp_m.changes:
            sys.stdout.write(line + "\n")
        if immediate:
            return 0
        if not _confirm():
            sys.stdout.write(" Changes Discarded\n")
            return 0
        req_m.commit = True
        _call("Modify", req_m, pb.ModifyResponse)
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    raise SystemExit(main())
