"""HealthCheckProgram: noded runs the admin's node check, as Slurm's slurmd does.

Once at start-up, before the nodes register (and so before they take work), then every
HealthCheckInterval seconds on the nodes HealthCheckNodeState selects (ANY, IDLE, ALLOC, MIXED,
NONDRAINED_IDLE; CYCLE spreads the nodes over the interval instead of checking all at once). It
runs as root with a 60 s limit (Slurm's); a failure or a timeout is logged. As in Slurm the program
itself takes the node out of service (`scontrol update nodename=$(hostname) state=drain reason=...`,
through the node's local agent); it learns its node from SLURMD_NODENAME and, for an emulated node
under --node-namespaces, from `hostname` in the node's own UTS namespace.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from noded import hooks
from noded.gpu.discovery import FAKE_ENV
from noded.node import HostedNode

log = logging.getLogger("shoal.noded")

# Where the program finds the standard tools and shoal's own commands (scontrol); shoal's addition:
# Slurm gives it no PATH, and shoal's commands live in its own environment.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NodeState = Callable[[str], str]
"""A node's state as ctld reports it ("IDLE", "MIXED+DRAIN", ...); "" when unknown."""


@dataclass(frozen=True)
class HealthCheckConfig:
    program: str
    interval: int
    states: tuple[str, ...]
    slurm_conf: str


def selected(states: Sequence[str], node_state: str) -> bool:
    """Whether HealthCheckNodeState picks a node in `node_state` ("" = unknown: checked)."""
    wanted = [s for s in states if s != "CYCLE"]
    if "ANY" in wanted or not node_state:
        return True
    words = set(node_state.upper().rstrip("*~#!%$@^-").split("+"))
    base = next(iter(words - {"DRAIN", "DRAINING", "DRAINED", "COMPLETING", "NOT_RESPONDING"}), "")
    drained = bool(words & {"DRAIN", "DRAINING", "DRAINED"})
    return (
        ("IDLE" in wanted and base == "IDLE")
        or ("ALLOC" in wanted and base in ("ALLOCATED", "ALLOC"))
        or ("MIXED" in wanted and base == "MIXED")
        or ("NONDRAINED_IDLE" in wanted and base == "IDLE" and not drained)
    )


def environment(node: HostedNode, slurm_conf: str) -> dict[str, str]:
    """What the programs noded runs for a node itself get (HealthCheckProgram, RebootProgram)."""
    bindir = os.path.dirname(sys.executable)
    env = {"SLURMD_NODENAME": node.name, "SLURM_CONF": slurm_conf, "PATH": f"{bindir}:{SYSTEM_PATH}"}
    if os.environ.get(FAKE_ENV):  # absent hardware: the program sees the fake NVML noded sees
        env[FAKE_ENV] = os.environ[FAKE_ENV]
    return env


def check(node: HostedNode, config: HealthCheckConfig) -> hooks.HookResult:
    """Run the program once for `node`; a failure is logged."""
    result = hooks.run_script(
        config.program,
        environment(node, config.slurm_conf),
        hooks.HEALTH_CHECK_TIMEOUT_S,
        "health check",
        node_ns=node.identity or None,
        threaded=True,
    )
    if not result.ok:
        log.error("%s: %s", node.name, result.message)
    return result


def check_all(nodes: Sequence[HostedNode], config: HealthCheckConfig) -> None:
    """Every node at once (start-up): one thread each, all waited for."""
    threads = [threading.Thread(target=check, args=(n, config), daemon=True) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class HealthChecker:
    """The periodic checks, on a thread of their own."""

    def __init__(self, nodes: Sequence[HostedNode], config: HealthCheckConfig, node_state: NodeState) -> None:
        self._nodes = list(nodes)
        self._config = config
        self._node_state = node_state
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="healthcheck", daemon=True)

    def configure(self, nodes: Sequence[HostedNode], config: HealthCheckConfig) -> None:
        """Take a reconfigure's settings; a checker that was not running starts when it now has work."""
        self._nodes = list(nodes)
        self._config = config
        if not self._thread.is_alive() and not self._stop.is_set():
            self.start()

    def start(self) -> None:
        if self._config.interval > 0 and self._config.program:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _due(self) -> list[HostedNode]:
        return [n for n in self._nodes if selected(self._config.states, self._node_state(n.name))]

    def _loop(self) -> None:
        while True:
            cycle = "CYCLE" in self._config.states
            if self._config.interval <= 0 or not self._config.program:  # turned off by a reconfigure
                if self._stop.wait(1.0):
                    return
            elif cycle:  # one node at a time, spread over the interval
                pause = self._config.interval / max(len(self._nodes), 1)
                for node in self._nodes:
                    if self._stop.wait(pause):
                        return
                    if selected(self._config.states, self._node_state(node.name)):
                        check(node, self._config)
            else:
                if self._stop.wait(self._config.interval):
                    return
                check_all(self._due(), self._config)
