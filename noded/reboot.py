"""RebootProgram: what noded runs, as root, when ctld issues a node's reboot (`scontrol reboot`).

As Slurm's slurmd, noded runs the program and expects the machine to go down; the node is back when it
registers with a newer boot time. An emulated node (several share one host) cannot reboot the host:
its boot is the start of the noded that serves it after the reboot was issued. So noded marks the
node's spool before it runs the program, and a noded that starts and finds the mark takes its own start
as the node's boot time (kept in the spool and reported from then on instead of the host's).
etc/reboot/restart_noded.py is such a program: it restarts the noded that runs it. The program learns
its node from SLURMD_NODENAME (shoal's addition, as for HealthCheckProgram; 22.05 passes none).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from noded import healthcheck, hooks
from noded.node import HostedNode

log = logging.getLogger("shoal.noded")

REBOOT_MARK = "reboot-issued"  # in an emulated node's spool: its reboot was issued, not done yet
BOOT_TIME = "boot-time"  # in an emulated node's spool: when it last "booted" (epoch seconds)
PROGRAM_TIMEOUT_S = 60  # a real node's program returns while the machine goes down


def boot_at_start(node: HostedNode, now: int) -> None:
    """At noded's start: an emulated node whose reboot was issued boots now."""
    mark = node.spool / REBOOT_MARK
    if not node.emulated or not mark.exists():
        return
    try:
        (node.spool / BOOT_TIME).write_text(f"{now}\n")
        mark.unlink()
    except OSError as exc:
        log.error("%s: cannot record its boot after the reboot: %s", node.name, exc.strerror or exc)
        return
    log.info("%s: booted (its reboot was issued before this start)", node.name)


def boot_time(node: HostedNode, host_boot: int) -> int:
    """The boot time a node reports: the host's, or an emulated node's own once it has rebooted."""
    if not node.emulated:
        return host_boot
    try:
        return int((node.spool / BOOT_TIME).read_text().strip())
    except (OSError, ValueError):
        return host_boot


def start(node: HostedNode) -> str:
    """Run the node's RebootProgram in the background; "" or why it cannot be run."""
    program = node.hooks.reboot_program
    if not program:
        return "RebootProgram isn't defined"
    if node.emulated:
        try:
            _mark(node.spool)
        except OSError as exc:
            return f"cannot mark {node.spool / REBOOT_MARK}: {exc.strerror or exc}"
    log.info("%s: Node reboot request being processed: running %s", node.name, program)
    threading.Thread(target=_run, args=(node, program), name=f"reboot-{node.name}", daemon=True).start()
    return ""


def _mark(spool: Path) -> None:
    (spool / REBOOT_MARK).write_text("")


def _run(node: HostedNode, program: str) -> None:
    env = healthcheck.environment(node, node.hooks.slurm_conf)
    result = hooks.run_script(program, env, PROGRAM_TIMEOUT_S, "RebootProgram", threaded=True)
    if not result.ok:
        log.error("%s: %s", node.name, result.message)
