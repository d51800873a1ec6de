"""What noded tells stepd to run (launch.json): plain data, standard library only."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LaunchSpec:
    """One batch script launch, every path already resolved and every id already checked."""

    job_id: int
    script: str  # path of the script to exec
    argv: list[str]  # arguments after the script
    env: dict[str, str]
    uid: int
    gid: int
    groups: list[int]  # supplementary groups
    user: str
    home: str
    cwd: str
    stdout: str
    stderr: str
    stdin: str
    open_mode: str = "truncate"  # or "append"
    kill_wait: float = 30.0  # seconds between SIGTERM and SIGKILL
    umask: int = 0o022
    notify_socket: str = ""  # noded's datagram socket; "" = none
    cgroup: dict[str, Any] = field(default_factory=dict)  # noded.cgroup.CgroupRequest; {} = none
    run: int = 0  # the job's restart count: which run of a requeued job this is
    node_ns: dict[str, str] = field(
        default_factory=dict
    )  # noded.nodens.identity(); {} = the host's namespaces
    prolog: list[str] = field(default_factory=list)  # Prolog scripts/globs, run as root before the script
    epilog: list[str] = field(default_factory=list)  # Epilog scripts/globs, run as root after the job
    hook_env: dict[str, str] = field(default_factory=dict)  # their environment (noded.env.hook_environment)
    hook_timeout: int = 65534  # PrologEpilogTimeout
    hook_serial: bool = False  # PrologFlags=Serial: one Prolog/Epilog at a time on the node
    task_prolog: str = ""  # TaskProlog, run as the user before the script
    task_epilog: str = ""  # TaskEpilog, run as the user after it
    rlimits: dict[str, tuple[int, bool]] = field(default_factory=dict)  # shoal.rlimits.job_limits
    memory_cap: int = 0  # RLIMIT_RSS in bytes: the job's memory here (shoal.rlimits.memory_cap); 0 = none

    def save(self, path: Path) -> None:
        """Write the spec readable by root only (it holds the user's environment). Every field is
        plain data already: no asdict() (it deep-copies the environment), and json.dumps, whose
        encoder is C (json.dump's is Python)."""
        text = json.dumps({f.name: getattr(self, f.name) for f in fields(self)})
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)

    @classmethod
    def load(cls, path: Path) -> LaunchSpec:
        with open(path) as fh:
            data = json.load(fh)
        return cls(**data)
