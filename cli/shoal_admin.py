"""`shoal`: the admin command. `shoal up` brings up a complete local cluster in seconds.

up     write DIR/slurm.conf (+ gres.conf, topology.conf with --topology, key, state dirs), start shoal-ctld, the local agent
       (shoal-agentd) and one shoal-noded emulating N nodes on their own loopback addresses
       (127.0.0.2, 127.0.0.3, ...), wait until the nodes are idle, and run a quick-start job through the real commands.
down   stop what `up` started (and the jobs still running on its nodes).
status show the daemons, the addresses of ctld and the nodes, sinfo, the job count, the logs and SLURM_CONF.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cli import local_dbd, local_ha, local_restd
from shoal import version_line

if TYPE_CHECKING:
    from shoal.conf.slurm import SlurmConfig

PROG = "shoal"
DEFAULT_DIR = "~/.shoal/cluster"

# `shoal up --realslurm-shape`: the cluster of /work/shared/realslurm (Slurm 22.05 as a reference), so the
# same commands can be replayed against both and compared (tests/compat). Sizes, then slurm.conf keys
# (written before any --set, which still wins), then partitions and the account tree (name, shares, users).
REALSLURM_SIZES = {
    "nodes": 4,
    "cpus_per_node": 16,
    "mem_per_node": 64000,
    "gpus_per_node": 8,
    "gpu_type": "h100",
}
REALSLURM_KEYS = (
    "ClusterName=realslurm",
    "DefMemPerCPU=1000",
    "KillWait=30",
    "MinJobAge=300",
    "SlurmdTimeout=300",
    "SchedulerType=sched/backfill",
    "PriorityType=priority/multifactor",
    "PriorityDecayHalfLife=7-0",
    "PriorityMaxAge=7-0",
    "PriorityWeightAge=1000",
    "PriorityWeightFairshare=10000",
    "PriorityWeightJobSize=1000",
    "PriorityWeightPartition=1000",
    "PriorityWeightQOS=0",
    "AccountingStorageEnforce=associations",
    "AccountingStorageTRES=gres/gpu",
)
REALSLURM_PARTITIONS = (
    "PartitionName=batch Nodes=node[1-4] Default=YES MaxTime=INFINITE State=UP",
    "PartitionName=debug Nodes=node[1-2] DefaultTime=00:30:00 MaxTime=01:00:00 PriorityJobFactor=2 State=UP",
)
REALSLURM_ACCOUNTS = (
    ("research", ("Description=research group", "Organization=lab", "Fairshare=60"), ("root", "alice")),
    ("physics", ("Description=physics group", "Organization=lab", "Fairshare=40"), ("alice", "bob")),
)


def apply_realslurm_shape(args: argparse.Namespace) -> None:
    """Fill `args` with the reference cluster's shape (sizes, keys, partitions, accounts)."""
    for key, value in REALSLURM_SIZES.items():
        setattr(args, key, value)
    args.set = [*REALSLURM_KEYS, *(args.set or [])]
    args.partition = args.partition or list(REALSLURM_PARTITIONS)
    args.accounts = REALSLURM_ACCOUNTS


def _default_dir() -> str:
    return os.environ.get("SHOAL_DIR", DEFAULT_DIR)


