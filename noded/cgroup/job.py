"""One job's cgroup on v1 (a directory per controller) or v2 (one unified directory)."""

from __future__ import annotations

import errno
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from noded.cgroup import bpf

MOUNT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("cpuset", "memory", "devices", "cpuacct")
V1_FREEZER = "freezer"  # joined where mounted: scontrol suspend freezes the job's group


class CgroupError(Exception):
    """The job's cgroup could not be set up; str() says which file and why."""


@dataclass(frozen=True)
class CgroupRequest:
    """What to constrain: plain data, saved in launch.json."""

    version: str  # "v1" or "v2"
    relpath: str  # "shoal/<node>/job_<id>"
    mount: str = MOUNT
    cpus: list[int] = field(default_factory=list)  # real CPU ids; [] = not constrained
    mem_bytes: int = 0  # 0 = not constrained
    memsw_bytes: int = 0  # RAM + swap; 0 = not constrained
    deny_devices: list[list[int]] = field(default_factory=list)  # [type, major, minor], type 2 = char

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CgroupRequest:
        return cls(**data)

    def child(
        self,
        name: str,
        cpus: list[int] | None = None,
        mem_bytes: int = 0,
        memsw_bytes: int = 0,
        deny_devices: list[list[int]] | None = None,
    ) -> CgroupRequest:
        """A step's group inside this one (<job>/step_<id>): its own limits, or the job's when unset
        (v1 and v2 limits are hierarchical, and a child inherits its parent's device rules)."""
        return replace(
            self,
            relpath=f"{self.relpath}/{name}",
            cpus=list(cpus or []),
            mem_bytes=mem_bytes,
            memsw_bytes=memsw_bytes,
            deny_devices=list(deny_devices or []),
        )


def detect_version(plugin: str = "autodetect", mount: str = MOUNT) -> str | None:
    """ "v1" or "v2" when that hierarchy is there and writable for our controllers, else None."""
    root = Path(mount)
    v2 = (root / "cgroup.controllers").exists()
    if plugin in ("autodetect", "cgroup/v2") and v2:
        controllers = (root / "cgroup.controllers").read_text().split()
        if {"cpuset", "memory"} <= set(controllers) and os.access(root, os.W_OK):
            return "v2"
    if plugin in ("autodetect", "cgroup/v1") and not v2:
        if all((root / c).is_dir() for c in V1_CONTROLLERS) and os.access(root / "memory", os.W_OK):
            return "v1"
    return None


