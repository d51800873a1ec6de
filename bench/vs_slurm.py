"""shoal and real Slurm 22.05 side by side, in one invocation: bench.sh on each, then CPU per trivial job.

    python bench/vs_slurm.py [--runs 2] [--jobs 200] [--skip-bench] [--skip-cpu] [--small]
    python bench/vs_slurm.py --submit-path [--held 500] [--array N]
    python bench/vs_slurm.py --floor [--floor-calls 200]

The real Slurm must be up (../shared/realslurm/up.sh). A fresh local shoal cluster of the same shape
(4 nodes x 16 CPUs, 64000 MB, 8 gpu:h100, accounting on) is started and stopped here. This machine's
speed moves 2x between days, so only the ratios of one run mean anything; the figures go to
bench/README.md.

CPU per trivial job: `--jobs` x `sbatch --wrap=true` submitted one after another, until all are
COMPLETED in sacct. The CPU of every process involved is counted exactly and split by role: each
daemon that stays up (ctld, dbd, the node daemons, shoal's agent and command runner, munged) is moved
into a cpuacct cgroup of its own for the measurement, so whatever it forks (stepds, the runner's
forks, helpers) is charged there too; shoal's jobs run in the per-job cgroups noded makes, whose
per-node parents are pinned here so that their usage outlives each job; the commands themselves
are this process's children (getrusage). The sacct polls that wait for the end (one every 2 s) are
counted too. Needs root; the daemons are moved back when it ends.

The short-command floor (bench/command_floor.py; with the default run, or alone with `--floor`): start-up,
one round trip to the controller, the listings and a held submission, `--floor-calls` times each, with
wall time, host CPU and page faults per call and the CPU by role; then each listing and held-submission
target against the floor, from Slurm's figure in the same run.

`--submit-path` (issue 19) measures only the submission path, on each implementation in turn: `--held`
x `sbatch -H --wrap=true` one after another (jobs/s, and the controller's CPU per submission from its
/proc stat; then cancelled), and one `sbatch -a 0-(N-1)
--wrap=true` from the submission until sacct shows all N tasks COMPLETED (`--array`; default: the
largest array the real Slurm's MaxArraySize allows, so both run the same one; sacct is polled every
second, every 5 s for arrays over 2,000 tasks). For the 10,000-task array of issue 19 the real Slurm
needs MaxArraySize=10001 (and MaxJobCount above 10,000 + the tasks MinJobAge keeps): see
bench/README.md, "A 10,000-task array".
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zlib
from pathlib import Path

import command_floor

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "realslurm"
BENCH_SH = SHARED / "bench.sh" if (SHARED / "bench.sh").exists() else REPO / "bench" / "bench.sh"
SLURM_BIN = Path("/usr/bin")
SLURM_ENV = {"SLURM_CONF": "/etc/slurm/slurm.conf"}
ROLES = ("command", "command runner", "agent", "ctld", "dbd", "node daemon", "stepd + job", "auth (munge)")


# ---------------------------------------------------------------- processes and their CPU

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _stat(pid: int) -> int | None:
    """The parent of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def daemons(kind: str, cluster_dir: Path | None) -> dict[int, str]:
    """The long-lived processes of one implementation by pid, with their roles."""
    found: dict[int, str] = {}
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    for pid in pids:
        cmd = _cmdline(pid)
        if kind == "slurm":
            exe = cmd.split(" ")[0].rsplit("/", 1)[-1]
            role = {
                "slurmctld": "ctld",
                "slurmdbd": "dbd",
                "slurmd": "node daemon",
                "munged": "auth (munge)",
            }.get(exe)
        elif cluster_dir is not None and str(cluster_dir) in cmd:
            role = next(
                (
                    r
                    for key, r in (
                        ("ctld.main", "ctld"),
                        ("dbd.main", "dbd"),
                        ("noded.main", "node daemon"),
                        ("shoal.agent.agentd", "agent"),
                        ("cli.runner", "command runner"),
                    )
                    if key in cmd
                ),
                None,
            )
        else:
            role = None
        if role:
            found[pid] = role
    if kind == "shoal":  # noded's stepd fork server: its forks are the stepds
        nodeds = {pid for pid, role in found.items() if role == "node daemon"}
        for pid in pids:
            if _stat(pid) in nodeds and "noded.stepd_spawn" in _cmdline(pid):
                found[pid] = "stepd + job"
    return found


