"""shoal-noded: the node agent (Slurm's slurmd). The composition root of noded.

shoal-noded [-N NODENAME]... [-f CONF] [-D] [-L LOGFILE] [--agent-socket PATH | --no-agent] [--report-config]

One process serves one real node or several emulated ones (-N, each on its own NodeAddr:Port).
Running jobs live under their own stepd, so stopping noded (SIGTERM/SIGINT) leaves them running.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import pwd
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import grpc

import shoal
from noded import jobs, nodens, reboot, stepd_spawn
from noded.discovery import discover_hardware, hardware_for
from noded.gpu import discovery as gpu_discovery
from noded.gpu.discovery import load_backend, to_proto
from noded.gpu.fake_nvml import parse_cpu_list
from noded.gpu.usage import GpuSampler
from noded.healthcheck import HealthCheckConfig, HealthChecker, NodeState, check_all
from noded.hooks import HookConfig
from noded.isolation import load_isolation
from noded.node import HostedNode, spool_root
from noded.reporter import Reporter
from noded.service import NodeAgentService
from shoal import configless
from shoal.agent.server import AgentServer, AgentServerError, ctld_addresses, targets_from_config
from shoal.auth.errors import AuthError
from shoal.auth.key import load_key
from shoal.conf import ConfigError, SlurmConfig, load_slurm_conf
from shoal.daemon import DaemonArgumentParser, Notifier, install_signals, setup_logging
from shoal.rpc.client import Stub
from shoal.rpc.server import BindError, make_server
from shoal.v1 import cluster_pb2, common_pb2, controller_pb2, node_pb2_grpc

PROG = "shoal-noded"
DEFAULT_CONF = "/etc/slurm/slurm.conf"
DEFAULT_CONF_CACHE = "/var/spool/slurmd/conf-cache"  # under Slurm's default SlurmdSpoolDir
GET_NODES = "/shoal.v1.Controller/GetNodes"
UPDATE_NODE = "/shoal.v1.Controller/UpdateNode"
log = logging.getLogger("shoal.noded")


class StartError(Exception):
    """A reason not to start, printed as `shoal-noded: error: <message>`."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = DaemonArgumentParser(prog=PROG, description="shoal node agent (slurmd)")
    parser.add_argument("-V", "--version", action="version", version=shoal.version_line())
    parser.add_argument(
        "-N", dest="nodes", action="append", metavar="NODENAME", help="node to serve (repeatable)"
    )
    parser.add_argument("-f", dest="conf", metavar="CONF", help="slurm.conf (default: $SLURM_CONF)")
    parser.add_argument(
        "-D", dest="foreground", action="store_true", help="foreground, log copied to stderr (never forks)"
    )
    parser.add_argument(
        "-L", dest="logfile", metavar="LOGFILE", help="log file (default: SlurmdLogFile, else stderr)"
    )
    agent = parser.add_mutually_exclusive_group()
    agent.add_argument("--agent-socket", metavar="PATH", help="serve the local agent on PATH")
    agent.add_argument("--no-agent", action="store_true", help="do not start the local agent")
    parser.add_argument(
        "--no-command-runner",
        action="store_true",
        help="do not start the agent's warm command runner (commands then start Python each time)",
    )
    parser.add_argument(
        "--report-config", action="store_true", help="report the configured hardware instead of the real one"
    )
    parser.add_argument(
        "--node-namespaces",
        action="store_true",
        help="emulated nodes (-N) run their jobs with the node's name as hostname and every node's name in "
        "/etc/hosts (private namespaces; what `shoal up` uses)",
    )
    configless.add_arguments(parser, DEFAULT_CONF_CACHE)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    return parser.parse_args(argv)


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def select_nodes(cfg: SlurmConfig, names: list[str] | None, report_config: bool) -> list[HostedNode]:
    """The nodes this process serves: -N names, else the node configured for this host."""
    host = short_hostname()
    if names:
        confs = []
        for name in names:
            conf = cfg.node(name)
            if conf is None:
                raise StartError(f"node {name} not found in {cfg.path}")
            confs.append(conf)
    else:
        confs = [n for n in cfg.nodes if n.name == host] or [
            n for n in cfg.nodes if n.hostname.split(".")[0] == host
        ]
        if len(confs) != 1:
            raise StartError(f"no node in {cfg.path} matches this host ({host}); use -N NODENAME")
    overrides = report_config or "config_overrides" in cfg.slurmd_parameters
    real = len(confs) == 1 and confs[0].name == host and not overrides
    return [
        HostedNode(
            conf, spool_root(cfg.slurmd_spool_dir, conf.name, host), cfg.slurmd_port_of(conf), not real
        )
        for conf in confs
    ]


