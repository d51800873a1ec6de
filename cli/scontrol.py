"""scontrol: show cluster objects, update jobs and nodes, hold/release/requeue/suspend/resume jobs, reconfigure, ping.

The `show` formatting lives in cli/show.py (loaded only for `show job|node|partition|config|topology`);
this module parses the command line, calls the controller and reports errors in Slurm's words.
`show hostnames` and `show hostlist` work without a controller.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from cli.options import NO_ARG, Opt, OptionError, parse_argv, version_line

if TYPE_CHECKING:
    from shoal.v1 import common_pb2, controller_pb2

PROG = "scontrol"

OPTIONS: tuple[Opt, ...] = (
    Opt("all", ("all",), "a", NO_ARG),
    Opt("details", ("details",), "d", NO_ARG),
    Opt("help", ("help",), "h", NO_ARG),
    Opt("oneliner", ("oneliner",), "o", NO_ARG),
    Opt("quiet", ("quiet",), "Q", NO_ARG),
    Opt("usage", ("usage",), arg=NO_ARG),
    Opt("verbose", ("verbose",), "v", NO_ARG),
    Opt("version", ("version",), "V", NO_ARG),
)

HELP = """\
Usage: scontrol [-o] [-d] [-Q] [-v] [-V] COMMAND ...

Commands:
  show job|jobs [id]            show jobs (all, or one)
  show node|nodes [name]        show nodes
  show partition[s] [name]      show partitions
  show config                   show the controller's configuration
  show topology [name]          show the network switches (topology/tree)
  show hostnames [hostlist]     expand a hostlist (default $SLURM_JOB_NODELIST)
  show hostlist names           compress host names into a hostlist
  show hostlistsorted names     the same, sorted
  update JobId=id KEY=VALUE...  change a job (TimeLimit, Partition, Name ...)
  update NodeName=hosts State=DRAIN|DOWN|RESUME|IDLE|UNDRAIN|CANCEL_REBOOT Reason="..."
  hold|uhold|release ids        hold (as admin or user) or release pending jobs
  requeue|requeuehold ids       requeue jobs (and hold them)
  suspend|resume ids            stop running jobs in place, and continue them (operators)
  top ids                       move jobs to the top of the user's queue
  create reservation KEY=VALUE...  ReservationName StartTime Duration|EndTime Nodes|NodeCnt
                                [PartitionName] Users|Accounts [Flags=MAINT,IGNORE_JOBS,FLEX,DAILY]
  update ReservationName=name KEY=VALUE...  (Users+=u, Users-=u, Accounts+=/-=, Flags-=)
  delete reservation name       delete a reservation
  show reservation[s] [name]    show reservations
  token [lifespan=N] [username=U]  a JWT for shoal-restd (AuthAltTypes=auth/jwt)
  ping                          is each controller (SlurmctldHost) up?
  reconfigure                   re-read slurm.conf in ctld and every node (operators)
  reboot [ASAP] [nextstate=resume|down] [reason=...] NODES|ALL
                                reboot nodes once idle, with RebootProgram (operators)
  cancel_reboot NODES           cancel a reboot not issued yet (operators)
  takeover [INDEX]              the backup INDEX (default 1) takes over from the primary (operators)
  version                       print the version

Options:
  -o, --oneliner                one line per record
  -d, --details                 more details
  -Q, --quiet                   print no error messages
  -v, --verbose                 more messages
  -V, --version                 print the version
  -h, --help                    this help