class RoleGroups:
    """One cpuacct cgroup per role under vs_slurm/; moving a daemon there charges its later children too."""

    def __init__(self, roles: set[str]) -> None:
        self.base = CPUACCT / f"vs_slurm.{os.getpid()}"
        self.dirs = {
            r: self.base / r.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "and")
            for r in roles
        }
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        self.moved: list[int] = []

    def move(self, pid: int, role: str) -> None:
        (self.dirs[role] / "cgroup.procs").write_text(str(pid))
        self.moved.append(pid)

    def usage_s(self) -> dict[str, float]:
        return {r: int((d / "cpuacct.usage").read_text()) / 1e9 for r, d in self.dirs.items()}

    def close(self) -> None:
        for d in self.dirs.values():
            for pid in (d / "cgroup.procs").read_text().split():
                try:
                    (CPUACCT / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # ended meanwhile
            d.rmdir()
        self.base.rmdir()


class PinnedJobCgroups:
    """shoal's per-node job cgroup parents (cpuacct/shoal/<scope><node>), kept while we read them."""

    def __init__(self, conf: Path, nodes: list[str]) -> None:
        scope = f"{zlib.crc32(os.path.abspath(conf).encode()):08x}_"
        self.nodes = [CPUACCT / "shoal" / f"{scope}{n}" for n in nodes]
        for d in self.nodes:
            (d / "vs_slurm_pin").mkdir(parents=True, exist_ok=True)

    def usage_s(self) -> float:
        return sum(int((d / "cpuacct.usage").read_text()) for d in self.nodes) / 1e9

    def close(self) -> None:
        for d in self.nodes:
            (d / "vs_slurm_pin").rmdir()
            try:
                d.rmdir()
            except OSError:
                pass  # a job of the node is still there


# ---------------------------------------------------------------- one implementation


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def cpu_per_job(
    kind: str, bin_dir: Path, env: dict[str, str], jobs: int, cluster_dir: Path | None
) -> tuple[dict[str, float], float]:
    """ms of CPU per trivial job by role, and the wall time of the whole batch."""
    name = f"cpujob_{os.getpid()}_{kind}"
    found = daemons(kind, cluster_dir)
    groups = RoleGroups(set(found.values()))
    work = ""
    pinned = (
        PinnedJobCgroups(cluster_dir / "slurm.conf", [f"node{i}" for i in range(1, 5)])
        if cluster_dir
        else None
    )
    try:
        for pid, role in found.items():
            groups.move(pid, role)
        before, jobs_before = groups.usage_s(), pinned.usage_s() if pinned else 0.0
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        work = tempfile.mkdtemp(prefix="vs_slurm.work.")  # the jobs' slurm-N.out land there
        os.chmod(work, 0o1777)
        for _ in range(jobs):
            subprocess.run(
                [str(bin_dir / "sbatch"), "-J", name, "--wrap=true"],
                env={**os.environ, **env},
                cwd=work,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            time.sleep(2)
            out = _run(
                [str(bin_dir / "sacct"), "-n", "-X", "-P", "-S", "now-2hours", "--name", name, "-o", "State"],
                env,
            )
            if out.stdout.split().count("COMPLETED") >= jobs:
                break
        wall = time.monotonic() - t0
        after, jobs_after = groups.usage_s(), pinned.usage_s() if pinned else 0.0
        done = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        groups.close()
        if pinned:
            pinned.close()
    cpu = {r: after[r] - before[r] for r in after}
    cpu["command"] = (done.ru_utime + done.ru_stime) - (children.ru_utime + children.ru_stime)
    if pinned:
        cpu["stepd + job"] = cpu.get("stepd + job", 0.0) + jobs_after - jobs_before
    return {r: 1000 * s / jobs for r, s in cpu.items()}, wall


def bench_sh(bin_dir: Path, env: dict[str, str], runs: int, small: bool, pidfile: str) -> dict[str, str]:
    sizes = {"N_SEQ": "100", "N_PAR_EACH": "25", "N_DRAIN": "100", "N_QUEUE": "500"} if small else {}
    out = subprocess.run(
        ["bash", str(BENCH_SH), str(bin_dir), str(runs)],
        env={**os.environ, **env, **sizes, "CTLD_PIDFILE": pidfile},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    sys.stderr.write(out.stderr)
    rows = [line.split("\t") for line in out.stdout.splitlines()[1:] if "\t" in line]
    # "c_squeue_latency_s_with_501_jobs": the count is the queue's (another user's job may be in it)
    return {re.sub(r"_with_\d+_jobs$", "_with_N_jobs", r[0]): r[1] for r in rows}


def start_shoal(
    directory: Path, max_array_size: int = 0, settings: tuple[str, ...] = ()
) -> tuple[Path, dict[str, str]]:
    py = sys.executable
    extra = ["--set", f"MaxArraySize={max_array_size}"] if max_array_size > 1001 else []
    for setting in settings:  # --shoal-set: e.g. SchedulerParameters=batch_sched_delay=1
        extra += ["--set", setting]
    up = subprocess.run(
        [
            py,
            "-P",
            "-m",
            "cli.shoal_admin",
            "up",
            "--dir",
            str(directory),
            "--nodes",
            "4",
            "--cpus-per-node",
            "16",
            "--mem-per-node",
            "64000",
            "--gpus-per-node",
            "8",
            "--gpu-type",
            "h100",
            "--no-check",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if up.returncode != 0:
        raise SystemExit(f"vs_slurm: shoal up failed: {up.stderr}")
    scripts = Path(sysconfig.get_path("scripts"))
    cli = directory / "cli"
    cli.mkdir(exist_ok=True)
    for name in ("sbatch", "squeue", "sinfo", "scontrol", "scancel", "sacct", "sdiag"):
        if not (scripts / name).exists():
            raise SystemExit(f"vs_slurm: {scripts / name} is missing (pip install -e .)")
        (cli / name).symlink_to(scripts / name)
    return cli, {"SLURM_CONF": str(directory / "slurm.conf")}


def _config_value(bin_dir: Path, env: dict[str, str], key: str) -> str:
    out = _run([str(bin_dir / "scontrol"), "show", "config"], env).stdout
    return next(
        (line.split("=", 1)[1].strip() for line in out.splitlines() if line.split("=")[0].strip() == key), ""
    )


def _cpu_s(pidfile: str) -> float:
    """The CPU seconds (user + system) the process in `pidfile` has used so far."""
    pid = int(Path(pidfile).read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sched_cycles(bin_dir: Path, env: dict[str, str]) -> tuple[int, int]:
    """sdiag's "Total cycles" of the main scheduler and of backfill."""
    out = _run([str(bin_dir / "sdiag")], env).stdout
    counts = [
        int(line.split(":")[1]) for line in out.splitlines() if line.strip().startswith("Total cycles:")
    ]
    return (counts + [0, 0])[0], (counts + [0, 0])[1]


def submit_path(bin_dir: Path, env: dict[str, str], held: int, array: int, pidfile: str) -> dict[str, str]:
    """Held submissions per second, and an `array`-task array's submit -> all COMPLETED in sacct (with
    the controller's CPU per task, from `pidfile`'s process, and sdiag's scheduling cycles meanwhile)."""
    work = tempfile.mkdtemp(prefix="vs_slurm.work.")
    os.chmod(work, 0o1777)
    full_env = {**os.environ, **env}
    tag = f"{os.getpid()}_{int(time.time())}"
    figures: dict[str, str] = {}
    try:
        name = f"held_{tag}"
        cpu0 = _cpu_s(pidfile)
        t0 = time.monotonic()
        for _ in range(held):
            subprocess.run(
                [str(bin_dir / "sbatch"), "-H", "-J", name, "--wrap=true"],
                env=full_env,
                cwd=work,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        figures[f"held `sbatch -H` x{held}, jobs/s"] = f"{held / (time.monotonic() - t0):.1f}"
        figures["held: controller CPU per submission, ms"] = f"{1000 * (_cpu_s(pidfile) - cpu0) / held:.2f}"
        _run([str(bin_dir / "scancel"), "-n", name], env)
        while _run([str(bin_dir / "squeue"), "-h", "-n", name, "-o", "%i"], env).stdout.strip():
            time.sleep(0.5)
        name = f"array_{tag}"
        cpu0, cycles0 = _cpu_s(pidfile), _sched_cycles(bin_dir, env)
        t0 = time.monotonic()
        sub = subprocess.run(
            [str(bin_dir / "sbatch"), "-a", f"0-{array - 1}", "-J", name, "--wrap=true"],
            env=full_env,
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        if sub.returncode != 0:
            raise SystemExit(f"vs_slurm: the {array}-task array was refused: {sub.stderr.strip()}")
        submitted = time.monotonic() - t0
        done, deadline = 0, time.monotonic() + 1800
        while time.monotonic() < deadline:
            out = _run(
                [str(bin_dir / "sacct"), "-n", "-X", "-P", "-S", "now-2hours", "--name", name, "-o", "State"],
                env,
            )
            done = out.stdout.split().count("COMPLETED")
            if done >= array:
                break
            time.sleep(1.0 if array <= 2000 else 5.0)  # a 10,000-row sacct each second would load both
        wall = time.monotonic() - t0
        cpu, cycles = _cpu_s(pidfile) - cpu0, _sched_cycles(bin_dir, env)
        figures[f"{array}-task array: the sbatch itself, s"] = f"{submitted:.3f}"
        figures[f"{array}-task array: submit -> all COMPLETED in sacct, s"] = (
            f"{wall:.1f}" if done >= array else f"timeout ({done} done)"
        )
        figures[f"{array}-task array: controller CPU per task, ms"] = f"{1000 * cpu / array:.2f}"
        figures[f"{array}-task array: scheduling cycles (main / backfill)"] = (
            f"{cycles[0] - cycles0[0]} / {cycles[1] - cycles0[1]}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return figures


def floor(
    kind: str, bin_dir: Path, env: dict[str, str], calls: int, cluster_dir: Path | None
) -> dict[str, command_floor.Probe]:
    """The command floor's probes on one implementation, its daemons in their role groups meanwhile."""
    groups = RoleGroups(set(daemons(kind, cluster_dir).values()))
    try:
        for pid, role in daemons(kind, cluster_dir).items():
            groups.move(pid, role)
        return command_floor.measure(bin_dir, env, calls, groups.usage_s)
    finally:
        groups.close()


def stop_shoal(directory: Path) -> None:
    subprocess.run(
        [sys.executable, "-P", "-m", "cli.shoal_admin", "down", "--dir", str(directory)],
        capture_output=True,
        timeout=120,
    )
    shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------- report


def _ratio(shoal: str, slurm: str, higher_is_better: bool) -> str:
    try:
        a, b = float(shoal), float(slurm)
    except ValueError:
        return "n/a"
    if a == 0 or b == 0:
        return "n/a"
    ratio = b / a if higher_is_better else a / b  # > 1 = shoal slower
    return f"{ratio:.2f}x {'slower' if ratio > 1.0 else 'faster'}" if abs(ratio - 1) > 0.005 else "same"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="bench.sh runs per implementation (default 2)")
    ap.add_argument("--jobs", type=int, default=200, help="trivial jobs for the CPU split (default 200)")
    ap.add_argument("--skip-bench", action="store_true", help="only the CPU split")
    ap.add_argument("--skip-cpu", action="store_true", help="only bench.sh")
    ap.add_argument("--small", action="store_true", help="bench.sh with 100/25x4/100 jobs (a quick look)")
    ap.add_argument("--submit-path", action="store_true", help="only held submissions and one array")
    ap.add_argument("--held", type=int, default=500, help="held submissions for --submit-path (default 500)")
    ap.add_argument(
        "--array", type=int, default=0, help="array tasks for --submit-path (default: Slurm's largest)"
    )
    ap.add_argument("--floor", action="store_true", help="only the short-command floor")
    ap.add_argument("--floor-calls", type=int, default=200, help="calls per floor probe (default 200)")
    ap.add_argument(
        "--shoal-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a slurm.conf setting for shoal's cluster (shoal up --set), e.g. SchedulerParameters=bf_interval=30",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("vs_slurm: run as root (process accounting, and the real Slurm's jobs)")
    if _run([str(SLURM_BIN / "sinfo"), "-h"], SLURM_ENV).returncode != 0:
        raise SystemExit("vs_slurm: the real Slurm is not answering; start it: ../shared/realslurm/up.sh")
    if args.submit_path:
        return submit_path_main(args.held, args.array, tuple(args.shoal_set))
    if args.floor:
        args.skip_bench = args.skip_cpu = True
    parts = [
        *([f"bench.sh runs {args.runs}{' (small)' if args.small else ''}"] if not args.skip_bench else []),
        *([f"CPU split over {args.jobs} jobs"] if not args.skip_cpu else []),
        *([f"command floor, {args.floor_calls} calls a probe"] if args.floor or not args.skip_bench else []),
    ]
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
        + "; ".join(parts)
    )

    results: dict[str, dict[str, str]] = {}
    cpu: dict[str, tuple[dict[str, float], float]] = {}
    floors: dict[str, dict[str, command_floor.Probe]] = {}
    if args.floor or not args.skip_bench:
        floors["slurm"] = floor("slurm", SLURM_BIN, SLURM_ENV, args.floor_calls, None)
    if not args.skip_bench:
        results["slurm"] = bench_sh(
            SLURM_BIN, SLURM_ENV, args.runs, args.small, "/run/realslurm/slurmctld.pid"
        )
    if not args.skip_cpu:
        cpu["slurm"] = cpu_per_job("slurm", SLURM_BIN, SLURM_ENV, args.jobs, None)
    directory = Path(tempfile.mkdtemp(prefix="vs_slurm."))
    try:
        cli, env = start_shoal(directory, settings=tuple(args.shoal_set))
        if floors:
            floors["shoal"] = floor("shoal", cli, env, args.floor_calls, directory)
        if not args.skip_bench:
            results["shoal"] = bench_sh(cli, env, args.runs, args.small, str(directory / "run" / "ctld.pid"))
        if not args.skip_cpu:
            cpu["shoal"] = cpu_per_job("shoal", cli, env, args.jobs, directory)
    finally:
        stop_shoal(directory)

    if results:
        print("\n| figure (bench.sh) | Slurm 22.05 | shoal | shoal vs Slurm |\n|---|---|---|---|")
        for key in results["slurm"]:
            higher = key.endswith("_per_s")
            s, o = results["slurm"].get(key, ""), results["shoal"].get(key, "")
            print(f"| `{key}` | {s} | {o} | {_ratio(o, s, higher)} |")
    if cpu:
        print(
            f"\n| CPU ms per trivial job ({args.jobs} x `sbatch --wrap=true`, to COMPLETED in sacct) "
            "| Slurm 22.05 | shoal | shoal vs Slurm |\n|---|---|---|---|"
        )
        roles = [r for r in ROLES if any(r in c[0] for c in cpu.values())]
        for role in [*roles, "total"]:
            vals = {
                k: (sum(c[0].values()) if role == "total" else c[0].get(role, 0.0)) for k, c in cpu.items()
            }
            ms_slurm, ms_shoal = vals.get("slurm", 0.0), vals.get("shoal", 0.0)
            print(
                f"| {role} | {ms_slurm:.2f} | {ms_shoal:.2f} | {_ratio(f'{ms_shoal}', f'{ms_slurm}', False)} |"
            )
        walls = {k: c[1] for k, c in cpu.items()}
        print(
            f"| (wall time of the {args.jobs} jobs, s) | {walls.get('slurm', 0):.1f} | {walls.get('shoal', 0):.1f} | |"
        )
    if floors:
        print(
            "\n" + "\n".join(command_floor.report(floors["slurm"], floors["shoal"], args.floor_calls, ROLES))
        )
    return 0


def submit_path_main(held: int, array: int, settings: tuple[str, ...] = ()) -> int:
    largest = int(_config_value(SLURM_BIN, SLURM_ENV, "MaxArraySize") or 1001) - 1  # tasks 0..MaxArraySize-1
    if not array or array > largest + 1:
        if array:
            print(
                f"# the real Slurm's MaxArraySize allows {largest + 1} tasks, not {array}: both run {largest + 1}"
            )
        array = largest + 1
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at the start; "
        f"{held} held submissions, a {array}-task array"
    )
    results = {"slurm": submit_path(SLURM_BIN, SLURM_ENV, held, array, "/run/realslurm/slurmctld.pid")}
    print(f"# load {os.getloadavg()[0]:.2f} after Slurm's run", flush=True)
    directory = Path(tempfile.mkdtemp(prefix="vs_slurm."))
    try:
        cli, env = start_shoal(directory, max_array_size=array, settings=settings)
        results["shoal"] = submit_path(cli, env, held, array, str(directory / "run" / "ctld.pid"))
    finally:
        stop_shoal(directory)
    print(f"# load {os.getloadavg()[0]:.2f} at the end")
    print("\n| figure | Slurm 22.05 | shoal | shoal vs Slurm |\n|---|---|---|---|")
    for key, slurm in results["slurm"].items():
        shoal = results["shoal"].get(key, "")
        print(f"| {key} | {slurm} | {shoal} | {_ratio(shoal, slurm, key.endswith('jobs/s'))} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
