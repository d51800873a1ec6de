"""Entering a job's working directory in the child about to exec it (stdlib only: stepd and taskd use it)."""

from __future__ import annotations

import os


def enter_workdir(cwd: str, who: str = "slurmstepd") -> None:
    """chdir to the job's directory; if that fails, say so on the job's stderr and use /tmp, as Slurm
    does (`who` begins the message: 22.05's batch step says slurmstepd-NODE)."""
    try:
        os.chdir(cwd)
    except OSError as exc:
        os.write(
            2,
            f"{who}: error: couldn't chdir to `{cwd}': {exc.strerror}: going to /tmp instead\n".encode(),
        )
        os.chdir("/tmp")
