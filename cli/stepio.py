"""srun's side of a step's I/O: a TCP listener the nodes connect back to, and the task streams.

Each node's supervisor connects, says HELLO (node, token, its task ids), then streams frames
(shoal.taskio). Output is written as it comes, whole frames at a time, labelled `N: ` per line
with -l; stdin goes to task 0 (or all tasks, or one) as IN frames; exit statuses are collected.
Memory stays bounded: one reader per node reads a frame, writes it out, then reads the next.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import threading
from dataclasses import dataclass
from typing import BinaryIO

from shoal import taskio

SIG_OOM_SIGNAL = 125


class PortRangeError(Exception):
    """No port of SrunPortRange could be bound (all taken): srun says so and exits 1."""


def parse_port_range(text: str | None) -> tuple[int, int] | None:
    """SrunPortRange=LOW-HIGH; None (any port the kernel picks) when unset or 0-0. ValueError if malformed."""
    if not text or text.strip() == "0-0":
        return None
    low, sep, high = text.strip().partition("-")
    if not sep or not low.isdigit() or not high.isdigit() or not 0 < int(low) <= int(high) <= 65535:
        raise ValueError(
            f"invalid SrunPortRange={text.strip()}: expected LOW-HIGH, 1 <= LOW <= HIGH <= 65535"
        )
    return int(low), int(high)


def listen_socket(port_range: tuple[int, int] | None) -> socket.socket:
    """The step I/O listener on every address: any free port, or the first free one of SrunPortRange
    from a random start (concurrent sruns spread over the range), so firewalls can open only the range."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if port_range is None:
        server.bind(("0.0.0.0", 0))
        return server
    low, high = port_range
    count = high - low + 1
    start = secrets.randbelow(count)
    for i in range(count):
        try:
            server.bind(("0.0.0.0", low + (start + i) % count))
            return server
        except OSError:
            continue
    server.close()
    raise PortRangeError(f"no free port in SrunPortRange={low}-{high} for the step's I/O")


@dataclass(frozen=True)
class TaskExit:
    node: str
    code: int
    signal: int
    max_rss_kb: int = 0  # the task's peak RSS (with the children it waited for)
    cpu_time_us: int = 0  # its user + system CPU time
    oom: bool = False  # killed by the kernel for exceeding the step's (or job's) memory

    @property
    def status(self) -> int:
        """srun's exit status for this task: the code, or 128+n for a signal (Slurm reports an
        OOM kill as its dummy signal 125, SIG_OOM 253 & 0x7f)."""
        if self.oom:
            return 128 + SIG_OOM_SIGNAL
        return 128 + self.signal if self.signal else self.code


