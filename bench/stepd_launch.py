"""CPU of noded's stepd side per trivial batch job, without ctld or noded: the fork server alone.

    PYTHONPATH=. python bench/stepd_launch.py [--jobs 100] [--rounds 1] [--no-cgroup] [--no-namespaces]

Starts noded's stepd fork server (noded.stepd_spawn), moves it into a cpuacct cgroup of its own
(everything it forks is charged there: the supervisors, and the scripts until they join their job
cgroups), and runs `--jobs` batch jobs of `#!/bin/sh\\ntrue` one after another through it, each with
a launch.json like the one a local cluster's noded writes (cgroup v1 cpuset, memory and device
limits, the node's hostname and /etc/hosts), waiting for each status.json. The jobs' own cgroups are
pinned under one per-node parent so that their CPU is counted too. Prints ms of CPU per job: the
stepd side, the jobs (their cgroups), and the wall time. Set SHOAL_STEPD_EXEC to try an exec helper
that is not installed (the fork server imports noded from PYTHONPATH). Needs root and cgroup v1 with cpuacct (else --no-cgroup: no job cgroups,
the jobs counted with the stepd side). What a trivial job costs the rest of the cluster:
bench/vs_slurm.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from noded import spool, stepd_spawn  # noqa: E402
from noded.cgroup import CgroupRequest, detect_version  # noqa: E402
from noded.launchspec import LaunchSpec  # noqa: E402

try:  # an older tree (an A/B against main) may have no exec helper
    from noded.stepd import exec_helper  # noqa: E402
except ImportError:

    def exec_helper() -> str | None:
        return None


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
NVIDIA_DENIED = [[2, 195, minor] for minor in range(8)]  # what a node with 8 GPUs denies a CPU-only job


def usage_ms(group: Path) -> float:
    return int((group / "cpuacct.usage").read_text()) / 1e6


def one_round(jobs: int, cgroup: bool, namespaces: bool) -> tuple[float, float, float]:
    """(stepd side, jobs, wall) in ms per job."""
    work = Path(tempfile.mkdtemp(prefix="stepd_launch."))
    scope = f"stepd_launch{os.getpid()}_node1"
    server_group = CPUACCT / f"stepd_launch.{os.getpid()}"
    node_group = CPUACCT / "shoal" / scope
    pin = node_group / "pin"  # keeps the node's group, and so the jobs' CPU, once each job is gone
    hosts = work / "hosts"
    shutil.copyfile("/etc/hosts", hosts)
    server_group.mkdir()
    if cgroup:
        pin.mkdir(parents=True)
    stepd_spawn.start_fork_server()
    try:
        server = stepd_spawn._server._proc
        assert server is not None
        time.sleep(1.0)  # its imports done
        (server_group / "cgroup.procs").write_text(str(server.pid))
        before = usage_ms(server_group), usage_ms(node_group) if cgroup else 0.0
        t0 = time.monotonic()
        for job_id in range(1, jobs + 1):
            job_dir = spool.job_dir(work / "spool", job_id)
            job_dir.mkdir(parents=True)
            script = job_dir / spool.SCRIPT
            script.write_text("#!/bin/sh\ntrue\n")
            script.chmod(0o700)
            limits = CgroupRequest(
                version="v1",
                relpath=f"shoal/{scope}/job_{job_id}",
                cpus=[0],
                mem_bytes=4194304000,
                memsw_bytes=4194304000,
                deny_devices=NVIDIA_DENIED,
            )
            LaunchSpec(
                job_id=job_id,
                script=str(script),
                argv=[],
                env={**os.environ, "SLURM_JOB_ID": str(job_id)},
                uid=0,
                gid=0,
                groups=[0],
                user="root",
                home="/root",
                cwd=str(work),
                stdout=str(work / f"slurm-{job_id}.out"),
                stderr=str(work / f"slurm-{job_id}.out"),
                stdin="/dev/null",
                cgroup=limits.to_dict() if cgroup else {},
                node_ns={"hostname": "node1", "hosts": str(hosts)} if namespaces else {},
            ).save(job_dir / spool.LAUNCH)
            if stepd_spawn.spawn(job_dir / spool.LAUNCH) != 0:
                raise SystemExit(f"stepd_launch: job {job_id} did not start")
            while not (job_dir / spool.STATUS).exists():
                time.sleep(0.002)
            status = spool.read_json(job_dir / spool.STATUS) or {}
            if status.get("exit_code") != 0 or status.get("launch_failed"):
                raise SystemExit(f"stepd_launch: job {job_id} failed: {status}")
        time.sleep(0.3)  # the last supervisor's exit
        wall = time.monotonic() - t0
        after = usage_ms(server_group), usage_ms(node_group) if cgroup else 0.0
    finally:
        stepd_spawn.stop_fork_server()
        time.sleep(0.2)
        for pid in (server_group / "cgroup.procs").read_text().split():
            (CPUACCT / "cgroup.procs").write_text(pid)  # what is left (none, normally) back to the root
        server_group.rmdir()
        if cgroup:
            pin.rmdir()
            node_group.rmdir()
        shutil.rmtree(work, ignore_errors=True)
    return (after[0] - before[0]) / jobs, (after[1] - before[1]) / jobs, 1000 * wall / jobs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-cgroup", action="store_true", help="jobs without cgroups")
    ap.add_argument("--no-namespaces", action="store_true", help="jobs in the host's hostname and /etc/hosts")
    args = ap.parse_args()
    if os.geteuid() != 0 or not CPUACCT.is_dir():
        raise SystemExit("stepd_launch: needs root and the cgroup v1 cpuacct hierarchy")
    cgroup = not args.no_cgroup and detect_version("cgroup/v1") == "v1"
    helper = exec_helper()
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.2f}; {args.jobs} jobs x {args.rounds}; "
        f"cgroups {'v1' if cgroup else 'none'}, node namespaces {'no' if args.no_namespaces else 'yes'}, "
        f"exec helper {helper or 'none (the script is forked)'}"
    )
    print("| round | stepd side, ms/job | jobs, ms/job | total | wall, ms/job |\n|---|---|---|---|---|")
    for n in range(1, args.rounds + 1):
        side, jobs, wall = one_round(args.jobs, cgroup, not args.no_namespaces)
        print(f"| {n} | {side:.2f} | {jobs:.2f} | {side + jobs:.2f} | {wall:.1f} |", flush=True)
    print(f"# load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
