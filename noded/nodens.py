"""An emulated node's own name for its job steps: hostname and /etc/hosts, in private namespaces.

On a local cluster (`shoal up`: one noded emulating several nodes on loopback addresses) every node
is the same host, and node names resolve nowhere. The usual batch script computes its rendezvous
from `scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1` and torchrun decides who hosts the
store by comparing that name with `hostname`; both must work. So, only when noded is asked to
(`--node-namespaces`, which `shoal up` passes) and only for emulated nodes, each batch script and
task starts in a mount namespace where /etc/hosts is the cluster's node lines followed by the
host's file, and a UTS namespace whose hostname is the node's name. A noded that is not root gets
those namespaces through an unprivileged user namespace (its uid and gid mapped to themselves), where
the kernel allows one. Never on a real node. Standard library only (stepd and taskd import it).
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_DUMPABLE = 4
HOSTS = "/etc/hosts"
HOSTS_FILE = "hosts"  # in the node's spool directory


class NamespaceError(OSError):
    """The namespaces could not be made; str() says which step failed and why."""


def hosts_text(nodes: Iterable[tuple[str, str]], host_hosts: str) -> str:
    """The cluster's `ADDR NAME` lines first (they win a lookup), then the host's own file, less any
    name the cluster defines (a host line naming node1 would otherwise shadow nothing but confuse)."""
    pairs = [(name, addr) for name, addr in nodes if name and addr]
    names = {name for name, _addr in pairs}
    lines = ["# Node names of this local shoal cluster (written by shoal-noded --node-namespaces)."]
    lines += [f"{addr}\t{name}" for name, addr in pairs]
    lines.append("# The host's /etc/hosts:")
    for line in host_hosts.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) > 1 and names.intersection(words[1:]):
            kept = [w for w in words[1:] if w not in names]
            if not kept:
                continue
            line = "\t".join([words[0], *kept])
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_hosts(spool: Path, nodes: Iterable[tuple[str, str]]) -> str:
    """Write the node's hosts file (0644: every job's user reads it as /etc/hosts); returns its path."""
    try:
        host_hosts = Path(HOSTS).read_text()
    except OSError:
        host_hosts = ""
    path = spool / HOSTS_FILE
    tmp = spool / f".{HOSTS_FILE}.tmp"
    tmp.write_text(hosts_text(nodes, host_hosts))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return str(path)


def identity(hostname: str, hosts: str) -> dict[str, str]:
    """What launch.json / tasks.json carry: {} = run in the host's namespaces."""
    return {"hostname": hostname, "hosts": hosts}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)  # this process's symbols: libc's unshare and mount


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise NamespaceError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def enter(ident: Mapping[str, str]) -> None:
    """In the job's child, before it drops privileges: private mount and UTS namespaces (and a user
    namespace when not root), /etc/hosts bound to the node's file, hostname set to the node's name."""
    hostname, hosts = ident.get("hostname", ""), ident.get("hosts", "")
    if not hostname:
        return
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNS | CLONE_NEWUTS
    if uid != 0:
        flags |= CLONE_NEWUSER
    _check(libc.unshare(flags), "unshare")
    if uid != 0:
        # a process that changed its uid is not dumpable, and /proc/self's files are then root's
        _check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
            _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
        except OSError as exc:
            raise NamespaceError(exc.errno or 0, f"user namespace id maps: {exc.strerror}") from exc
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    if hosts and os.path.exists(HOSTS):
        _check(
            libc.mount(hosts.encode(), HOSTS.encode(), None, MS_BIND, None), f"mount --bind {hosts} {HOSTS}"
        )
    try:
        socket.sethostname(hostname)
    except OSError as exc:
        raise NamespaceError(exc.errno or 0, f"sethostname {hostname}: {exc.strerror}") from exc


def main(argv: list[str] | None = None) -> int:
    """`python -m noded.nodens --probe`: exit 0 when this user can give jobs their node's name
    (the process is thrown away: it enters the namespaces itself); else why not, on stderr.
    `--exec HOSTNAME HOSTS -- PROGRAM`: run PROGRAM in those namespaces (noded's health check: a
    threaded noded must not enter them between fork and exec itself)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 5 and args[0] == "--exec" and args[3] == "--":
        try:
            enter(identity(args[1], args[2]))
            os.execv(args[4], args[4:])
        except OSError as exc:
            print(f"{args[4]}: {exc.strerror or exc}", file=sys.stderr)
            return 127
    if args != ["--probe"]:
        print("usage: python -m noded.nodens --probe | --exec HOSTNAME HOSTS -- PROGRAM", file=sys.stderr)
        return 2
    try:
        enter(identity("shoal-probe", ""))
    except OSError as exc:
        print(exc.strerror or str(exc), file=sys.stderr)
        return 1
    return 0 if socket.gethostname() == "shoal-probe" else 1


if __name__ == "__main__":
    sys.exit(main())
