"""Four separate hosts on this machine: head (ctld + dbd), gpu1 and gpu2 (one shoal-noded each, fake
NVML), login (shoal-agentd), each in its own network, UTS and mount namespaces.

Each host is a holder process (`sleep infinity`) in a network namespace `shoalh<NET>-<host>` whose
eth0 is a veth onto a bridge in the namespace `shoalh<NET>-br`, on the private subnet
10.253.<NET>.0/24 (SHOAL_TEST_NET), with its own hostname and, in its mount namespace, its own
/etc/hosts (the four names) and its own run directory over the config's shared path (AgentSocket,
pid files: as /run is per host). Every daemon and command of a host enters the holder's namespaces
(`nsenter`, or setns in a forked child for another user). Only head has the config files: gpu1, gpu2
and login start configless (`--conf-server head`) with a copy of the cluster key.
Nothing of it touches the machine's own network, hostname or /etc/hosts; `stop` removes it all.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.conftest import run_as, wait_until

NAMES = ("head", "gpu1", "gpu2", "login")
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWNET, CLONE_FS = 0x00020000, 0x04000000, 0x40000000, 0x00000200


def net() -> int:
    return int(os.environ.get("SHOAL_TEST_NET", "10")) % 250


def prefix() -> str:
    return f"shoalh{net()}-"


def why_not() -> str | None:
    """Why this machine cannot build the hosts (the module skips with it), or None."""
    if os.geteuid() != 0:
        return "separate hosts need root (network, UTS and mount namespaces, veth pairs, a bridge)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"separate hosts need the {tool} command"
    # names of this process's own: every xdist worker probes while it collects, at the same time
    probe = f"{prefix()}probe{os.getpid()}"
    veth = f"sp{os.getpid()}"  # an interface name has at most 15 characters
    out = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if out.returncode != 0:
        return f"cannot make a network namespace: {out.stderr.strip()}"
    try:
        out = subprocess.run(
            ["ip", "netns", "exec", probe, "unshare", "--uts", "--mount", "true"],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            return f"cannot make UTS and mount namespaces: {out.stderr.strip()}"
        out = subprocess.run(
            ["ip", "link", "add", f"{veth}a", "type", "veth", "peer", "name", f"{veth}b"],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            return f"cannot make a veth pair: {out.stderr.strip()}"
        subprocess.run(["ip", "link", "del", f"{veth}a"], capture_output=True)
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")


@dataclass
class Host:
    name: str
    addr: str
    dir: Path  # this host's own files: hosts, run/, spool/, the key
    holder: subprocess.Popen[bytes] | None = None
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def netns(self) -> str:
        return f"{prefix()}{self.name}"

    @property
    def cache(self) -> Path:
        return self.dir / "spool" / "conf-cache"

    def _pid(self) -> int:
        assert self.holder is not None
        return self.holder.pid

    def wrap(self, argv: list[str]) -> list[str]:
        return ["nsenter", "-t", str(self._pid()), "--net", "--uts", "--mount", "--", *argv]

    def spawn(self, argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                self.wrap(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.daemons.append(proc)
        return proc

    def enter(self) -> Callable[[], None]:
        """For a forked child: join this host's namespaces (a command run here as another user)."""
        pid = self._pid()

        def join() -> None:  # in the child, still root: the parent keeps no descriptors open
            libc = ctypes.CDLL(None, use_errno=True)
            # joining a mount namespace needs a filesystem context of our own (else EINVAL: seen in
            # the full suite's xdist workers, never alone)
            if libc.unshare(CLONE_FS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_FS)")
            names = ("net", "uts", "mnt")
            fds = [os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY) for ns in names]
            for fd, kind, name in zip(fds, (CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWNS), names, strict=True):
                if libc.setns(fd, kind) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns({name}) into {pid}'s namespace: {os.strerror(errno)}")
                os.close(fd)

        return join

    def uts_inode(self) -> int:
        return os.stat(f"/proc/{self._pid()}/ns/uts").st_ino

    def processes(self, include_holder: bool = False) -> list[int]:
        """Every process in this host's UTS namespace (its daemons, stepds and tasks)."""
        inode, found = self.uts_inode(), []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or (int(entry) == self._pid() and not include_holder):
                continue
            try:
                if os.stat(f"/proc/{entry}/ns/uts").st_ino == inode:
                    found.append(int(entry))
            except OSError:
                continue
        return found