def admin_uids(cfg: SlurmConfig) -> frozenset[int]:
    """Who may launch and signal jobs here: root and SlurmUser (ctld's identity)."""
    uids = {0, os.geteuid()}
    try:
        uids.add(pwd.getpwnam(cfg.slurm_user).pw_uid)
    except KeyError:
        pass
    return frozenset(uids)


def _setup_logging(cfg: SlurmConfig, args: argparse.Namespace, first_node: str) -> None:
    """-L, else SlurmdLogFile (%n: the first node served, %h: this host), else stderr; -D copies to stderr."""
    path = (args.logfile or cfg.slurmd_log_file).replace("%n", first_node).replace("%h", short_hostname())
    try:
        setup_logging(
            path or None,
            logging.DEBUG if args.verbose > 1 else logging.INFO,
            args.foreground,
            "[%(asctime)s] %(levelname)s: %(message)s",
        )
    except OSError as exc:
        raise StartError(f"cannot open log file {path}: {exc.strerror or exc}") from exc


@dataclass
class Noded:
    """Everything a running noded holds, started and stopped together."""

    servers: list[grpc.Server]
    reporter: Reporter | None = None
    agent: AgentServer | None = None
    health: HealthChecker | None = None
    pid_file: str = ""
    reload: Callable[[], None] = lambda: None  # re-read the configuration (SIGHUP)

    def write_pid_file(self, path: str) -> None:
        """SlurmdPidFile: a failure is logged, not fatal (Slurm does the same)."""
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="ascii") as fh:
                fh.write(f"{os.getpid()}\n")
        except OSError as exc:
            log.error("cannot write pid file %s: %s", path, exc.strerror or exc)
            return
        self.pid_file = path

    def stop(self) -> None:
        if self.health is not None:
            self.health.stop()
        if self.reporter is not None:
            self.reporter.stop()
        for server in self.servers:
            server.stop(grace=1).wait()
        if self.agent is not None:
            self.agent.stop()
        stepd_spawn.stop_fork_server()
        if self.pid_file:
            try:
                os.unlink(self.pid_file)
            except OSError:
                pass


def start_servers(nodes: list[HostedNode], service: NodeAgentService, key: bytes) -> list[grpc.Server]:
    """One authenticated gRPC server per node on NodeAddr:Port; BindError names the address."""
    servers: list[grpc.Server] = []
    try:
        for node in nodes:
            server = make_server([f"{node.conf.addr or node.name}:{node.port}"], key)
            node_pb2_grpc.add_NodeAgentServicer_to_server(service, server)
            server.start()
            servers.append(server)
    except BindError:
        for server in servers:
            server.stop(None)
        raise
    return servers


def prepare_spools(nodes: list[HostedNode]) -> None:
    for node in nodes:
        try:
            node.spool.mkdir(parents=True, exist_ok=True)
            os.chmod(node.spool, 0o755)
        except OSError as exc:
            raise StartError(f"cannot create spool directory {node.spool}: {exc.strerror or exc}") from exc


def load_nvml() -> Any | None:
    """NVML for discovery and GPU usage sampling: the real driver, else $SHOAL_FAKE_NVML, else None."""
    try:
        return load_backend()
    except (OSError, ValueError) as exc:
        raise StartError(f"cannot load the fake NVML description: {exc}") from exc


