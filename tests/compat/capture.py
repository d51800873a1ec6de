"""Capture scenarios from the real Slurm 22.05 of /work/shared/realslurm (or check them against it).

    python -m tests.compat.capture tests/compat/scenarios/41_*.txt          # (re)capture, rewrite the files
    python -m tests.compat.capture --check tests/compat/scenarios/6*.txt    # replay on real Slurm, show diffs

A new scenario starts as a stub file with its setup, `$ command` and `# as user X` line; capture runs it
as that user and writes what the command printed into it. The real cluster is shared: each capture
waits until squeue shows no job it does not own, leaves out rows of jobs it did not submit, cancels its own jobs by id afterwards and waits until
they are gone, so the next one starts from idle nodes.
"""

from __future__ import annotations

import argparse
import difflib
import socket
import sys
import time
from pathlib import Path

from tests.compat.scenario import (
    Facts,
    Scenario,
    Side,
    cancel,
    drop_foreign_rows,
    dump,
    normalise,
    parse,
    play,
)

REAL = Side(
    name="real", path="/usr/bin:/bin", conf="/etc/slurm/slurm.conf", workdir=Path("/tmp/compat-real-work")
)


def foreign_jobs(side: Side, mine: set[int]) -> list[str]:
    out = side.shell("root", "squeue -h -o '%i %u %T %j'")
    return [
        ln
        for ln in out.stdout.splitlines()
        if ln.split() and ln.split()[0].split("_")[0] not in {str(j) for j in mine}
    ]


def wait_quiet(side: Side, timeout: float) -> bool:
    """Until no job runs or waits that this capture did not submit (False: still busy after timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not foreign_jobs(side, set()):
            return True
        time.sleep(2)
    return False


def facts(side: Side, jobs: list[int], sc: Scenario) -> Facts:
    return Facts(
        jobs=tuple(jobs),
        workdir=str(side.workdir),
        conf=side.conf,
        hostname=socket.gethostname().split(".")[0],
        paths=side.paths,
        all_rows=sc.all_rows,
    )


def capture(path: Path, check: bool, quiet_timeout: float) -> int:
    sc = parse(path)
    if not wait_quiet(REAL, quiet_timeout):
        print(f"{path.name}: other jobs are on the cluster: {foreign_jobs(REAL, set())[:5]}", file=sys.stderr)
    run = play(sc, REAL)
    cancel(REAL, run.all_jobs)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and [
        ln
        for ln in foreign_jobs(REAL, set())
        if ln.split()[0].split("_")[0] in {str(j) for j in run.all_jobs}
    ]:
        time.sleep(0.5)
    for line in run.log:
        if "timed out" in line:
            print(f"{path.name}: {line}", file=sys.stderr)
    if check:
        want = normalise(sc.stdout, facts(REAL, sc.jobs, sc)) + normalise(sc.stderr, facts(REAL, sc.jobs, sc))
        got = normalise(run.stdout, facts(REAL, run.jobs, sc)) + normalise(
            run.stderr, facts(REAL, run.jobs, sc)
        )
        if want == got and sc.exit == run.exit:
            print(f"{path.name}: same")
            return 0
        print(f"{path.name}: differs (exit {sc.exit} -> {run.exit})")
        sys.stdout.writelines(
            difflib.unified_diff(want.splitlines(True), got.splitlines(True), "stored", "real")
        )
        return 1
    sc.stdout, sc.stderr, sc.exit, sc.jobs = run.stdout, run.stderr, run.exit, run.jobs
    if not sc.all_rows:  # other users' and earlier jobs: the replay leaves them out anyway
        sc.stdout, sc.stderr = drop_foreign_rows(sc.stdout, sc.jobs), drop_foreign_rows(sc.stderr, sc.jobs)
    sc.cwd = str(REAL.workdir) if sc.user != "root" or sc.cwd else None
    path.write_text(dump(sc))
    print(f"{path.name}: exit {run.exit}, jobs {run.jobs}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="capture", description=__doc__.split("\n")[0])
    p.add_argument(
        "--check", action="store_true", help="compare with the stored output instead of writing it"
    )
    p.add_argument("--quiet-timeout", type=float, default=90, help="seconds to wait for others' jobs to go")
    p.add_argument("files", nargs="+", type=Path)
    args = p.parse_args(argv)
    rc = 0
    for path in args.files:
        rc |= capture(path, args.check, args.quiet_timeout)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