def _write(path: Path, value: str) -> None:
    """One write(2) of `value`, as the kernel wants for a cgroup file (raw: no buffering, no tty probe)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise CgroupError(f"cannot write {value.strip()!r} to {path}: {exc.strerror}") from exc


def _read(path: Path) -> str:
    """The whole file, "" when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return ""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def _keyed(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def _cpu_list(cpus: list[int]) -> str:
    return ",".join(str(c) for c in sorted(set(cpus)))


def _removed(path: Path) -> bool:
    """rmdir: True when the directory is gone (or was never there), False while it holds processes
    or child groups (or cannot be removed)."""
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class JobCgroup:
    """Create, join, inspect and remove one job's cgroup."""

    def __init__(self, req: CgroupRequest, make_parents: bool = True) -> None:
        """`make_parents` False: only the last level is made here (a step's group, whose job group
        must exist with its limits; a missing one is FileNotFoundError for the caller to redo)."""
        self.req = req
        self.root = Path(req.mount)
        self.make_parents = make_parents
        self._controllers: tuple[str, ...] | None = None

    def dirs(self) -> list[Path]:
        if self.req.version == "v2":
            return [self.root / self.req.relpath]
        return [self.root / c / self.req.relpath for c in self._v1_controllers()]

    def _v1_controllers(self) -> tuple[str, ...]:
        """The v1 hierarchies the job joins (looked up once: the node's mounts do not change under a job)."""
        if self._controllers is None:
            freezer = (self.root / V1_FREEZER).is_dir()
            self._controllers = (*V1_CONTROLLERS, V1_FREEZER) if freezer else V1_CONTROLLERS
        return self._controllers

    # -- create ----------------------------------------------------------------------------
    def create(self) -> None:
        for attempt in range(3):
            try:
                if self.req.version == "v2":
                    self._create_v2()
                else:
                    self._create_v1()
                if self.frozen():  # left frozen by an earlier job of this id (a reused cluster dir, a crash):
                    self.freeze(False)  # its processes would be stopped from their start
                return
            except FileNotFoundError:  # a parent removed by another job's cleanup meanwhile
                if attempt == 2:
                    raise CgroupError(f"cannot create cgroup {self.req.relpath}") from None

    def _mkdirs(self, base: Path, on_new: Any = None, on_each: Any = None) -> Path:
        """Create every level of the job's path. `on_new` runs for levels this call created, `on_each`
        for every level (created here or by a concurrent job that may not have finished setting it up)."""
        path = base
        parts = Path(self.req.relpath).parts
        if not self.make_parents:  # the parents are there (else ENOENT below), set up by their maker
            path = base.joinpath(*parts[:-1])
            if on_each is not None and not path.is_dir():
                raise FileNotFoundError(str(path))
            if on_each is not None:
                on_each(path)  # the job's group may be a concurrent maker's, not yet filled in
            parts = parts[-1:]
        for part in parts:
            path = path / part
            try:
                path.mkdir()
            except FileExistsError:
                if on_each is not None:
                    on_each(path)
                continue
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    raise FileNotFoundError(str(path)) from exc
                raise CgroupError(f"cannot create {path}: {exc.strerror}") from exc
            if on_new is not None:
                on_new(path)
            if on_each is not None:
                on_each(path)
        return path

    def _create_v1(self) -> None:
        def inherit_cpuset(path: Path) -> None:
            # v1 cpuset: a new group starts empty and takes no task or child until both files are set.
            # Every level is checked, not only the ones this job created: a concurrent job may have
            # made a shared parent (the node's group) and not yet filled it in.
            for name in ("cpuset.cpus", "cpuset.mems"):
                if not _read(path / name).strip():
                    _write(path / name, _read(path.parent / name).strip() or "0")

        cpuset = self._mkdirs(self.root / "cpuset", on_each=inherit_cpuset)
        if self.req.cpus:
            _write(cpuset / "cpuset.cpus", _cpu_list(self.req.cpus))
        memory = self._mkdirs(self.root / "memory")
        if self.req.mem_bytes:
            _write(memory / "memory.limit_in_bytes", str(self.req.mem_bytes))
            if self.req.memsw_bytes and (memory / "memory.memsw.limit_in_bytes").exists():
                _write(
                    memory / "memory.memsw.limit_in_bytes", str(max(self.req.memsw_bytes, self.req.mem_bytes))
                )
        devices = self._mkdirs(self.root / "devices")
        for dev_type, major, minor in self.req.deny_devices:
            kind = "c" if dev_type == bpf.DEV_CHAR else "b"
            _write(devices / "devices.deny", f"{kind} {major}:{minor} rwm")
        self._mkdirs(self.root / "cpuacct")
        if V1_FREEZER in self._v1_controllers():
            self._mkdirs(self.root / V1_FREEZER)

    def _create_v2(self) -> None:
        def enable_controllers(path: Path) -> None:
            parent = path.parent
            wanted = [
                c for c in ("cpuset", "memory", "cpu") if c in _read(parent / "cgroup.controllers").split()
            ]
            for name in wanted:
                try:
                    (parent / "cgroup.subtree_control").write_text(f"+{name}")
                except OSError:
                    pass

        parent = self.root
        for part in Path(self.req.relpath).parts[:-1]:
            enable_controllers(parent / part)
            parent = parent / part
        path = self._mkdirs(self.root, enable_controllers)
        if self.req.cpus:
            _write(path / "cpuset.cpus", _cpu_list(self.req.cpus))
        if self.req.mem_bytes:
            _write(path / "memory.max", str(self.req.mem_bytes))
            if self.req.memsw_bytes and (path / "memory.swap.max").exists():
                _write(path / "memory.swap.max", str(max(0, self.req.memsw_bytes - self.req.mem_bytes)))
        if self.req.deny_devices:
            denied = [(t, major, minor) for t, major, minor in self.req.deny_devices]
            try:
                bpf.attach_deny_list(str(path), denied)
            except OSError as exc:
                raise CgroupError(f"cannot attach the device filter to {path}: {exc}") from exc

    # -- join --------------------------------------------------------------------------------
    def exists(self) -> bool:
        return all(path.is_dir() for path in self.dirs())

    def attach(self, pid: int) -> None:
        """Move `pid` (the job's first process, before exec) into every directory of the cgroup."""
        for path in self.dirs():
            _write(path / "cgroup.procs", f"{pid}\n")

    # -- inspect -----------------------------------------------------------------------------
    def _memory_dir(self) -> Path:
        return self.dirs()[0] if self.req.version == "v2" else self.root / "memory" / self.req.relpath

    def oom_count(self) -> int:
        """How many times the kernel killed a process here for exceeding this group's memory."""
        memory = self._memory_dir()
        if self.req.version == "v2":
            return _keyed(_read(memory / "memory.events")).get("oom_kill", 0)
        control = _keyed(_read(memory / "memory.oom_control"))
        if "oom_kill" in control:
            return control["oom_kill"]
        failcnt = _read(memory / "memory.failcnt").strip()  # old kernels: hitting the limit at all
        return int(failcnt) if failcnt.isdigit() else 0

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the job for exceeding its memory."""
        return self.oom_count() > 0

    def usage(self) -> dict[str, int]:
        """Peak memory (bytes) and CPU time (microseconds) of the whole job."""
        memory = self._memory_dir()
        if self.req.version == "v2":
            peak = _read(memory / "memory.peak").strip()
            cpu_us = _keyed(_read(memory / "cpu.stat")).get("usage_usec", 0)
        else:
            peak = _read(memory / "memory.max_usage_in_bytes").strip()
            ns = _read(self.root / "cpuacct" / self.req.relpath / "cpuacct.usage").strip()
            cpu_us = int(ns) // 1000 if ns.isdigit() else 0
        return {"max_rss_bytes": int(peak) if peak.isdigit() else 0, "cpu_time_us": cpu_us}

    # -- suspend -----------------------------------------------------------------------------
    def _freeze_file(self) -> Path | None:
        """The file that stops the group: v1 freezer.state, v2 cgroup.freeze; None without one."""
        if self.req.version == "v2":
            path = self.root / self.req.relpath / "cgroup.freeze"
        else:
            path = self.root / V1_FREEZER / self.req.relpath / "freezer.state"
        return path if path.exists() else None

    def can_freeze(self) -> bool:
        return self._freeze_file() is not None

    def freeze(self, frozen: bool) -> bool:
        """Stop (or continue) every process of the group and its steps' groups; False when the group
        has no freezer (the caller falls back to signals)."""
        path = self._freeze_file()
        if path is None:
            return False
        if self.req.version == "v2":
            _write(path, "1" if frozen else "0")
        else:
            _write(path, "FROZEN" if frozen else "THAWED")
        return True

    def frozen(self) -> bool:
        path = self._freeze_file()
        if path is None:
            return False
        text = _read(path).strip()
        return text in ("1", "FROZEN", "FREEZING")

    # -- remove ------------------------------------------------------------------------------
    def remove(self, timeout: float = 60.0) -> None:
        """Remove the job's directories (killing what is left in them), then empty parents.

        Every directory is retried until all are gone: on a loaded machine killed tasks take a
        while to leave, and one slow controller must not leave the others behind.
        """
        deadline = time.monotonic() + timeout
        if self.frozen():  # a suspended job: frozen processes (v1) do not die of SIGKILL until thawed
            self.freeze(False)
        # Usually every process is gone and there is no step group inside: one rmdir per directory.
        left = [top for top in self.dirs() if not _removed(top)]
        # Steps' groups inside first (deepest first): a directory with children cannot go.
        left = [Path(d) for top in left if top.exists() for d, _, _ in os.walk(top, topdown=False)]
        while left:
            for path in list(left):
                for pid in _read(path / "cgroup.procs").split():
                    try:
                        os.kill(int(pid), 9)
                    except (OSError, ValueError):
                        pass
                try:
                    path.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    continue
                left.remove(path)
            if left:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        for path in self.dirs():
            for parent in list(path.parents)[: len(Path(self.req.relpath).parts) - 1]:
                try:
                    parent.rmdir()  # only succeeds once no other job of the node is left
                except OSError:
                    break