def discover_node_gpus(
    cfg: SlurmConfig, nodes: list[HostedNode], nvml: Any | None
) -> dict[str, list[cluster_pb2.GpuDevice]]:
    """Each served node's GPUs, found once at start: NVML (real, else $SHOAL_FAKE_NVML), else gres.conf."""
    found = {
        n.name: [to_proto(g) for g in gpu_discovery.node_gpus(n.name, cfg.gres_conf, nvml)] for n in nodes
    }
    for name, gpus in found.items():
        if gpus:
            log.info("%s: %d GPU(s)%s", name, len(gpus), " (NVML)" if nvml is not None else " (gres.conf)")
    return found


def gpu_files(gpus: list[cluster_pb2.GpuDevice]) -> dict[int, str]:
    return {g.index: g.file for g in gpus if g.file}


def gpu_cpus(gpus: list[cluster_pb2.GpuDevice]) -> dict[int, tuple[int, ...]]:
    """Each GPU's affine CPUs, as discovery reported them (what --gpu-bind=closest binds by)."""
    return {g.index: tuple(parse_cpu_list(g.cpu_affinity)) for g in gpus if g.cpu_affinity}


def cgroup_scope(cfg: SlurmConfig, node: HostedNode) -> str:
    """Emulated nodes of several local clusters share one machine: their cgroups carry the config's hash."""
    return f"{zlib.crc32(os.path.abspath(cfg.path).encode()):08x}_" if node.emulated else ""


