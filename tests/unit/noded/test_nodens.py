"""noded.nodens: an emulated node's hostname and /etc/hosts for its jobs, the host's left alone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from noded import nodens

NOBODY = 65534


def test_cluster_lines_come_first_and_a_host_line_naming_a_node_loses_that_name() -> None:
    host = "127.0.0.1\tlocalhost\n127.0.1.1 vm node1  # the reference cluster's alias\n::1 localhost\n"
    text = nodens.hosts_text([("node1", "127.9.0.2"), ("node2", "127.9.0.3")], host)
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines[:2] == ["127.9.0.2\tnode1", "127.9.0.3\tnode2"]
    assert "127.0.1.1\tvm" in lines and "127.0.0.1\tlocalhost" in lines and "::1 localhost" in lines
    assert not any("node1" in ln.split()[1:] for ln in lines[2:])


# Run in a fresh interpreter: a pytest process that loaded grpc (other noded tests) may have threads
# again in a forked child, and unshare(CLONE_NEWUSER) refuses a multi-threaded caller. The job's own
# child (stepd, taskd) forks from a stdlib-only supervisor. The helper forks, becomes `uid` and reports.
_HELPER = """
import json, os, socket, sys
from pathlib import Path
from noded import nodens
uid, ident = int(sys.argv[1]), json.loads(sys.argv[2])
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    code = 1
    try:
        os.close(r)
        if uid != os.geteuid():
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        try:
            nodens.enter(ident)
            report = socket.gethostname() + "\\n" + Path("/etc/hosts").read_text()
            code = 0
        except OSError as exc:
            report = f"error: {exc}"
        os.write(w, report.encode())
    finally:
        os._exit(code)
os.close(w)
with os.fdopen(r) as fh:
    sys.stdout.write(fh.read())
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def _in_child(uid: int, ident: dict[str, str]) -> tuple[int, str]:
    """What a job of `uid` sees after nodens.enter(ident): (exit status, hostname + /etc/hosts or the error)."""
    out = subprocess.run(
        [sys.executable, "-c", _HELPER, str(uid), json.dumps(ident)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.returncode, out.stdout + out.stderr


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
def test_a_job_sees_the_node_name_and_its_hosts_file_and_the_host_keeps_its_own(
    tmp_path: Path, uid: int
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (to become root's and nobody's jobs)")
    for d in (tmp_path, *tmp_path.parents):  # nobody's own bind mount needs a path it can walk
        if str(d) in ("/", "/tmp"):
            break
        d.chmod(d.stat().st_mode | 0o011)
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o755)
    hosts = nodens.write_hosts(spool, [("node1", "127.9.0.2"), ("node2", "127.9.0.3")])
    before_name, before_hosts = socket.gethostname(), Path("/etc/hosts").read_text()
    rc, seen = _in_child(uid, nodens.identity("node2", hosts))
    if uid and rc and "unshare" in seen:
        pytest.skip(f"this kernel refuses unprivileged user namespaces: {seen}")
    assert rc == 0, seen
    name, _, etc_hosts = seen.partition("\n")
    assert name == "node2"
    assert etc_hosts == Path(hosts).read_text()
    assert "127.9.0.3\tnode2" in etc_hosts.splitlines()
    assert (socket.gethostname(), Path("/etc/hosts").read_text()) == (before_name, before_hosts)


def test_no_identity_means_the_host_namespaces() -> None:
    rc, seen = _in_child(os.geteuid(), {})
    assert rc == 0, seen
    assert seen.partition("\n")[0] == socket.gethostname()