@dataclass
class Hosts:
    dir: Path
    hosts: dict[str, Host]
    env: dict[str, str]

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    @property
    def login_conf(self) -> str:
        return str(self.hosts["login"].cache / "slurm.conf")

    def run(
        self,
        *argv: str,
        host: str = "login",
        user: int | None = None,
        input: str | None = None,
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 90,
    ) -> subprocess.CompletedProcess[str]:
        """A command on `host` (login by default), as root or as `user`, with that host's SLURM_CONF."""
        h = self.hosts[host]
        full = dict(self.env, SLURM_CONF=str(h.cache / "slurm.conf"), **(env or {}))
        if user is not None:
            return run_as(user, argv, full, cwd or self.dir / "work", input, timeout, enter=h.enter())
        cmd = h.wrap([sys.executable, "-P", "-m", f"cli.{argv[0]}", *argv[1:]])
        return subprocess.run(
            cmd,
            env=full,
            cwd=cwd or self.dir / "work",
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *argv: str, **kw: object) -> str:
        out = self.run(*argv, **kw)  # type: ignore[arg-type]
        assert out.returncode == 0, f"{argv} failed ({out.returncode}): {out.stderr}"
        return out.stdout

    def shell(self, host: str, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.hosts[host].wrap(["sh", "-c", script]),
            capture_output=True,
            text=True,
            timeout=30,
            env=self.env,
        )

    def log(self, name: str) -> str:
        path = self.dir / "log" / f"{name}.log"
        return path.read_text() if path.exists() else ""


SLURM_CONF = """ClusterName=hosts
SlurmctldHost=head({head})
SlurmctldParameters=enable_configless
SlurmUser=root
AuthKeyFile={etc}/shoal.key
AgentSocket={d}/run/agent.sock
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/run/ctld.pid
SlurmdPidFile={d}/run/noded.pid
SlurmctldLogFile={d}/log/ctld.log
SlurmdLogFile={d}/log/noded-%n.log
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost={head}
JobAcctGatherType=jobacct_gather/linux
KillWait=2
SlurmdTimeout=10
ReturnToService=2
MinJobAge=300
NodeName=DEFAULT CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:h100:8
NodeName=gpu1 NodeAddr={gpu1} NodeHostname=gpu1
NodeName=gpu2 NodeAddr={gpu2} NodeHostname=gpu2
PartitionName=batch Nodes=gpu[1-2] Default=YES MaxTime=INFINITE State=UP
"""

SLURMDBD_CONF = """StorageType=accounting_storage/sqlite
StorageLoc={d}/state/acct.sqlite
DbdHost={head}
SlurmUser=root
AuthKeyFile={etc}/shoal.key
LogFile={d}/log/dbd.log
PidFile={d}/run/dbd.pid
"""


def _hosts_file(hosts: dict[str, Host]) -> str:
    return "127.0.0.1\tlocalhost\n" + "".join(f"{h.addr}\t{h.name}\n" for h in hosts.values())


