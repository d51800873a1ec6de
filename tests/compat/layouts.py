"""Reader for the task layouts captured on the real Slurm 22.05 (tests/compat/layouts/README.md)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

LAYOUTS = Path(__file__).parent / "layouts"
_TASK = re.compile(r"\s*(\d+): (.*)")


def _pairs(text: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in text.split(" ") if "=" in p)


@dataclass
class StepCapture:
    """One srun: its options, every task's variables, what it printed on stderr, its status."""

    args: list[str]
    tasks: dict[int, dict[str, str]] = field(default_factory=dict)
    stderr: list[str] = field(default_factory=list)
    exit: int = 0

    @property
    def warnings(self) -> list[str]:
        return [line for line in self.stderr if line.startswith("srun: Warning")]

    @property
    def error(self) -> str:
        """The reason of `srun: error: Unable to create step for job N: REASON` ("" = none)."""
        for line in self.stderr:
            m = re.match(r"srun: error: Unable to create step for job \d+: (.*)", line)
            if m:
                return m.group(1)
        return ""


@dataclass
class Capture:
    name: str
    kind: str  # "srun" (its own allocation), "sbatch" or "salloc"
    args: list[str]  # the allocating command's options
    batch_env: dict[str, str]  # the batch script's / salloc command's variables ({} for srun)
    steps: list[StepCapture]

    def node_env(self) -> dict[str, dict[str, str]]:
        """Any task's variables on each node (the job's, which every task there shares)."""
        seen: dict[str, dict[str, str]] = {}
        for step in self.steps:
            for env in step.tasks.values():
                seen.setdefault(env["SLURMD_NODENAME"], env)
        return seen


def batch_script(show: str, steps: list[str]) -> str:
    """The batch script the sbatch captures ran (cap.sh): the script's variables, then each srun
    step's tasks, stderr and status, in this file's format."""
    out = ["#!/bin/bash", f'echo "batch: $({show})"']
    for i, args in enumerate(steps):
        out.append(f"echo '$ srun {args}'")
        out.append(
            f"srun {args} -l {show} 2>err.$SLURM_JOB_ID.{i} | sort -n; rc=${{PIPESTATUS[0]}}; "
            f"sed 's/^/! /' err.$SLURM_JOB_ID.{i}; rm -f err.$SLURM_JOB_ID.{i}; echo \"exit: $rc\""
        )
    return "\n".join(out) + "\n"


def read(path: Path) -> Capture:
    return parse(path.stem, path.read_text())


def parse(name: str, text: str) -> Capture:
    lines = text.splitlines()
    head = shlex.split(lines[0][2:])
    kind, args = head[0], head[1:]
    batch_env: dict[str, str] = {}
    steps: list[StepCapture] = []
    if kind == "srun":
        steps.append(StepCapture(args))
    for line in lines[1:]:
        if line.startswith("$ srun"):
            steps.append(StepCapture(shlex.split(line[2:])[1:]))
        elif line.startswith("batch: "):
            batch_env = _pairs(line[len("batch: ") :])
        elif line.startswith("! "):
            steps[-1].stderr.append(line[2:])
        elif line.startswith("exit: "):
            steps[-1].exit = int(line[len("exit: ") :])
        elif (m := _TASK.match(line)) and steps:
            steps[-1].tasks[int(m.group(1))] = _pairs(m.group(2))
    return Capture(name, kind, args, batch_env, steps)


def all_captures() -> list[Capture]:
    return [read(p) for p in sorted(LAYOUTS.glob("*.txt"))]