def node_identities(cfg: SlurmConfig, nodes: list[HostedNode]) -> list[HostedNode]:
    """Emulated nodes get their own hostname and the cluster's names in /etc/hosts inside their jobs
    (noded.nodens), when this process can make the namespaces; a real node never does."""
    emulated = [n for n in nodes if n.emulated]
    if not emulated:
        return nodes
    probe = subprocess.run(
        [sys.executable, "-P", "-m", "noded.nodens", "--probe"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        log.warning(
            "node names will not resolve inside jobs: cannot make private namespaces as uid %d (%s)%s",
            os.geteuid(),
            probe.stderr.strip() or f"exit {probe.returncode}",
            "; allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces) or run as root"
            if os.geteuid()
            else "",
        )
        return nodes
    names = [(n.name, n.addr) for n in cfg.nodes]
    out = []
    for node in nodes:
        if node.emulated:
            try:
                hosts = nodens.write_hosts(node.spool, names)
            except OSError as exc:
                raise StartError(
                    f"cannot write {node.spool / nodens.HOSTS_FILE}: {exc.strerror or exc}"
                ) from exc
            node = dataclasses.replace(node, identity=nodens.identity(node.name, hosts))
        out.append(node)
    return out


def hook_config(cfg: SlurmConfig) -> HookConfig:
    """The scripts slurm.conf names (Prolog, Epilog, TaskProlog, TaskEpilog, RebootProgram)."""
    return HookConfig(
        prolog=cfg.prolog,
        epilog=cfg.epilog,
        task_prolog=cfg.task_prolog,
        task_epilog=cfg.task_epilog,
        timeout=cfg.prolog_epilog_timeout,
        cluster_name=cfg.cluster_name,
        slurm_conf=os.path.abspath(cfg.path),
        flags=cfg.prolog_flags,
        reboot_program=cfg.reboot_program,
        rlimits=cfg.propagate_rlimits,
    )


def health_check_config(cfg: SlurmConfig) -> HealthCheckConfig:
    return HealthCheckConfig(
        cfg.health_check_program,
        cfg.health_check_interval,
        cfg.health_check_node_state,
        os.path.abspath(cfg.path),
    )


def ctld_node_state(stub: Stub) -> NodeState:
    """A node's state as ctld has it (HealthCheckNodeState picks nodes by it); "" when ctld does not answer."""

    def state(name: str) -> str:
        try:
            reply = stub.call(
                GET_NODES,
                controller_pb2.GetNodesRequest(names=[name]),
                controller_pb2.GetNodesResponse,
                timeout=5,
            )
        except grpc.RpcError:
            return ""
        return reply.nodes[0].state if reply.nodes else ""

    return state


def ctld_drain(stub: Stub) -> Callable[[str, str], None]:
    """Drain a node through ctld as root (a node's failed Prolog/Epilog of a step); failures are logged."""

    def drain(name: str, reason: str) -> None:
        fields = [
            common_pb2.KeyValue(key="State", value="DRAIN"),
            common_pb2.KeyValue(key="Reason", value=reason),
        ]
        try:
            stub.call(
                UPDATE_NODE,
                controller_pb2.UpdateNodeRequest(nodes=name, fields=fields),
                controller_pb2.UpdateNodeResponse,
                timeout=10,
                attempts=3,
            )
        except grpc.RpcError as exc:
            log.error("%s: cannot drain (%s): %s", name, reason, exc.details())

    return drain


def build(args: argparse.Namespace, start_time: int) -> Noded:
    conf_path = args.conf or os.environ.get("SLURM_CONF") or DEFAULT_CONF
    if args.conf_server:
        try:
            conf_path = configless.start(args.conf_server, args.conf_cache, args.key_file).conf
        except configless.ConfiglessError as exc:
            raise StartError(str(exc)) from exc
    try:
        cfg = load_slurm_conf(conf_path)
    except ConfigError as exc:
        raise StartError(str(exc)) from exc
    except OSError as exc:
        raise StartError(f"cannot read {conf_path}: {exc.strerror or exc}") from exc
    if args.conf_server:  # the key that fetched the files is the cluster's, wherever head keeps its own
        cfg = dataclasses.replace(cfg, auth_key_file=args.key_file)
    nodes = select_nodes(cfg, args.nodes, args.report_config)
    try:
        key = load_key(cfg.auth_key_file)
    except AuthError as exc:
        raise StartError(exc.message) from exc
    _setup_logging(cfg, args, nodes[0].name)
    prepare_spools(nodes)
    for node in nodes:  # an emulated node rebooted by its RebootProgram (noded.reboot) boots now
        reboot.boot_at_start(node, start_time)
    for node in nodes:  # before serving: what was lost while no noded ran is a node failure (noded.jobs)
        lost = jobs.sweep_after_start(node.spool)
        if lost:
            log.warning("%s: job(s) %s lost while shoal-noded was not running", node.name, lost)
    nvml = load_nvml()
    node_gpus = discover_node_gpus(cfg, nodes, nvml)
    try:
        nodes = [
            dataclasses.replace(
                n,
                isolation=load_isolation(cfg.path, gpu_files(node_gpus[n.name]), cgroup_scope(cfg, n)),
                gpu_cpus=gpu_cpus(node_gpus[n.name]),
            )
            for n in nodes
        ]
    except ConfigError as exc:
        raise StartError(str(exc)) from exc
    if args.node_namespaces:
        nodes = node_identities(cfg, nodes)
    nodes = [dataclasses.replace(n, hooks=hook_config(cfg)) for n in nodes]

    def hardware(node: HostedNode) -> cluster_pb2.NodeHardware:
        current = discover_hardware()
        current.ClearField("gpus")
        current.gpus.extend(node_gpus[node.name])
        reported = hardware_for(node.conf, current, node.emulated)
        reported.boot_time = reboot.boot_time(node, reported.boot_time)
        return reported

    service = NodeAgentService(
        {n.name: n for n in nodes}, key, admin_uids(cfg), float(cfg.kill_wait), start_time
    )
    if args.conf_server:  # jobs here read the cached copy, not ctld's path
        service.local_conf = conf_path
    stepd_spawn.start_fork_server()  # before the gRPC servers: jobs may arrive at once
    servers = start_servers(nodes, service, key)
    noded = Noded(servers)
    if cfg.slurmd_pid_file:
        noded.write_pid_file(cfg.slurmd_pid_file.replace("%n", nodes[0].name).replace("%h", short_hostname()))
    try:
        ctld_target = ",".join(ctld_addresses(cfg))  # every SlurmctldHost, tried in order
        if not args.no_agent:
            socket_path = args.agent_socket or cfg.agent_socket
            # ctld and dbd: sacct and sacctmgr work on a compute node (inside jobs) as on a login host
            noded.agent = AgentServer(
                socket_path,
                key,
                targets_from_config(cfg),
                host=socket.gethostname(),
                command_runner=not args.no_command_runner,
            )
            noded.agent.start()
        health = health_check_config(cfg)
        if health.program:  # once before the nodes register and take work, as slurmd does
            check_all(nodes, health)
        sampler = GpuSampler(nvml) if nvml is not None else None
        ctld = Stub(ctld_target, key)
        noded.reporter = Reporter(nodes, ctld, hardware, shoal.__version__, start_time, gpu_sampler=sampler)
        service.on_ctld_ping = noded.reporter.ctld_pinged
        reporter = noded.reporter
        service.live_gpus = lambda node: reporter.live_gpus(node, [g.index for g in node_gpus[node.name]])
        service.drain = ctld_drain(ctld)
        noded.reporter.start()
        noded.health = HealthChecker(nodes, health, ctld_node_state(ctld))
        noded.health.start()
        service.reload = noded.reload = partial(
            reload, args, conf_path, nodes, node_gpus, nvml, service, noded.health
        )
    except AgentServerError as exc:
        noded.stop()
        raise StartError(exc.message) from exc
    for node in nodes:
        log.info("%s: serving on %s:%d (spool %s)", node.name, node.conf.addr, node.port, node.spool)
    return noded


def reload(
    args: argparse.Namespace,
    conf_path: str,
    nodes: list[HostedNode],
    node_gpus: dict[str, list[cluster_pb2.GpuDevice]],
    nvml: Any | None,
    service: NodeAgentService,
    health: HealthChecker,
) -> None:
    """ctld's Reconfigure: fetch the files again (configless), read slurm.conf, gres.conf and cgroup.conf,
    and take the hooks, the health check, KillWait, cgroup limits and GPUs from them. A file that does
    not parse is logged and the node runs on as it was (ctld refused it already, or the copy is stale)."""
    try:
        if args.conf_server:
            conf_path = configless.start(args.conf_server, args.conf_cache, args.key_file).conf
        cfg = load_slurm_conf(conf_path)
        gpus = discover_node_gpus(cfg, nodes, nvml)
        fresh = [
            dataclasses.replace(
                n,
                conf=cfg.node(n.name) or n.conf,
                hooks=hook_config(cfg),
                isolation=load_isolation(cfg.path, gpu_files(gpus[n.name]), cgroup_scope(cfg, n)),
                gpu_cpus=gpu_cpus(gpus[n.name]),
            )
            for n in nodes
        ]
    except (ConfigError, configless.ConfiglessError) as exc:
        log.error("reconfigure: %s; the node runs on with its configuration as it was", exc)
        return
    except OSError as exc:
        log.error("reconfigure: cannot read %s: %s", conf_path, exc.strerror or exc)
        return
    node_gpus.update(gpus)  # what the next registration reports
    service.configure({n.name: n for n in fresh}, float(cfg.kill_wait))
    health.configure(fresh, health_check_config(cfg))
    log.info("reconfigure: %s read again (%s)", conf_path, ", ".join(n.name for n in fresh))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    notifier = Notifier()
    stop = threading.Event()
    hup = threading.Event()  # SIGHUP: re-read the files, as on ctld's Reconfigure (slurmd does the same)
    install_signals(stop, PROG, on_hup=hup.set)
    start_time = int(time.time())
    try:
        noded = build(args, start_time)
    except (StartError, BindError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    notifier.ready()
    try:
        while not stop.wait(1.0):
            if hup.is_set():
                hup.clear()
                noded.reload()
    finally:
        notifier.stopping()
        noded.stop()
        log.info("shoal-noded stopped; running jobs continue under their stepd")
    return 0


if __name__ == "__main__":
    sys.exit(main())