def start(directory: Path, users: tuple[str, ...] = ("root",)) -> Hosts:
    """Build the network and the four hosts, start the daemons, wait for both nodes idle."""
    from shoal.auth.key import generate_key

    base = f"10.253.{net()}"
    hosts = {n: Host(n, f"{base}.{i + 1}", directory / "hosts" / n) for i, n in enumerate(NAMES)}
    for sub in ("log", "run", "state", "spool", "work"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(directory / "work", 0o1777)
    for p in (directory, *directory.parents):  # other users reach the sockets and their job files
        if str(p) in ("/", "/tmp"):
            break
        p.chmod(p.stat().st_mode | 0o011)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SINFO_"))
    }
    env.pop("SHOAL_AGENT_SOCKET", None)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")) if p
    )
    cluster = Hosts(directory, hosts, env)
    try:
        _build_network(hosts)
        etc = hosts["head"].dir / "etc"
        etc.mkdir(parents=True)
        fmt = {"d": directory, "etc": etc, **{n: h.addr for n, h in hosts.items()}}
        (etc / "slurm.conf").write_text(SLURM_CONF.format(**fmt))
        (etc / "slurmdbd.conf").write_text(SLURMDBD_CONF.format(**fmt))
        (etc / "gres.conf").write_text("NodeName=gpu[1-2] Name=gpu Type=h100 Count=8\n")
        (etc / "cgroup.conf").write_text("CgroupPlugin=autodetect\n")  # served; nothing constrained
        generate_key(str(etc / "shoal.key"))
        for h in hosts.values():
            (h.dir / "run").mkdir(parents=True, exist_ok=True)
            (h.dir / "spool").mkdir(parents=True, exist_ok=True)
            (h.dir / "hosts").write_text(_hosts_file(hosts))
            if h.name != "head":  # the key is the one file an admin copies to every host
                shutil.copyfile(etc / "shoal.key", h.dir / "shoal.key")
                os.chmod(h.dir / "shoal.key", 0o600)
            h.holder = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    h.netns,
                    "unshare",
                    "--uts",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    f"mount --bind {h.dir}/hosts /etc/hosts && mount --bind {h.dir}/run {directory}/run && "
                    f"hostname {h.name} && exec sleep infinity",
                ],
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        for h in hosts.values():
            wait_until(f"{h.name}'s namespaces", lambda h=h: _named(h), timeout=20)
        _start_daemons(cluster, etc)
        wait_until("gpu1 and gpu2 idle", lambda: _idle(cluster), timeout=90)
        for words in (
            ["add", "cluster", "hosts"],
            ["add", "account", "research", "Description=r", "Organization=r"],
            ["add", "user", ",".join(users), "Account=research", "DefaultAccount=research"],
        ):
            wait_until(f"sacctmgr {' '.join(words)}", lambda w=words: _sacctmgr(cluster, w), timeout=60)
        wait_until(
            "ctld to load the accounts",
            lambda: (
                "research" in cluster.run("sacctmgr", "-n", "-P", "show", "assoc", "format=account").stdout
            ),
            timeout=30,
        )
    except BaseException:
        logs = "".join(
            f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (directory / "log").glob("*") if p.is_file()
        )
        stop(cluster)
        raise RuntimeError(f"the separate hosts did not come up; logs:\n{logs}") from None
    return cluster


def _named(h: Host) -> bool:
    try:
        return Path(f"/proc/{h._pid()}/comm").read_text().strip() == "sleep"
    except OSError:
        return False


def _idle(cluster: Hosts) -> bool:
    out = cluster.run("sinfo", "-h", "-N", "-o", "%N %t")
    return out.returncode == 0 and sorted(out.stdout.split()) == ["gpu1", "gpu2", "idle", "idle"]


def _sacctmgr(cluster: Hosts, words: list[str]) -> bool:
    out = cluster.run("sacctmgr", "-i", *words)
    return out.returncode == 0 or "already exists" in out.stderr