def _free_port(addrs: list[str], taken: tuple[int, ...] = ()) -> int:
    """A TCP port free on every address given (bind-checked) and not one of `taken`: the ports this
    cluster already chose but whose daemons are not listening yet (ctld's, while dbd's is picked)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in taken and all(_can_bind(a, port) for a in addrs):
            return port
    raise RuntimeError("no free TCP port found on the loopback addresses")


def _can_bind(addr: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((addr, port))
        except OSError:
            return False
    return True


def _node_addrs(count: int, base: str) -> list[str]:
    a, b, c, d = (int(x) for x in base.split("."))
    out = []
    for i in range(count):
        n = d + i
        out.append(f"{a}.{b}.{c + n // 256}.{n % 256}")
    return out


# What shoal does best, on by default (Slurm's own SchedulerType default is sched/backfill): backfill,
# multifactor priority with fair share, weighted as the reference 22.05 cluster's slurm.conf.
SCHEDULING_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("SchedulerType", "sched/backfill"),
    ("SelectType", "select/cons_tres"),
    ("SelectTypeParameters", "CR_Core_Memory"),
    ("GresTypes", "gpu"),
    ("PriorityType", "priority/multifactor"),
    ("PriorityDecayHalfLife", "7-0"),
    ("PriorityMaxAge", "7-0"),
    ("PriorityWeightAge", "1000"),
    ("PriorityWeightFairshare", "10000"),
    ("PriorityWeightJobSize", "1000"),
    ("PriorityWeightPartition", "1000"),
    ("PriorityWeightQOS", "0"),
)


def merge_settings(top: list[tuple[str, str]], sets: list[str]) -> list[tuple[str, str]]:
    """The global slurm.conf lines: `--set KEY=VALUE` replaces the default KEY in place (keys are
    case-insensitive, as in slurm.conf); other lines (new keys, several pairs) are appended."""
    out = list(top)
    index = {k.lower(): i for i, (k, _v) in enumerate(out)}
    for line in sets:
        key, sep, value = line.strip().partition("=")
        single = sep and key and " " not in key and not any(c.isspace() for c in value.strip())
        i = index.get(key.strip().lower()) if single else None
        if i is not None:
            out[i] = (out[i][0], value.strip())
        else:
            out.append((key.strip(), value.strip()) if single else (line.strip(), ""))
    return out


def _format_settings(pairs: list[tuple[str, str]]) -> str:
    return "\n".join(f"{k}={v}" if v or "=" not in k else k for k, v in pairs)


def write_config(args: argparse.Namespace, directory: Path) -> Path:
    """Write slurm.conf, gres.conf and the cluster key for a local cluster; returns slurm.conf's path."""
    from shoal.auth.key import generate_key

    nodes = args.nodes
    addrs = _node_addrs(nodes, args.base_addr)
    ha = getattr(args, "ha", False)
    ctld_port = args.ctld_port or _free_port(
        ["127.0.0.1", *([local_ha.backup_addr(args.base_addr)] if ha else [])]
    )
    node_port = args.node_port or _free_port(addrs, taken=(ctld_port,))
    for sub in ("spool", "log", "run"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    (directory / "state").mkdir(mode=0o700, parents=True, exist_ok=True)  # StateSaveLocation: ours only
    mem_per_cpu = max(1, args.mem_per_node // max(1, args.cpus_per_node))
    sockets = 2 if args.cpus_per_node % 2 == 0 and args.cpus_per_node >= 2 else 1
    gres = f" Gres=gpu:{args.gpu_type}:{args.gpus_per_node}" if args.gpus_per_node else ""
    names = f"node[1-{nodes}]" if nodes > 1 else "node1"
    node_lines = "\n".join(
        f"NodeName=node{i + 1} NodeAddr={addr} NodeHostname={socket.gethostname().split('.')[0]}"
        for i, addr in enumerate(addrs)
    )
    user = _current_user()
    top: list[tuple[str, str]] = [
        ("ClusterName", "shoal"),
        ("SlurmctldHost", "localhost(127.0.0.1)"),
        ("SlurmctldPort", str(ctld_port)),
        ("SlurmdPort", str(node_port)),
        ("SlurmUser", user),
        ("AuthKeyFile", f"{directory}/shoal.key"),
        ("AgentSocket", f"{directory}/run/agent.sock"),
        ("StateSaveLocation", f"{directory}/state"),
        ("SlurmdSpoolDir", f"{directory}/spool/%n"),
        ("SlurmctldPidFile", f"{directory}/run/ctld.pid"),
        ("SlurmdPidFile", f"{directory}/run/noded.pid"),
        ("SlurmctldLogFile", f"{directory}/log/ctld.log"),
        ("SlurmdLogFile", f"{directory}/log/noded.log"),
        *SCHEDULING_DEFAULTS,
        ("DefMemPerCPU", str(mem_per_cpu)),
        ("ReturnToService", "2"),
        ("KillWait", "5"),
        ("MinJobAge", "300"),
        ("SlurmdTimeout", "60"),
        ("MaxJobCount", "100000"),
    ]
    if ha:  # two heads (primary, backup) on MariaDB instead of the one on SQLite
        i = next(i for i, (k, _v) in enumerate(top) if k == "SlurmctldHost")
        top[i : i + 1] = local_ha.conf_lines(directory, args.base_addr)
    topology = directory / "topology.conf"
    if getattr(args, "topology", None):
        shutil.copyfile(args.topology, topology)
        top.append(("TopologyPlugin", "topology/tree"))
    else:
        topology.unlink(missing_ok=True)
    if getattr(args, "no_accounting", False):
        (directory / "slurmdbd.conf").unlink(missing_ok=True)
    else:
        dbd_port = _free_port(["127.0.0.1"], taken=(ctld_port, node_port))
        top.extend(local_dbd.write_conf(directory, user, dbd_port))
    top.extend(local_restd.write_conf(directory))
    settings = _format_settings(merge_settings(top, args.set or []))
    partitions = "\n".join(
        getattr(args, "partition", None)
        or (
            f"PartitionName=batch Nodes={names} Default=YES MaxTime=INFINITE State=UP",
            f"PartitionName=debug Nodes={names} DefaultTime=00:30:00 MaxTime=01:00:00 State=UP",
        )
    )
    conf = f"""# Local shoal cluster written by `shoal up` ({time.strftime("%Y-%m-%dT%H:%M:%S")}).
{settings}
NodeName=DEFAULT CPUs={args.cpus_per_node} Boards=1 SocketsPerBoard={sockets} CoresPerSocket={args.cpus_per_node // sockets} ThreadsPerCore=1 RealMemory={args.mem_per_node}{gres} State=UNKNOWN
{node_lines}
{partitions}
"""
    (directory / "slurm.conf").write_text(conf)
    gres_conf = ""
    if args.gpus_per_node and args.gpu_files:
        files = f"{os.path.abspath(args.gpu_files)}/nvidia[0-{args.gpus_per_node - 1}]"
        gres_conf = f"NodeName={names} Name=gpu Type={args.gpu_type} File={files}\n"
    elif args.gpus_per_node:
        gres_conf = f"NodeName={names} Name=gpu Type={args.gpu_type} Count={args.gpus_per_node}\n"
    (directory / "gres.conf").write_text(gres_conf)
    _write_isolation(args, directory)
    key = directory / "shoal.key"
    if not key.exists():
        generate_key(str(key))
    return directory / "slurm.conf"


# Fake NVML descriptions shipped with shoal, by the GPUs `shoal up --gpus-per-node N` emulates (N of 1-8:
# the first N GPUs of the description, "dgx_h100:4").
_FAKE_NVML = {"h100": "dgx_h100", "a100": "pcie_a100"}
CGROUP_CONF = """# Written by `shoal up` (running as root): jobs are confined to their cores, memory and GPUs.
CgroupPlugin=autodetect
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
ConstrainDevices=yes
"""


def _write_isolation(args: argparse.Namespace, directory: Path) -> None:
    """cgroup.conf (enforcement when root) and noded.env (the fake NVML description, if any)."""
    cgroup = directory / "cgroup.conf"
    if os.geteuid() == 0 and not args.no_cgroups:
        cgroup.write_text(CGROUP_CONF)
    elif cgroup.exists():
        cgroup.unlink()
    fake = args.fake_nvml
    if fake is None:
        fake = _default_fake_nvml(args.gpu_type, args.gpus_per_node)
    (directory / "noded.env").write_text(f"SHOAL_FAKE_NVML={fake}\n" if fake else "")


def _default_fake_nvml(gpu_type: str, gpus: int) -> str:
    """The fake NVML of `--gpus-per-node gpus --gpu-type gpu_type`: its description, whole for 8 GPUs,
    its first `gpus` for fewer; none for a type without one or more GPUs than it has."""
    name = _FAKE_NVML.get(gpu_type, "")
    if not name or not 1 <= gpus <= 8:
        return ""
    return name if gpus == 8 else f"{name}:{gpus}"


def _noded_env(directory: Path, env: dict[str, str]) -> dict[str, str]:
    out = dict(env)
    try:
        lines = (directory / "noded.env").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _current_user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def _alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def _describe(proc: subprocess.Popen[bytes]) -> str:
    args = proc.args
    return str(args[2]) if isinstance(args, list) and len(args) > 2 else str(args)


def _wait_idle(
    env: dict[str, str], nodes: int, procs: list[subprocess.Popen[bytes]], timeout: float
) -> str | None:
    """Poll the controller through the agent until every node is up; returns an error or None."""
    from shoal.agent.client import AgentError, call
    from shoal.v1 import controller_pb2

    os.environ.update(env)
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                return f"{_describe(p)} exited with status {p.returncode}"
        try:
            resp = call(
                "/shoal.v1.Controller/GetNodes",
                controller_pb2.GetNodesRequest(),
                controller_pb2.GetNodesResponse,
                timeout=2,
            )
            up = [
                n
                for n in resp.nodes
                if n.base_state in ("IDLE", "MIXED", "ALLOCATED") and not n.not_responding
            ]
            if len(up) >= nodes:
                return None
            last = f"{len(up)} of {nodes} nodes up"
        except AgentError as exc:
            last = exc.message
        time.sleep(0.2)
    return f"cluster did not come up within {timeout:.0f}s ({last})"


def cmd_up(args: argparse.Namespace) -> int:
    directory = Path(os.path.expanduser(args.dir)).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    run = directory / "run"
    if any(
        _alive(run / f"{name}.pid")
        for name in ("ctld", "agentd", "noded", "dbd", *local_ha.pid_names(directory))
    ):
        print(
            f"{PROG}: error: a cluster is already running in {directory} (shoal down --dir {directory})",
            file=sys.stderr,
        )
        return 1
    conf = directory / "slurm.conf"
    if args.rewrite or not conf.exists():
        conf = write_config(args, directory)
    else:
        given = shape_conflicts(args, directory)
        if given:
            print(
                f"{PROG}: error: {directory} already has a cluster ({conf}); {', '.join(given)} "
                f"would change it: add --rewrite to write slurm.conf again (job state and the key are kept), "
                f"or use another --dir",
                file=sys.stderr,
            )
            return 1
        print(f"shoal: using the existing {conf} (--rewrite writes it again)")
        for change in update_settings(conf, args.set or []):
            print(f"shoal: {conf.name}: {change}")
    env = dict(os.environ, SLURM_CONF=str(conf))
    env.pop("SHOAL_AGENT_SOCKET", None)
    from shoal.conf import ConfigError, load_slurm_conf

    try:
        cfg = load_slurm_conf(str(conf))
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    py = sys.executable
    ha = len(cfg.control_hosts) > 1
    if ha and cfg.state_store.kind == "mysql":
        problem = local_ha.create_database(directory)
        if problem:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
            return 1
    dbd = local_dbd.start(directory, env, _spawn)
    ctlds = []
    for name, _addr in cfg.control_hosts if ha else ():
        ctlds.append(
            _spawn(
                [
                    py,
                    "-P",
                    "-m",
                    "ctld.main",
                    "-f",
                    str(conf),
                    "--ctld-host",
                    name,
                    "-L",
                    str(directory / "log" / f"ctld-{name}.log"),
                ],
                directory / "log" / f"ctld-{name}.out",
                env,
            )
        )
        (run / f"ctld-{name}.pid").write_text(f"{ctlds[-1].pid}\n")
        if len(ctlds) == 1:
            time.sleep(1.0)  # the first line takes the lease first: it is the primary at start
    if not ha:
        ctlds.append(
            _spawn([py, "-P", "-m", "ctld.main", "-f", str(conf)], directory / "log" / "ctld.out", env)
        )
    agentd = _spawn(
        [py, "-P", "-m", "shoal.agent.agentd", "-f", str(conf), "--pidfile", str(run / "agentd.pid")],
        directory / "log" / "agentd.out",
        env,
    )
    node_args = [a for n in cfg.nodes for a in ("-N", n.name)]
    noded = _spawn(
        [py, "-P", "-m", "noded.main", "-f", str(conf), "--no-agent", "--node-namespaces", *node_args],
        directory / "log" / "noded.out",
        _noded_env(directory, env),
    )
    # restd starts beside the others (it needs no ctld to listen): its imports overlap the wait below
    previous = local_restd.url(directory)  # the port restd had: its URL stays the same across `up`s
    local_restd.url_file(directory).unlink(missing_ok=True)
    restd = None
    if not args.no_restd:
        restd = _start_restd(directory, conf, env, cfg, args.restd_port or _port_of(previous))
    error = _wait_idle(env, len(cfg.nodes), [*ctlds, agentd, noded, *([dbd] if dbd else [])], args.timeout)
    if not error and dbd is not None:
        error = local_dbd.bootstrap(
            env, cfg.cluster_name, local_dbd.local_users(), getattr(args, "accounts", None)
        )
    restd_url = None
    if not error and restd is not None:
        proc, port = restd
        error = local_restd.wait_ready(proc, port, 20.0)
        restd_url = None if error else local_restd.url(directory)
    if error:
        print(f"{PROG}: error: {error}; see {directory}/log/", file=sys.stderr)
        _stop(directory)
        return 1
    heads = (
        ", ".join(f"{n} {a}:{cfg.slurmctld_port}" for n, a in cfg.control_hosts)
        if ha
        else f"{cfg.control_addr}:{cfg.slurmctld_port}"
    )
    print(
        f"shoal: cluster '{cfg.cluster_name}' is up: {len(cfg.nodes)} nodes, ctld on "
        f"{heads}, state in {cfg.state_store.location if ha else directory}"
    )
    if restd_url:
        print(f"shoal: REST API (shoal-restd) at {restd_url}/slurm/v0.0.44/ (token: scontrol token)")
        print(f"shoal: metrics (OpenMetrics, for Prometheus) at {restd_url}/metrics")
        print(f"shoal: web view at {local_restd.web_url(directory, restd_url)}")
    if (directory / "cgroup.conf").exists():
        print("shoal: cgroup enforcement is on (running as root): jobs get only their cores, memory and GPUs")
    note = cpu_ids_note(
        sum(n.cpus for n in cfg.nodes), len(cfg.nodes), _host_cpus(), (directory / "cgroup.conf").exists()
    )
    if note:
        print(f"shoal: note: {note}")
    for warning in (_node_names_warning(), _interpreter_warning()):
        if warning:
            print(f"shoal: warning: {warning}", file=sys.stderr)
    if not args.no_check:
        rc = _quick_start(directory, env, min(2, len(cfg.nodes)))
        if rc:
            return rc
    print(f"export SLURM_CONF={conf}")
    return 0


def _port_of(url: str | None) -> int:
    return int(url.rsplit(":", 1)[1]) if url else 0


def _start_restd(
    directory: Path, conf: Path, env: dict[str, str], cfg: SlurmConfig, port: int
) -> tuple[subprocess.Popen[bytes], int] | None:
    """Spawn shoal-restd on 127.0.0.1:port (0: a free port); (process, port), or None when this
    cluster has no REST API."""
    if "auth/jwt" not in cfg.auth_alt_types:
        return None  # a slurm.conf of an older `shoal up`, without auth/jwt: no tokens, no restd
    if importlib.util.find_spec("aiohttp") is None:
        print(
            f"{PROG}: note: no REST API: shoal-restd needs the restd extra (pip install 'shoal[restd]')",
            file=sys.stderr,
        )
        return None
    # ctld and dbd may not listen yet: their ports are not free for restd even when bindable now
    port = port or _free_port(["127.0.0.1"], taken=(cfg.slurmctld_port, cfg.accounting_storage_port))
    return local_restd.start(directory, conf, env, port, _spawn), port


def _host_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except OSError:
        return os.cpu_count() or 1


def cpu_ids_note(emulated: int, nodes: int, host: int, confined: bool) -> str | None:
    """Why a task's cpuset shows this host's CPUs, not the node's (only when the nodes have more CPUs)."""
    if emulated <= host:
        return None
    where = (
        f"each task's cpuset is the host CPUs its node's CPU ids wrap onto (id modulo {host})"
        if confined
        else "tasks run on any of the host's CPUs (no cgroup enforcement)"
    )
    return (
        f"the {nodes} node(s) emulate {emulated} CPUs on this host's {host}: {where}, shared with the other "
        f"nodes' jobs; `scontrol show job -d` shows the node CPU ids a job holds (CPU_IDs=)"
    )


def _node_names_warning() -> str | None:
    """Why node names will not resolve inside jobs (noded could not make the namespaces), or None."""
    probe = subprocess.run(
        [sys.executable, "-P", "-m", "noded.nodens", "--probe"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode == 0:
        return None
    fix = (
        "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
        "user.max_user_namespaces > 0; on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0) or run "
        "shoal up as root"
        if os.geteuid()
        else "check that this kernel has mount and UTS namespaces"
    )
    return (
        f"node names (node1, ...) will not resolve inside jobs and every node's hostname is this host's: "
        f"cannot make private namespaces ({probe.stderr.strip() or f'exit {probe.returncode}'}); {fix}"
    )


def _blocking_dir(path: str) -> Path | None:
    """The first directory on the way to `path` (or the file itself) that other users cannot pass."""
    real = Path(os.path.realpath(path))
    for p in (*reversed(real.parents), real):
        if not p.stat().st_mode & 0o001:
            return p
    return None


def _interpreter_warning() -> str | None:
    """Jobs of other users run srun and python from this environment: can they start its interpreter?"""
    if os.geteuid() != 0:
        return None  # a normal user's cluster runs only that user's jobs
    blocked = _blocking_dir(sys.executable)
    if blocked is None:
        return None
    mode = f"{blocked.stat().st_mode & 0o777:04o}"
    return (
        f"jobs of users other than root cannot run srun or python from this environment: its interpreter "
        f"{os.path.realpath(sys.executable)} is behind {blocked} (mode {mode}), which they cannot enter "
        f"(they get 'Permission denied'); the commands still work through the local agent. Fix: "
        f"chmod o+x on {blocked} (and its parents), or install shoal into a virtualenv made from a Python "
        f"every user can run (e.g. /usr/bin/python3 -m venv /opt/shoal)"
    )


def _quick_start(directory: Path, env: dict[str, str], nodes: int) -> int:
    """Run the README's quick-start job through the real sbatch and show what it printed."""
    work = directory / "quickstart"
    work.mkdir(exist_ok=True)
    os.chmod(work, 0o1777)
    script = work / "hello.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH -J hello -N {nodes} --ntasks-per-node=1 -t 1\n"
        "#SBATCH -o hello-%j.out\n"
        'echo "hello from $SLURMD_NODENAME: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"\n'
    )
    out = subprocess.run(
        [sys.executable, "-P", "-m", "cli.sbatch", "--parsable", "--wait", str(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        print(
            f"{PROG}: error: quick-start job failed: {out.stderr.strip() or out.stdout.strip()}",
            file=sys.stderr,
        )
        return 1
    job_id = out.stdout.strip().split(";")[0]
    text = (work / f"hello-{job_id}.out").read_text().strip()
    print(f"shoal: quick-start job {job_id} completed: {text}")
    return 0


def _stop(directory: Path) -> list[str]:
    stopped = []
    signalled: set[int] = set()
    run = directory / "run"
    # every daemon at once: each shuts down on its own (ctld keeps what dbd has not acknowledged in
    # its state store and sends it at the next start), so waiting for one before the next only adds up
    waiting: dict[str, int] = {}
    for name in (*local_dbd.pid_names(directory), *local_ha.pid_names(directory)):
        pid = _alive(run / f"{name}.pid")
        if pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        signalled.add(pid)
        waiting[name] = pid
        stopped.append(name)
    deadline = time.monotonic() + 5
    while waiting and time.monotonic() < deadline:
        waiting = {name: pid for name, pid in waiting.items() if _alive(run / f"{name}.pid") is not None}
        if waiting:
            time.sleep(0.05)
    for pid in waiting.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    stopped.extend(_stop_strays(directory, signalled))
    # jobs still running on the emulated nodes: their supervisors terminate them
    for pid_file in (directory / "spool").glob("*/job*/stepd.pid"):
        try:
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            pass
    return stopped


def _stop_strays(directory: Path, signalled: set[int]) -> list[str]:
    """Daemons of this cluster that no pid file names (an admin restarted one by hand, or one was
    killed -9 and restarted): found by this cluster's config files on their command line."""
    import psutil

    confs = {str(directory / "slurm.conf"), str(directory / "slurmdbd.conf")}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.pid == os.getpid() or not confs.intersection(cmdline):
            continue
        if proc.pid in signalled:  # stopped through its pid file, still finishing its shutdown
            found.append(proc)
            continue
        if not any(
            m in cmdline for m in ("ctld.main", "noded.main", "shoal.agent.agentd", "dbd.main", "restd.main")
        ):
            continue
        try:
            proc.terminate()
            found.append(proc)
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(found, timeout=5)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    return [f"pid {p.pid}" for p in found if p.pid not in signalled]


def cmd_down(args: argparse.Namespace) -> int:
    directory = Path(os.path.expanduser(args.dir)).resolve()
    if not (directory / "slurm.conf").exists():
        print(f"{PROG}: error: no cluster in {directory}", file=sys.stderr)
        return 1
    stopped = _stop(directory)
    print(f"shoal: stopped {', '.join(stopped)}" if stopped else "shoal: nothing was running")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    directory = Path(os.path.expanduser(args.dir)).resolve()
    conf = directory / "slurm.conf"
    if not conf.exists():
        print(f"{PROG}: no cluster in {directory}")
        return 1
    run = directory / "run"
    rc = 0
    for name in (*local_dbd.pid_names(directory), *local_ha.pid_names(directory)):
        pid = _alive(run / f"{name}.pid")
        print(f"shoal-{name}: {f'running (pid {pid})' if pid else 'stopped'}")
        rc = rc or (0 if pid else 3)
    text = conf.read_text()
    nodes = re.findall(r"^NodeName=(\S+) NodeAddr=(\S+)", text, re.M)
    heads = re.findall(r"^SlurmctldHost=(\S+?)[(](.*)[)]", text, re.M)
    port = _conf_value(text, r"^SlurmctldPort=(\d+)")
    ctlds = (
        ", ".join(f"{n} {a}:{port}" for n, a in heads)
        if len(heads) > 1
        else f"{heads[0][1] if heads else 'localhost'}:{port}"
    )
    print(f"\nctld: {ctlds}; nodes: {', '.join(f'{n} {a}' for n, a in nodes)}")
    dbd = _conf_value(text, r"^AccountingStoragePort=(\d+)")
    print(f"accounting: shoal-dbd on 127.0.0.1:{dbd} (sacct, sacctmgr, sshare)" if dbd else "accounting: off")
    restd_url = local_restd.url(directory)
    print(f"REST API: shoal-restd at {restd_url}/slurm/v0.0.44/" if restd_url else "REST API: off")
    print(f"metrics: {restd_url}/metrics" if restd_url else "metrics: off")
    print(f"web view: {restd_url}/web/ (token: scontrol token)" if restd_url else "web view: off")
    if _alive(run / "ctld.pid") or any(_alive(run / f"{n}.pid") for n in local_ha.pid_names(directory)):
        env = dict(os.environ, SLURM_CONF=str(conf))
        env.pop("SHOAL_AGENT_SOCKET", None)
        if len(heads) > 1:  # which head leads: scontrol ping's lines
            ping = _command(env, "scontrol", "ping")
            if ping is not None:
                print("\n" + ping.rstrip())
        sinfo = _command(env, "sinfo")
        if sinfo is not None:
            print("\n" + sinfo.rstrip())
        states = _command(env, "squeue", "-h", "-t", "all", "-o", "%T")
        if states is not None:
            counts: dict[str, int] = {}
            for state in states.split():
                counts[state] = counts.get(state, 0) + 1
            detail = ", ".join(f"{n} {st.lower()}" for st, n in sorted(counts.items()))
            print(f"\njobs: {sum(counts.values())}{f' ({detail})' if detail else ''} (squeue -t all)")
    print(f"\nlogs: {directory / 'log'}/ (ctld.log, noded.log; *.out: each daemon's own output)")
    print(f"export SLURM_CONF={conf}")
    return rc


def _command(env: dict[str, str], name: str, *argv: str) -> str | None:
    """A short command's output for `shoal status` (its error, shown, when it fails)."""
    try:
        out = subprocess.run(
            [sys.executable, "-P", "-m", f"cli.{name}", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        print(f"{name}: no answer within 30s")
        return None
    if out.returncode != 0:
        print(out.stderr.strip() or f"{name}: exit {out.returncode}")
        return None
    return out.stdout


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each option's default, except the empty ones (flags, unset paths)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS):
            return action.help
        return super()._get_help_string(action)


def up_arguments(up: argparse.ArgumentParser) -> None:
    """`shoal up`'s options (every one with a help text, so --help shows its default)."""
    up.add_argument("--nodes", type=int, default=4, help="emulated nodes (node1, node2, ...)")
    up.add_argument("--gpus-per-node", type=int, default=0, help="GPUs per node (Gres=gpu:TYPE:G)")
    up.add_argument("--gpu-type", default="h100", help="GPU type in Gres= and gres.conf")
    up.add_argument("--gpu-files", metavar="DIR", help="GPU device files DIR/nvidia0.. (gres.conf File=)")
    up.add_argument(
        "--fake-nvml",
        metavar="DESC",
        help="fake NVML description, NAME[:N] for its first N GPUs (unset: dgx_h100 for h100, pcie_a100 for a100, as many GPUs as --gpus-per-node up to 8)",
    )
    up.add_argument("--no-cgroups", action="store_true", help="no cgroup enforcement even as root")
    up.add_argument("--cpus-per-node", type=int, default=8, help="CPUs per node")
    up.add_argument("--mem-per-node", type=int, default=16000, help="RealMemory per node, MB")
    up.add_argument("--dir", default=_default_dir(), help="cluster directory ($SHOAL_DIR)")
    up.add_argument("--base-addr", default="127.0.0.2", help="first node's loopback address")
    up.add_argument("--ctld-port", type=int, default=0, help="SlurmctldPort (0: a free port)")
    up.add_argument("--node-port", type=int, default=0, help="SlurmdPort (0: a free port)")
    up.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="slurm.conf line: replaces the default KEY ("
        + ", ".join(f"{k}={v}" for k, v in SCHEDULING_DEFAULTS if k.startswith(("Sched", "PriorityType")))
        + ", fair share weighted ...), else added; on an existing DIR it changes that key",
    )
    up.add_argument(
        "--partition",
        action="append",
        metavar="LINE",
        help="a PartitionName=... line (replaces the default batch and debug partitions)",
    )
    up.add_argument(
        "--realslurm-shape",
        action="store_true",
        help="the reference Slurm cluster's shape: 4 x 16 CPUs, 64000 MB, 8 gpu:h100, batch and "
        "debug (node[1-2]), ClusterName=realslurm, accounts research (alice, root) and physics "
        "(alice, bob)",
    )
    up.add_argument("--topology", metavar="FILE", help="topology.conf to use (TopologyPlugin=topology/tree)")
    up.add_argument("--rewrite", action="store_true", help="write slurm.conf again even if DIR has one")
    up.add_argument("--no-check", action="store_true", help="do not run the quick-start job")
    up.add_argument("--no-accounting", action="store_true", help="no shoal-dbd (no sacct/sacctmgr)")
    up.add_argument("--no-restd", action="store_true", help="no shoal-restd (the REST API)")
    up.add_argument(
        "--restd-port", type=int, default=0, help="shoal-restd's port on 127.0.0.1 (0: a free port)"
    )
    up.add_argument(
        "--ha",
        action="store_true",
        help="two shoal-ctlds (head1 primary, head2 backup) on MariaDB at 127.0.0.1:3306 (root), "
        "a database per DIR",
    )
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for every node to be idle")


def _conf_value(text: str, pattern: str) -> str | None:
    match = re.search(pattern, text, re.M)
    return match.group(1) if match else None


def shape_conflicts(args: argparse.Namespace, directory: Path) -> list[str]:
    """Options given (not their default) that the cluster already in `directory` does not have:
    `--nodes 3` on a 2-node cluster. Repeating the options it was written with is no conflict."""
    text = (directory / "slurm.conf").read_text()
    probe = argparse.ArgumentParser(add_help=False)
    up_arguments(probe)
    node_default = _conf_value(text, r"^NodeName=DEFAULT\b(.*)$") or ""
    gres = _conf_value(node_default, r"Gres=(gpu:[^:\s]+:\d+)")  # gpu:TYPE:COUNT
    have: dict[str, object] = {
        "nodes": len(
            [
                ln
                for ln in text.splitlines()
                if ln.startswith("NodeName=") and not ln.startswith("NodeName=DEFAULT")
            ]
        ),
        "cpus_per_node": int(_conf_value(node_default, r"\bCPUs=(\d+)") or 0),
        "mem_per_node": int(_conf_value(node_default, r"\bRealMemory=(\d+)") or 0),
        "gpus_per_node": int(gres.rsplit(":", 1)[1]) if gres else 0,
        "gpu_type": gres.split(":")[1] if gres else None,
        "base_addr": _conf_value(text, r"^NodeName=\S+ NodeAddr=(\S+)"),
        "ctld_port": int(_conf_value(text, r"^SlurmctldPort=(\d+)") or 0),
        "node_port": int(_conf_value(text, r"^SlurmdPort=(\d+)") or 0),
        "no_accounting": not (directory / "slurmdbd.conf").exists(),
        "no_cgroups": os.geteuid() == 0 and not (directory / "cgroup.conf").exists(),
        "ha": len(re.findall(r"^SlurmctldHost=", text, re.M)) > 1,
    }
    out = []
    for name in (
        "nodes",
        "cpus_per_node",
        "mem_per_node",
        "gpus_per_node",
        "gpu_type",
        "base_addr",
        "ctld_port",
        "node_port",
        "no_accounting",
        "no_cgroups",
        "ha",
    ):
        value = getattr(args, name)
        if value != probe.get_default(name) and value != have[name]:
            out.append(f"--{name.replace('_', '-')}" + ("" if isinstance(value, bool) else f" {value}"))
    if args.topology:
        old = directory / "topology.conf"
        if not old.exists() or old.read_text() != Path(args.topology).read_text():
            out.append(f"--topology {args.topology}")
    for name in ("gpu_files", "fake_nvml"):
        if getattr(args, name):
            out.append(
                f"--{name.replace('_', '-')} {getattr(args, name)}"
            )  # not read back: rewrite to be sure
    return out


_LINE_KEYS = ("nodename", "partitionname", "nodeset", "downnodes", "frontendname", "include")


def _line_key(line: str) -> str | None:
    """What a slurm.conf line sets: the key of a global line, `NodeName=x` for a node/partition line."""
    text = line.split("#", 1)[0].strip()
    key, sep, rest = text.partition("=")
    if not sep or not key or " " in key:
        return None
    if key.lower() in _LINE_KEYS:
        return f"{key.lower()}={rest.split()[0] if rest.split() else ''}"
    return key.lower()


def update_settings(conf: Path, sets: list[str]) -> list[str]:
    """`--set` on an existing slurm.conf: replace the line that sets the same key (a node or partition
    line: the one of the same name), else add it before the node lines; returns what changed."""
    lines = conf.read_text().splitlines()
    changes = []
    for wanted in sets:
        wanted = wanted.strip()
        key = _line_key(wanted)
        if key is None:
            raise RuntimeError(f"--set {wanted!r}: expected KEY=VALUE")
        at = next((i for i, ln in enumerate(lines) if _line_key(ln) == key), None)
        if at is not None and lines[at].strip() == wanted:
            continue
        if at is not None:
            changes.append(f"{wanted} (was {lines[at].strip()})")
            lines[at] = wanted
        else:
            first_node = next(
                (i for i, ln in enumerate(lines) if (_line_key(ln) or "").startswith(_LINE_KEYS)), len(lines)
            )
            lines.insert(first_node, wanted)
            changes.append(f"{wanted} (added)")
    if changes:
        conf.write_text("\n".join(lines) + "\n")
    return changes


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="shoal admin command")
    p.add_argument("-V", "--version", action="version", version=version_line())
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser(
        "up",
        help="start a local cluster and run the quick-start job",
        description="Write DIR/slurm.conf (unless DIR has one), start the daemons and run the "
        "quick-start job. On an existing DIR, --set changes those keys in place; "
        "options that shape the cluster (--nodes ...) need --rewrite.",
        formatter_class=_DefaultsHelp,
    )
    up_arguments(up)
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop the local cluster")
    down.add_argument("--dir", default=_default_dir())
    down.set_defaults(func=cmd_down)
    status = sub.add_parser("status", help="show the local cluster's daemons, nodes, jobs and logs")
    status.add_argument("--dir", default=_default_dir())
    status.set_defaults(func=cmd_status)
    sim = sub.add_parser("sim", help="replay a workload trace through the scheduler", add_help=False)
    sim.add_argument("sim_args", nargs=argparse.REMAINDER)
    sim.set_defaults(func=cmd_sim)
    sub.add_parser("why", help="why a job waits, when it starts, what would start it sooner", add_help=False)
    return p


def cmd_sim(args: argparse.Namespace) -> int:
    from cli import shoal_sim  # loads ctld.sim only now

    return shoal_sim.main(args.sim_args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sim"]:  # all of it is shoal sim's (REMAINDER would take `sim --help` for ours)
        from cli import shoal_sim

        return shoal_sim.main(argv[1:])
    if argv[:1] == ["why"]:  # a short command: its own light module (cli/why.py)
        from cli import why

        return why.main(argv[1:])
    args = _parser().parse_args(argv)
    if getattr(args, "realslurm_shape", False):
        apply_realslurm_shape(args)
    if args.command == "up" and args.nodes < 1:
        print(f"{PROG}: error: --nodes must be at least 1", file=sys.stderr)
        return 1
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except (OSError, RuntimeError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