class StepIO:
    def __init__(
        self,
        label: bool = False,
        stdin_targets: str = "0",  # "0" (task 0), "all", "none", or a task id
        out: BinaryIO | None = None,
        err: BinaryIO | None = None,
        port_range: tuple[int, int] | None = None,
    ) -> None:
        self.label = label
        self.stdin_targets = stdin_targets
        self.out = out or sys.stdout.buffer
        self.err = err or sys.stderr.buffer
        self.token = secrets.token_hex(16)
        self.server = listen_socket(port_range)
        self.server.listen(256)
        self.port = self.server.getsockname()[1]
        # Reentrant: srun's Ctrl-C handler runs in the main thread, which may hold this lock at that
        # very moment (waiting for the step's end); a plain Lock deadlocked srun there.
        self.lock = threading.RLock()
        self.done = threading.Condition(self.lock)
        self.conns: dict[str, socket.socket] = {}
        self.task_node: dict[int, str] = {}
        self.exits: dict[int, TaskExit] = {}
        self.finished_nodes: set[str] = set()
        self.expected_nodes: int | None = None
        self.on_exit: list[object] = []
        self.terminating = False  # a node that connects after the step was terminated is told too
        self._line_start: dict[tuple[int, int], bool] = {}
        self._out_lock = threading.Lock()
        self._all_connected = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name="srun-io-accept").start()

    # -- connections ------------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            first = taskio.read_frame(conn)
        except (OSError, ValueError):
            first = None
        if first is None or first[0] != taskio.HELLO:
            conn.close()
            return
        hello = json.loads(first[2])
        if hello.get("token") != self.token:
            conn.close()
            return
        node = str(hello.get("node", "?"))
        with self.lock:
            self.conns[node] = conn
            for t in hello.get("tasks", []):
                self.task_node[int(t)] = node
            if self.expected_nodes is not None and len(self.conns) >= self.expected_nodes:
                self._all_connected.set()
            late = self.terminating
        if late:
            try:
                conn.sendall(taskio.frame(taskio.SIGNAL, 0, b"0"))
            except OSError:
                pass
        while True:
            try:
                got = taskio.read_frame(conn)
            except (OSError, ValueError):
                got = None
            if got is None or got[0] == taskio.DONE:
                break
            kind, task, payload = got
            if kind in (taskio.OUT, taskio.ERR):
                self._write(kind, task, payload)
            elif kind == taskio.EXIT:
                data = json.loads(payload)
                ended = TaskExit(
                    node,
                    int(data.get("code", 0)),
                    int(data.get("signal", 0)),
                    int(data.get("max_rss_kb", 0)),
                    int(data.get("cpu_time_us", 0)),
                    bool(data.get("oom", False)),
                )
                with self.lock:
                    self.exits[task] = ended
                for callback in list(self.on_exit):
                    callback(task, ended)  # type: ignore[operator]
        with self.done:
            self.finished_nodes.add(node)
            self.done.notify_all()

    def _write(self, kind: int, task: int, data: bytes) -> None:
        stream = self.out if kind == taskio.OUT else self.err
        if self.label:
            prefix = f"{task}: ".encode()
            key = (kind, task)
            start = self._line_start.get(key, True)
            lines = data.split(b"\n")
            parts = []
            for i, line in enumerate(lines):
                last = i == len(lines) - 1
                if last and not line:
                    break
                parts.append((prefix if (start or i > 0) else b"") + line + (b"" if last else b"\n"))
            self._line_start[key] = data.endswith(b"\n")
            data = b"".join(parts)
        with self._out_lock:
            try:
                stream.write(data)
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass

    # -- control ----------------------------------------------------------------------------
    def expect(self, nodes: int) -> None:
        with self.lock:
            self.expected_nodes = nodes
            if len(self.conns) >= nodes:
                self._all_connected.set()

    def send_to_all(self, data: bytes) -> None:
        with self.lock:
            conns = list(self.conns.values())
        for conn in conns:
            try:
                conn.sendall(data)
            except OSError:
                pass

    def signal(self, sig: int) -> None:
        """Send a signal to every task (0 = terminate the step: SIGTERM, then SIGKILL)."""
        if sig == 0:
            with self.lock:
                self.terminating = True
        self.send_to_all(taskio.frame(taskio.SIGNAL, 0, str(sig).encode()))

    def forward_stdin(self, source: BinaryIO) -> None:
        """Copy srun's stdin to the chosen tasks in a background thread (EOF is passed on)."""
        if self.stdin_targets == "none":
            return

        def run() -> None:
            self._all_connected.wait()
            with self.lock:
                if self.stdin_targets == "all":
                    targets = sorted(self.task_node)
                else:
                    targets = [int(self.stdin_targets)] if int(self.stdin_targets) in self.task_node else []
            fd = source.fileno()
            while True:
                try:
                    data = os.read(fd, taskio.CHUNK)
                except OSError:
                    data = b""
                for t in targets:
                    conn = self.conns.get(self.task_node[t])
                    if conn is not None:
                        try:
                            conn.sendall(taskio.frame(taskio.IN, t, data))
                        except OSError:
                            pass
                if not data:
                    return

        threading.Thread(target=run, daemon=True, name="srun-stdin").start()

    def wait(self, nodes: int, timeout: float | None = None) -> bool:
        """Until every node has reported DONE (or gone away); False on timeout."""
        with self.done:
            return self.done.wait_for(lambda: len(self.finished_nodes) >= nodes, timeout)

    def close(self) -> None:
        self.server.close()
        with self.lock:
            for conn in self.conns.values():
                conn.close()