def remove_stale() -> None:
    """What a run killed before its teardown left: its namespaces and the processes still in them."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in (line.split()[0] for line in out.splitlines() if line.startswith(prefix())):
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def _build_network(hosts: dict[str, Host]) -> None:
    remove_stale()
    bridge = f"{prefix()}br"
    _ip("netns", "add", bridge)
    _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
    _ip("-n", bridge, "link", "set", "br0", "up")
    for h in hosts.values():
        _ip("netns", "add", h.netns)
        _ip(
            "link",
            "add",
            "eth0",
            "netns",
            h.netns,
            "type",
            "veth",
            "peer",
            "name",
            f"v-{h.name}",
            "netns",
            bridge,
        )
        _ip("-n", bridge, "link", "set", f"v-{h.name}", "master", "br0", "up")
        _ip("-n", h.netns, "addr", "add", f"{h.addr}/24", "dev", "eth0")
        _ip("-n", h.netns, "link", "set", "eth0", "up")
        _ip("-n", h.netns, "link", "set", "lo", "up")


def _start_daemons(cluster: Hosts, etc: Path) -> None:
    py, env, log = sys.executable, cluster.env, cluster.dir / "log"
    head = cluster["head"]
    head.spawn([py, "-P", "-m", "dbd.main", "-f", str(etc / "slurmdbd.conf")], log / "dbd.out", env)
    ctld = head.spawn([py, "-P", "-m", "ctld.main", "-f", str(etc / "slurm.conf")], log / "ctld.out", env)
    # as under systemd (After=shoal-ctld): a configless daemon needs ctld answering, or its cache
    wait_until(
        "shoal-ctld listening",
        lambda: "listening on" in cluster.log("ctld") or ctld.poll() is not None,
        timeout=60,
    )
    if ctld.poll() is not None:
        raise RuntimeError(f"shoal-ctld exited with status {ctld.returncode}")
    for name in ("gpu1", "gpu2"):
        h = cluster[name]
        h.spawn(
            [
                py,
                "-P",
                "-m",
                "noded.main",
                "--conf-server",
                "head",
                "--conf-cache",
                str(h.cache),
                "--key-file",
                str(h.dir / "shoal.key"),
            ],
            log / f"noded-{name}.out",
            dict(env, SHOAL_FAKE_NVML="dgx_h100"),
        )
    login = cluster["login"]
    login.spawn(
        [
            py,
            "-P",
            "-m",
            "shoal.agent.agentd",
            "--conf-server",
            "head",
            "--conf-cache",
            str(login.cache),
            "--key-file",
            str(login.dir / "shoal.key"),
            "-v",
        ],
        log / "agentd-login.out",
        env,
    )


def restart(cluster: Hosts, host: str, module: str, *args: str) -> subprocess.Popen[bytes]:
    """Stop `host`'s daemon `module` (SIGTERM) and start it again, with `args` instead of its old
    arguments when given; for ctld, wait until it listens again."""
    h = cluster[host]
    old = next(p for p in h.daemons if module in p.args and p.poll() is None)  # type: ignore[operator]
    argv = list(old.args)[list(old.args).index("--") + 1 :]  # type: ignore[arg-type]
    old.terminate()
    old.wait(timeout=30)
    h.daemons.remove(old)
    if args:
        argv = argv[: argv.index(module) + 1] + list(args)
    listening = cluster.log("ctld").count("listening on")
    log = cluster.dir / "log" / f"{module.split('.')[-2 if module.endswith('.main') else -1]}-{host}.out"
    env = dict(cluster.env, SHOAL_FAKE_NVML="dgx_h100") if module == "noded.main" else cluster.env
    proc = h.spawn(argv, log, env)
    if module == "ctld.main":
        wait_until(
            "shoal-ctld listening again",
            lambda: cluster.log("ctld").count("listening on") > listening,
            timeout=60,
        )
    if module == "shoal.agent.agentd":  # it serves its socket once it has its configuration
        sock = h.dir / "run" / "agent.sock"
        wait_until(f"{host}'s agent socket", lambda: sock.exists() or proc.poll() is not None, timeout=60)
    return proc


def kill_host_processes(h: Host) -> list[int]:
    """kill -9 every process of a host but its holder (a crash of the machine's daemons and jobs)."""
    pids = h.processes()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return pids


def stop(cluster: Hosts) -> None:
    """Stop the daemons, kill whatever is left in the hosts, remove the namespaces (and so the veths
    and the bridge). Safe on a half-built cluster."""
    for h in cluster.hosts.values():
        for proc in h.daemons:
            if proc.poll() is None:
                proc.terminate()
    deadline = time.monotonic() + 10
    for h in cluster.hosts.values():
        for proc in h.daemons:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for h in cluster.hosts.values():
        if h.holder is None:
            continue
        if h.holder.poll() is None:
            for _ in range(3):
                if not kill_host_processes(h):
                    break
                time.sleep(0.2)
            h.holder.kill()
        h.holder.wait()
    for name in [*(h.netns for h in cluster.hosts.values()), f"{prefix()}br"]:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


class PinnedNamespaces:
    """The hosts' UTS namespaces held open across `stop`, so `leftovers` can name processes still in
    them. A namespace's inode number is freed with the namespace, and the next one made anywhere on
    the machine (another worker's job steps enter fresh ones all the time) may get it; a held
    descriptor keeps the namespace, and with it its number, for as long as the check needs it."""

    def __init__(self, cluster: Hosts) -> None:
        self._fds = [os.open(f"/proc/{h._pid()}/ns/uts", os.O_RDONLY) for h in cluster.hosts.values()]
        self.inodes = frozenset(os.fstat(fd).st_ino for fd in self._fds)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def leftovers(uts_inodes: Collection[int] = ()) -> list[str]:
    """Namespaces of this fixture still present, and processes still in the hosts' UTS namespaces
    (`uts_inodes`: PinnedNamespaces' numbers, pinned before `stop`): none after `stop`."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found = [f"netns {line.split()[0]}" for line in out.splitlines() if line.startswith(prefix())]
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{entry}/ns/uts").st_ino in uts_inodes:
                found.append(f"process {entry}: {Path(f'/proc/{entry}/cmdline').read_bytes()!r}")
        except OSError:
            continue
    return found