"""

JOB_KEYS = {
    k.lower(): k
    for k in (
        "Account", "ArrayTaskThrottle", "Comment", "Contiguous", "CPUsPerTask", "Deadline",
        "Dependency", "EligibleTime", "ExcNodeList", "Features", "Gres", "Licenses", "MailType",
        "MailUser", "MinCPUsNode", "MinMemoryCPU", "MinMemoryNode", "Name", "Nice", "NumCPUs",
        "NumNodes", "NumTasks", "Partition", "Priority", "QOS", "ReqNodeList", "Requeue",
        "Reservation", "SiteFactor", "StartTime", "StdOut", "TimeLimit", "TimeMin", "WCKey", "WorkDir",
    )
}  # fmt: skip
SITE_FACTOR_MAX = 2_147_483_645  # Slurm's bound on `update job SiteFactor=` (either sign)
JOB_ALIASES = {"jobname": "Name", "reqnodes": "NumNodes", "nodelist": "ReqNodeList"}
NODE_KEYS = {
    k.lower(): k
    for k in (
        "State",
        "Reason",
        "Features",
        "AvailableFeatures",
        "ActiveFeatures",
        "Gres",
        "Weight",
        "Comment",
    )
}
NODE_STATES = (
    "DRAIN",
    "RESUME",
    "DOWN",
    "IDLE",
    "UNDRAIN",
    "FAIL",
    "NORESP",
    "FUTURE",
    "POWER_DOWN",
    "POWER_UP",
    "CANCEL_REBOOT",
)
NEEDS_REASON = ("DRAIN", "DOWN", "FAIL")

_JOB_ID = re.compile(r"\d+(_(\d+|\*|\[[0-9,\-%]+\]))?")


class Failure(Exception):
    """Lines for stderr (already in Slurm's form), then exit 1."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = lines


@dataclass
class Flags:
    oneliner: bool = False
    details: bool = False
    all: bool = False  # -a: Hidden partitions too
    quiet: bool = False


def matches(word: str, full: str, least: int) -> bool:
    """Slurm's keyword abbreviations: a case-insensitive prefix at least `least` long."""
    w = word.lower()
    return full.startswith(w) and len(w) >= min(least, len(full))


# --- entry -----------------------------------------------------------------------------------


def run(argv: Sequence[str]) -> int:
    # options anywhere on the line, as 22.05's getopt_long takes them (`scontrol show job -d 12`)
    found, rest = parse_argv(PROG, argv, OPTIONS, stop_at_positional=False)
    flags = Flags()
    for item in found:
        dest = item.opt.dest
        if dest in ("help", "usage"):
            sys.stdout.write(HELP)
            return 0
        if dest == "version":
            print(version_line())
            return 0
        if dest == "oneliner":
            flags.oneliner = True
        elif dest == "details":
            flags.details = True
        elif dest == "all":
            flags.all = True
        elif dest == "quiet":
            flags.quiet = True
    if not rest:
        raise Failure("No command given (interactive mode is not supported)")
    try:
        return dispatch(rest[0], list(rest[1:]), flags)
    except Failure:
        if flags.quiet:
            return 1
        raise


def dispatch(word: str, args: list[str], flags: Flags) -> int:
    commands: list[tuple[str, int, Callable[[list[str], Flags], int]]] = [
        ("show", 3, cmd_show),
        ("update", 1, cmd_update),
        ("hold", 2, lambda a, f: cmd_job_action("hold", a, f)),
        ("uhold", 2, lambda a, f: cmd_job_action("uhold", a, f)),
        ("holdu", 5, lambda a, f: cmd_job_action("uhold", a, f)),
        ("release", 3, lambda a, f: cmd_job_action("release", a, f)),
        ("requeue", 3, lambda a, f: cmd_job_action("requeue", a, f)),
        ("requeuehold", 8, lambda a, f: cmd_job_action("requeuehold", a, f)),
        ("top", 3, lambda a, f: cmd_job_action("top", a, f)),
        ("suspend", 2, lambda a, f: cmd_job_action("suspend", a, f)),
        ("resume", 3, lambda a, f: cmd_job_action("resume", a, f)),
        ("ping", 2, cmd_ping),
        ("reconfigure", 3, cmd_reconfigure),
        ("reboot", 3, cmd_reboot),
        ("reboot_nodes", 7, cmd_reboot),
        ("cancel_reboot", 3, cmd_cancel_reboot),
        ("takeover", 5, cmd_takeover),
        ("version", 4, cmd_version),
        ("create", 2, cmd_create),
        ("delete", 3, cmd_delete),
        ("token", 5, cmd_token),
    ]
    exact = [c for c in commands if c[0] == word.lower()]
    chosen = exact or [c for c in commands if matches(word, c[0], c[1])]
    if len(chosen) != 1:
        raise Failure(f"invalid keyword: {word}")
    return chosen[0][2](args, flags)


def cmd_version(args: list[str], flags: Flags) -> int:
    print(version_line())
    return 0


# --- show ------------------------------------------------------------------------------------


def cmd_show(args: list[str], flags: Flags) -> int:
    if not args:
        raise Failure("too few arguments for keyword:show")
    entity, rest = args[0], args[1:]
    name = rest[0] if rest else ""
    if matches(entity, "hostnames", 5) or entity.lower() == "hostname":
        return show_hostnames(name)
    if entity.lower() == "hostlistsorted" or matches(entity, "hostlistsorted", 9):
        return show_hostlist(name, sort=True)
    if matches(entity, "hostlist", 5):
        return show_hostlist(name, sort=False)
    if matches(entity, "jobs", 3):
        return show_jobs(name, flags)
    if matches(entity, "nodes", 3):
        return show_nodes(name, flags)
    if matches(entity, "steps", 4):
        from cli.common import CommandError
        from cli.stepshow import StepNotFound, show_steps

        try:
            records = show_steps(name)
        except StepNotFound as exc:
            print(exc.message)
            return 1
        except CommandError as exc:
            raise Failure(exc.message) from exc
        if not records:
            print("No job steps in the system")
        _emit(records, flags)
        return 0
    if matches(entity, "partitions", 3):
        return show_partitions(name, flags)
    if matches(entity, "config", 3):
        return show_config(flags)
    if matches(entity, "topology", 3):
        return show_topology(name)
    if matches(entity, "reservations", 3):
        from cli import reservations

        _emit(_reservation_call(lambda: reservations.show(name)), flags)
        return 0
    raise Failure(f"invalid entity:{entity} for keyword:show ")


def show_hostnames(expr: str) -> int:
    from shoal.hostlist import HostlistError, expand

    expr = expr or os.environ.get("SLURM_JOB_NODELIST", "")
    if not expr:
        raise Failure(f"{PROG}: error: host list is empty")
    try:
        names = expand(expr)
    except HostlistError as exc:
        raise Failure(f"{PROG}: error: {exc}") from exc
    for name in names:
        print(name)
    return 0


def show_hostlist(expr: str, sort: bool) -> int:
    from shoal.hostlist import HostlistError, collect, expand

    if not expr:
        raise Failure(f"{PROG}: error: host list is empty")
    try:
        names = expand(expr)
    except HostlistError as exc:
        raise Failure(f"{PROG}: error: {exc}") from exc
    print(collect(names) if sort else compress_in_order(names))
    return 0


_NAME_NUM = re.compile(r"(.*?)(\d+)$")


def compress_in_order(names: Sequence[str]) -> str:
    """Slurm's unsorted `show hostlist`: consecutive numbers merge into ranges, order is kept,
    and neighbouring ranges with one prefix share a bracket ("n1,n2,n3,n7" -> "n[1-3,7]")."""
    runs: list[tuple[str, int, int, int]] = []  # prefix, width, low, high
    plain: list[str | None] = []  # names without a number, in place of a run (None = a run)
    for name in names:
        m = _NAME_NUM.match(name)
        if m is None:
            plain.append(name)
            runs.append(("", -1, 0, 0))
            continue
        prefix, digits = m.group(1), m.group(2)
        width = len(digits) if digits.startswith("0") else 0
        num = int(digits)
        last = runs[-1] if runs else None
        if last and plain[-1] is None and last[0] == prefix and last[1] == width and num == last[3] + 1:
            runs[-1] = (prefix, width, last[2], num)
            continue
        runs.append((prefix, width, num, num))
        plain.append(None)
    out: list[str] = []
    i = 0
    while i < len(runs):
        if plain[i] is not None:
            out.append(str(plain[i]))
            i += 1
            continue
        prefix = runs[i][0]
        group: list[str] = []
        while i < len(runs) and plain[i] is None and runs[i][0] == prefix:
            _, width, low, high = runs[i]
            group.append(f"{low:0{width}d}" if low == high else f"{low:0{width}d}-{high:0{width}d}")
            i += 1
        single = len(group) == 1 and "-" not in group[0]
        out.append(f"{prefix}{group[0]}" if single else f"{prefix}[{','.join(group)}]")
    return ",".join(out)


def _emit(records: Sequence[str], flags: Flags) -> None:
    """Print show records: blank-line separated, or one line each with -o."""
    for text in records:
        if flags.oneliner:
            print(" ".join(part.strip() for part in text.splitlines() if part.strip()))
        else:
            sys.stdout.write(text.rstrip("\n") + "\n\n")


def show_jobs(job_id: str, flags: Flags) -> int:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    if job_id.lower().startswith("jobid="):
        job_id = job_id[6:]
    request = controller_pb2.GetJobsRequest(include_finished=True)
    if job_id:
        if not _JOB_ID.fullmatch(job_id):
            raise Failure(f"Invalid job id specified: {job_id}")
        request.job_id_strs.append(job_id)
    try:
        resp = ctld("GetJobs", request, controller_pb2.GetJobsResponse)
    except CommandError as exc:
        raise Failure(f"slurm_load_jobs error: {exc.message}") from exc
    if not resp.jobs:
        if job_id:
            raise Failure("slurm_load_jobs error: Invalid job id specified")
        print("No jobs in the system")
        return 0
    from cli.show import format_job, merge_pending_array_tasks

    _emit([format_job(job, resp.now, flags.details) for job in merge_pending_array_tasks(resp.jobs)], flags)
    return 0


def show_nodes(name: str, flags: Flags) -> int:
    from cli.common import CommandError, ctld
    from shoal.hostlist import HostlistError, expand
    from shoal.v1 import controller_pb2

    try:
        names = expand(name) if name else []
    except HostlistError as exc:
        raise Failure(f"Node {name} not found") from exc
    try:
        resp = ctld("GetNodes", controller_pb2.GetNodesRequest(names=names), controller_pb2.GetNodesResponse)
    except CommandError as exc:
        raise Failure(f"slurm_load_node error: {exc.message}") from exc
    if not resp.nodes:
        if name:
            raise Failure(f"Node {name} not found")
        print("No nodes in the system")
        return 0
    from cli.show import format_node

    _emit([format_node(node, resp.now, flags.details) for node in resp.nodes], flags)
    return 0


def show_partitions(name: str, flags: Flags) -> int:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    # the nodes come along (one round trip): TRES= sums their memory and GPUs, as 22.05 prints it
    request = controller_pb2.GetNodesRequest(with_partitions=True)
    try:
        resp = ctld("GetNodes", request, controller_pb2.GetNodesResponse)
    except CommandError as exc:
        raise Failure(f"slurm_load_partitions error: {exc.message}") from exc
    partitions = [
        p
        for p in resp.partitions
        if (not name or p.name == name) and (flags.all or not (p.hidden or p.unavailable))
    ]
    if not partitions:
        if name:
            raise Failure(f"Partition {name} not found")
        print("No partitions in the system")
        return 0
    from cli.show import format_partition

    _emit([format_partition(p, resp.nodes) for p in partitions], flags)
    return 0


def show_config(flags: Flags) -> int:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    try:
        resp = ctld("GetConfig", controller_pb2.GetConfigRequest(), controller_pb2.GetConfigResponse)
    except CommandError as exc:
        raise Failure(f"slurm_load_ctl_conf error: {exc.message}") from exc
    from cli.show import format_config

    text = format_config(resp)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    print()  # then the controller's state, as 22.05 ends the listing: "Slurmctld(primary) at vm is UP"
    cmd_ping([], flags)
    return 0


def show_topology(name: str) -> int:
    """One line per switch (topology/tree); with a name, that switch or the switches above that node.

    As Slurm, "nothing to show" is an error message with exit code 0.
    """
    from cli.common import CommandError, ctld
    from shoal.hostlist import expand
    from shoal.v1 import controller_pb2

    try:
        resp = ctld("GetConfig", controller_pb2.GetConfigRequest(), controller_pb2.GetConfigResponse)
    except CommandError as exc:
        raise Failure(f"slurm_load_topo error: {exc.message}") from exc
    if not resp.switches:
        print(f"{PROG}: error: No topology information available", file=sys.stderr)
        return 0
    switches = list(resp.switches)
    if name:
        switches = [s for s in switches if s.name == name] or [s for s in switches if name in expand(s.nodes)]
        if not switches:
            print(
                f"{PROG}: error: Topology information contains no switch or node named {name}",
                file=sys.stderr,
            )
            return 0
    from cli.show import format_switch

    for switch in switches:
        print(format_switch(switch))
    return 0


# --- update ----------------------------------------------------------------------------------


def split_pairs(args: Sequence[str]) -> list[tuple[str, str]]:
    """KEY=VALUE words (also `KEY VALUE`), keys as typed."""
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        word = args[i]
        key, eq, value = word.partition("=")
        if eq:
            pairs.append((key, value))
            i += 1
        elif i + 1 < len(args):
            pairs.append((word, args[i + 1]))
            i += 2
        else:
            raise Failure(f"Invalid input: {word}", "Request aborted")
    return pairs


def cmd_update(args: list[str], flags: Flags) -> int:
    if args and args[0].lower() in ("job", "node", "nodes"):
        entity = args[0].lower()
        args = args[1:]
        # `update job 12 TimeLimit=..`: a bare id right after the entity word.
        if entity == "job" and args and "=" not in args[0] and _JOB_ID.fullmatch(args[0]):
            args = [f"JobId={args[0]}", *args[1:]]
        if entity.startswith("node") and args and "=" not in args[0]:
            args = [f"NodeName={args[0]}", *args[1:]]
    if not args:
        raise Failure("too few arguments for keyword:update")
    pairs = split_pairs(args)
    keys = {k.lower() for k, _ in pairs}
    if keys & {"jobid", "job"}:  # (Reservation= is then the job's field)
        return update_job(pairs, flags)
    if keys & {"reservationname", "reservation"}:
        from cli import reservations

        return _reservation_call(lambda: reservations.update(pairs))
    if keys & {"nodename", "node"}:
        return update_node(pairs, flags)
    raise Failure(
        "No valid entity in update command",
        'Input line must include "NodeName", "PartitionName", "Reservation=<reservation_name>", or "JobId"',
    )


def update_job(pairs: list[tuple[str, str]], flags: Flags) -> int:
    from shoal.v1 import common_pb2, controller_pb2

    job_ids: list[str] = []
    fields: list[common_pb2.KeyValue] = []
    for key, value in pairs:
        low = key.lower()
        if low in ("jobid", "job"):
            job_ids.extend(v for v in value.split(",") if v)
            continue
        canon = JOB_KEYS.get(low) or JOB_ALIASES.get(low)
        if canon is None:
            raise Failure(f"Update of this parameter is not supported: {key}={value}", "Request aborted")
        if canon in ("TimeLimit", "TimeMin"):
            _check_time(canon, value)
        if canon == "SiteFactor":
            value = str(_site_factor(value))
        fields.append(common_pb2.KeyValue(key=canon, value=value))
    for job_id in job_ids:
        if not _JOB_ID.fullmatch(job_id):
            raise Failure(f"Invalid job id specified for job {job_id}")
    if not fields:
        raise Failure("No changes specified")
    request = controller_pb2.UpdateJobRequest(job_ids=job_ids, action="update", fields=fields)
    return _send_job_update(request, flags, lambda jid, msg: f"slurm_update error: {msg}")


def _site_factor(value: str) -> int:
    """SiteFactor as Slurm's scontrol reads it: the leading integer (0 without one), within +/- 2^31-3."""
    match = re.match(r"\s*([+-]?\d+)", value)
    site = int(match.group(1)) if match else 0
    if abs(site) > SITE_FACTOR_MAX:
        raise Failure(f"{PROG}: error: SiteFactor value out of range (+/- {SITE_FACTOR_MAX}). Value ignored")
    return site


def _check_time(key: str, value: str) -> None:
    from shoal.timefmt import parse_time_limit

    text = value[1:] if value[:1] in ("+", "-") and key == "TimeLimit" else value
    try:
        parse_time_limit(text)
    except ValueError as exc:
        raise Failure(f"{PROG}: error: Invalid {key} value") from exc


def update_node(pairs: list[tuple[str, str]], flags: Flags) -> int:
    from cli.common import CommandError, ctld
    from shoal.v1 import common_pb2, controller_pb2

    nodes = ""
    fields: list[common_pb2.KeyValue] = []
    state = ""
    reason = ""
    for key, value in pairs:
        low = key.lower()
        if low in ("nodename", "node"):
            nodes = value
            continue
        canon = NODE_KEYS.get(low)
        if canon is None:
            raise Failure(f"Update of this parameter is not supported: {key}={value}", "Request aborted")
        if canon == "State":
            state = value.upper()
            if state not in NODE_STATES:
                raise Failure(
                    f"Invalid input: {key}={value}",
                    "Request aborted",
                    "Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN",
                    "Not all states are valid given a node's prior state",
                )
            value = "NoResp" if state == "NORESP" else state
        if canon == "Reason":
            reason = value
        fields.append(common_pb2.KeyValue(key=canon, value=value))
    if state in NEEDS_REASON and not reason:
        raise Failure("You must specify a reason when DOWNING or DRAINING a node. Request denied")
    if not fields:
        raise Failure("No changes specified")
    try:
        ctld(
            "UpdateNode",
            controller_pb2.UpdateNodeRequest(nodes=nodes, fields=fields),
            controller_pb2.UpdateNodeResponse,
        )
    except CommandError as exc:
        raise Failure("" if flags.quiet else f"slurm_update error: {exc.message}") from exc
    return 0


# --- reboot ----------------------------------------------------------------------------------

REBOOT_NEXT_STATES = ("DOWN", "RESUME")


@dataclass
class RebootRequest:
    nodes: str = ""
    asap: bool = False
    next_state: str = ""
    reason: str = ""


def parse_reboot(args: Sequence[str]) -> RebootRequest:
    """`reboot [ASAP] [nextstate=resume|down] [reason=...] NODELIST|ALL`, refused in 22.05's words."""
    req = RebootRequest()
    for word in args:
        key, eq, value = word.partition("=")
        if not eq and key.lower() == "asap":
            req.asap = True
        elif eq and key.lower() == "nextstate":
            if value.upper() not in REBOOT_NEXT_STATES:
                raise Failure(f"Invalid state: {value}", f"Valid states: {', '.join(REBOOT_NEXT_STATES)}")
            req.next_state = value.upper()
        elif eq and key.lower() == "reason":
            if not value:
                raise Failure("missing reason")
            req.reason = value
        elif req.nodes:
            raise Failure("too many arguments for keyword:reboot")
        else:
            req.nodes = word
    if not req.nodes:
        raise Failure("Missing node list. Specify ALL|<NodeList>")
    return req


def cmd_reboot(args: list[str], flags: Flags) -> int:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    req = parse_reboot(args)
    request = controller_pb2.RebootNodesRequest(
        nodes=req.nodes, asap=req.asap, next_state=req.next_state, reason=req.reason
    )
    try:
        ctld("RebootNodes", request, controller_pb2.RebootNodesResponse)
    except CommandError as exc:
        if getattr(exc.__cause__, "code", None) == FAILED_PRECONDITION:  # no RebootProgram: 22.05's two lines
            raise Failure(
                f"{PROG}: error: {exc.message}", "scontrol_reboot_nodes error: Unspecified error"
            ) from exc
        raise Failure(f"scontrol_reboot_nodes error: {exc.message}") from exc
    return 0


def cmd_cancel_reboot(args: list[str], flags: Flags) -> int:
    """`cancel_reboot NODELIST`: an update of the nodes to CANCEL_REBOOT, as 22.05 sends it."""
    if not args:
        raise Failure("missing argument for keyword:cancel_reboot")
    if len(args) > 1:
        raise Failure("too many arguments for keyword:cancel_reboot")
    return update_node([("NodeName", args[0]), ("State", "CANCEL_REBOOT")], flags)


# --- hold, release, requeue, top -------------------------------------------------------------


def cmd_job_action(action: str, args: list[str], flags: Flags) -> int:
    from shoal.v1 import controller_pb2

    if not args:
        raise Failure(f"too few arguments for keyword:{action}")
    job_ids: list[str] = []
    for word in args:
        for prefix in ("jobid=", "job="):
            if word.lower().startswith(prefix):
                word = word[len(prefix) :]
        for job_id in word.split(","):
            if not job_id:
                continue
            if not _JOB_ID.fullmatch(job_id):
                raise Failure(f"Invalid job id specified for job {job_id}")
            job_ids.append(job_id)
    if action.startswith("requeue"):
        import signal

        # Run inside the job it requeues (a checkpointing tool's signal handler), scontrol is in the
        # group the requeue terminates: it still reports the requeue that happened, and exits 0.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    request = controller_pb2.UpdateJobRequest(job_ids=job_ids, action=action)
    return _send_job_update(request, flags, lambda jid, msg: f"{msg} for job {jid}")


# the actions 22.05's scontrol sends as a suspend-type request: each refusal has a second line
SUSPEND_ACTIONS = ("hold", "uhold", "release")


def refusal_lines(action: str, job_id: str, message: str) -> list[str]:
    """What 22.05 prints for one refused job: 'MSG for job J', and after hold/uhold/release also
    'slurm_suspend error: MSG' (measured on the running one, for update, hold, release and requeue)."""
    lines = [f"{message} for job {job_id}"]
    if action in SUSPEND_ACTIONS:
        lines.append(f"slurm_suspend error: {message}")
    return lines


def _send_job_update(
    request: controller_pb2.UpdateJobRequest, flags: Flags, rpc_error: Callable[[str, str], str]
) -> int:
    """Send an UpdateJobRequest; each refused job gets its own lines (Slurm's form), exit 1.
    `rpc_error` words a request that never got an answer (no controller), per job."""
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    try:
        resp = ctld("UpdateJob", request, controller_pb2.UpdateJobResponse)
    except CommandError as exc:
        targets = list(request.job_ids) or [""]
        raise Failure(*([] if flags.quiet else [rpc_error(j, exc.message) for j in targets])) from exc
    failed = [r for r in resp.results if r.code != 0]
    if not flags.quiet:
        for result in failed:
            for text in refusal_lines(
                request.action, result.job_id, result.message or "Invalid job id specified"
            ):
                print(text, file=sys.stderr)
    return 1 if failed else 0


# --- reservations (cli/reservations.py) --------------------------------------------------------

T = TypeVar("T")


def _reservation_call(body: Callable[[], T]) -> T:
    from cli.reservations import ReservationError

    try:
        return body()
    except ReservationError as exc:
        raise Failure(*exc.lines) from exc


def cmd_create(args: list[str], flags: Flags) -> int:
    from cli import reservations

    if not args or not matches(args[0], "reservation", 3):
        raise Failure(f"invalid entity:{args[0] if args else ''} for keyword:create ")
    return _reservation_call(lambda: reservations.create(args[1:]))


def cmd_delete(args: list[str], flags: Flags) -> int:
    """`delete reservation R`, or `delete ReservationName=R` (Slurm takes both)."""
    from cli import reservations

    entity, eq, name = (args[0] if args else "").partition("=")
    if not matches(entity, "reservationname" if eq else "reservation", 3):
        raise Failure(f"invalid entity:{entity} for keyword:delete ")
    names = [name] if eq else args[1:]
    if not names or not names[0]:
        raise Failure(f"{PROG}: error: Proper format is 'delete <ENTITY>=<ID>' or 'delete <ENTITY> <ID>'")
    return _reservation_call(lambda: reservations.delete(args[0], names))


# --- token ---------------------------------------------------------------------------------

# gRPC code of "JWT is not configured" (Slurm then prints only the last line) and of "RebootProgram
# isn't defined" (22.05's scontrol says it as its own error first)
FAILED_PRECONDITION = 9


def cmd_token(args: list[str], flags: Flags) -> int:
    """`scontrol token [lifespan=N] [username=U]`: print SLURM_JWT=... minted by ctld."""
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    request = controller_pb2.CreateTokenRequest()
    for word in args:
        key, eq, value = word.partition("=")
        if eq and key.lower() == "lifespan":
            match = re.match(
                r"\s*(\d+)", value
            )  # as Slurm reads it: the leading number, else 0 (the default)
            request.lifespan = int(match.group(1)) if match else 0
        elif eq and key.lower() == "username":
            request.username = value
        else:
            raise Failure(f"Invalid option: `{word}`")
    try:
        resp = ctld("CreateToken", request, controller_pb2.CreateTokenResponse)
    except CommandError as exc:
        code = getattr(exc.__cause__, "code", None)
        if code == FAILED_PRECONDITION:
            raise Failure("Error fetching token") from exc
        raise Failure(
            f"{PROG}: error: slurm_fetch_token: error with request: {exc.message}", "Error fetching token"
        ) from exc
    print(f"SLURM_JWT={resp.token}")
    return 0


# --- reconfigure ---------------------------------------------------------------------------


def cmd_reconfigure(args: list[str], flags: Flags) -> int:
    """`scontrol reconfigure`: ctld re-reads slurm.conf and tells every node; silent when it took it."""
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    if args:  # 22.05 complains, then reconfigures anyway
        print("too many arguments for keyword:reconfigure", file=sys.stderr)
    try:
        ctld("Reconfigure", controller_pb2.ReconfigRequest(), controller_pb2.ReconfigResponse, timeout=60.0)
    except CommandError as exc:
        raise Failure(f"slurm_reconfigure error: {exc.message}") from exc
    return 0


# --- ping ------------------------------------------------------------------------------------


def controller_hosts() -> list[str]:
    """The names of the SlurmctldHost lines of slurm.conf, in order, read cheaply (no full parser)."""
    path = os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")
    names: list[str] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for raw in fh:
                m = re.match(r"\s*(SlurmctldHost|ControlMachine)\s*=\s*([^\s(#]+)", raw, re.IGNORECASE)
                if m:
                    names.append(m.group(2))
    except OSError:
        pass
    return names or ["localhost"]


def ping_role(index: int, count: int) -> str:
    """22.05 names a controller by its position in slurm.conf: primary, backup (of two), backupN (more)."""
    if index == 0:
        return "primary"
    return "backup" if count == 2 else f"backup{index}"


DOWN_BANNER = (
    "*****************************************",
    "** RESTORE SLURMCTLD DAEMON TO SERVICE **",
    "*****************************************",
)


def cmd_ping(args: list[str], flags: Flags) -> int:
    """Each SlurmctldHost asked on its own (a standby answers too); the banner when any is down; exit 1
    only when none answers, as 22.05."""
    from cli.common import CommandError, ctld_at
    from shoal.v1 import controller_pb2

    hosts = controller_hosts()
    up = 0
    for index, name in enumerate(hosts):
        try:
            ctld_at(
                None if len(hosts) == 1 else index,
                "Ping",
                controller_pb2.PingRequest(),
                controller_pb2.PingResponse,
                timeout=5.0,
            )
        except CommandError:
            print(f"Slurmctld({ping_role(index, len(hosts))}) at {name} is DOWN")
            continue
        up += 1
        print(f"Slurmctld({ping_role(index, len(hosts))}) at {name} is UP")
    if up < len(hosts):
        print("\n".join(DOWN_BANNER))
    return 0 if up else 1


def cmd_takeover(args: list[str], flags: Flags) -> int:
    """Ask backup INDEX (its position among the SlurmctldHost lines, 1 = the first backup) to take over;
    it has the primary release the lease. Quiet on success, as 22.05."""
    from cli.common import CommandError, ctld_at
    from shoal.v1 import controller_pb2

    if len(args) > 1:
        raise Failure("takeover: too many arguments")
    hosts = controller_hosts()
    if args:  # 22.05 reads the index as atoi does: "x" is 0; it must name a backup line
        digits = re.match(r"\s*[+-]?\d+", args[0])
        index = int(digits.group(0)) if digits else 0
        if index < 1 or index >= len(hosts):
            raise Failure(f"takeover: invalid backup controller index ({index})")
    else:
        index = 1
        if len(hosts) < 2:  # no backup line: 22.05 cannot reach one
            raise Failure("slurm_takeover error: Unable to contact slurm controller (connect failure)")
    try:
        ctld_at(
            index, "Takeover", controller_pb2.TakeoverRequest(), controller_pb2.TakeoverResponse, timeout=10.0
        )
    except CommandError as exc:
        raise Failure(f"slurm_takeover error: {exc.message}") from exc
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except OptionError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return exc.exit_code
    except Failure as exc:
        for line in exc.lines:
            if line:
                print(line, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
