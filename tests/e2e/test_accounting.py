"""Accounting end to end: sacctmgr builds the tree, ctld enforces it, sacct shows what ran."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from noded.gpu.fake_nvml import DESCRIPTIONS
from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e
DAEMON = 1  # a system user with no association


@pytest.fixture(scope="module")
def acct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("acct"),
        accounting=True,
        extra=("AccountingStorageEnforce=associations,limits,qos",),
    )
    c.ok("sacctmgr", "-i", "add", "account", "physics", "fairshare=40")
    c.ok("sacctmgr", "-i", "add", "account", "research", "fairshare=60")
    c.ok("sacctmgr", "-i", "add", "user", "nobody", "account=physics", "maxjobs=1")
    time.sleep(2.5)  # ctld polls the association version every second
    yield c
    stop_cluster(c)


def wait_sacct(c: Cluster, job: int, want: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline:
        out = c.ok("sacct", "-P", "-n", "-o", "JobID,State", "-j", str(job))
        if want in out:
            return out
        time.sleep(0.3)
    raise AssertionError(f"sacct never showed {want!r} for {job}: {out!r}")


def test_tree_as_sacctmgr_shows_it(acct: Cluster) -> None:
    out = acct.ok("sacctmgr", "-P", "-n", "show", "assoc", "format=Account,User,Share,MaxJobs")
    rows = [line.split("|") for line in out.splitlines()]
    assert ["physics", "", "40", ""] in rows and ["physics", "nobody", "1", "1"] in rows
    assert ["research", "", "60", ""] in rows
    assert [r[0] for r in rows].index("physics") < [r[0] for r in rows].index("research")


def test_user_without_association_is_refused(acct: Cluster, workdir: Path) -> None:
    out = acct.run("sbatch", "--wrap", "true", user=DAEMON, cwd=workdir)
    assert out.returncode != 0
    assert "Invalid account or account/partition combination specified" in out.stderr


def test_only_admins_change_accounting(acct: Cluster, workdir: Path) -> None:
    # 22.05 (scenario 110 and the running one): a user's add shows its plan, then is refused; a user's
    # modify or delete is refused at once; nothing changes
    cluster = acct.ok("sacctmgr", "-P", "-n", "show", "cluster", "format=cluster").strip()
    out = acct.run("sacctmgr", "-i", "add", "account", "sneaky", user=NOBODY, cwd=workdir)
    assert (out.returncode, out.stdout, out.stderr) == (
        1,
        (
            " Adding Account(s)\n  sneaky\n Settings\n  Description     = Account Name\n"
            f"  Organization    = Parent/Account Name\n Associations\n  A = sneaky     C = {cluster:<10}\n"
        ),
        " Problem adding accounts: Access/permission denied\n",
    )
    out = acct.run("sacctmgr", "-i", "modify", "user", "nobody", "set", "maxjobs=9", user=NOBODY, cwd=workdir)
    assert (out.returncode, out.stdout, out.stderr) == (
        1,
        "",
        (
            "sacctmgr: error: Your user doesn't have privilege to perform this action\n"
            " Error with request: Access/permission denied\n"
        ),
    )
    assert "sneaky" not in acct.ok("sacctmgr", "-P", "-n", "show", "account", "format=account")


def test_max_jobs_keeps_the_second_job_pending(acct: Cluster, workdir: Path) -> None:
    first = acct.submit(
        "--wrap", "sleep 8", user=NOBODY, cwd=workdir
    )  # outlives slow squeue polls under load
    second = acct.submit("--wrap", "true", user=NOBODY, cwd=workdir)
    acct.wait_state(first, {"RUNNING"})
    deadline = time.monotonic() + 10
    reason = ""
    while time.monotonic() < deadline and reason != "AssocMaxJobsLimit":
        reason = acct.job_field(second, "%r")
        time.sleep(0.2)
    assert reason == "AssocMaxJobsLimit"
    acct.wait_state(second, {"COMPLETED"}, timeout=60)


def test_grp_tres_mins_stops_an_account_that_used_its_cpu_minutes(acct: Cluster, workdir: Path) -> None:
    acct.ok("sacctmgr", "-i", "add", "account", "budget", "grptresmins=cpu=1")  # one CPU-minute in all
    acct.ok("sacctmgr", "-i", "add", "user", "root", "account=budget")
    out = acct.ok(
        "sacctmgr", "-P", "-n", "show", "assoc", "where", "account=budget", "format=Account,User,GrpTRESMins"
    )
    assert "budget||cpu=1" in out.splitlines()
    time.sleep(2.5)  # ctld reloads the associations
    first = acct.submit("-A", "budget", "-N2", "-n8", "-t", "1", "--wrap", "sleep 9", cwd=workdir)  # 72 CPU-s
    acct.wait_state(first, {"COMPLETED"}, timeout=60)
    second = acct.submit("-A", "budget", "-n1", "-t", "1", "--wrap", "true", cwd=workdir)
    wait_until(
        "the reason AssocGrpCPUMinutesLimit",
        lambda: acct.job_field(second, "%r") == "AssocGrpCPUMinutesLimit",
        10,
    )
    assert acct.state(second) == "PENDING"
    acct.ok("sacctmgr", "-i", "modify", "account", "budget", "set", "grptresmins=cpu=10")  # a bigger budget
    acct.wait_state(second, {"COMPLETED"}, timeout=30)


def test_sshare_shows_grp_tres_mins_and_the_running_jobs_tres_minutes(acct: Cluster, workdir: Path) -> None:
    """sshare -l's GrpTRESMins (the limit, in TRES order) and TRESRunMins (with limits enforced: every
    tracked TRES times the minutes left before the job's time limit, in its association and above)."""
    acct.ok("sacctmgr", "-i", "add", "account", "metered", "grptresmins=gres/gpu=600,cpu=6000")
    acct.ok("sacctmgr", "-i", "add", "user", "root", "account=metered")
    time.sleep(2.5)  # ctld reloads the associations
    job = acct.submit("-A", "metered", "-n2", "--mem=2000", "-t", "10", "--wrap", "sleep 60", cwd=workdir)
    try:
        acct.wait_state(job, {"RUNNING"})
        out = acct.ok(
            "sshare", "-a", "-P", "-n", "-A", "metered", "-o", "Account,User,GrpTRESMins,TRESRunMins"
        )
        rows = {(r[0].strip(), r[1]): r[2:] for r in (line.split("|") for line in out.splitlines())}
        assert rows[("metered", "")][0] == "cpu=6000,gres/gpu=600"
        assert rows[("metered", "root")][0] == ""
        run = dict(item.split("=") for item in rows[("metered", "root")][1].split(","))
        names = ["cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages"]
        assert list(run)[:8] == names
        # 10 minutes less the few seconds it has run: 2 CPUs x 9.x minutes, 2000 MB x 9.x minutes
        assert run["cpu"] in ("19", "20") and run["billing"] == run["cpu"], run
        assert 19000 <= int(run["mem"]) <= 20000 and run["node"] in ("9", "10") and run["energy"] == "0", run
        assert rows[("metered", "")][1] == rows[("metered", "root")][1]  # the account sums its users
        header = acct.ok("sshare", "-l", "-P").splitlines()[0]
        assert header.endswith("|LevelFS|GrpTRESMins|TRESRunMins")
    finally:
        acct.ok("scancel", str(job))
    acct.wait_state(job, {"CANCELLED"})
    out = acct.ok("sshare", "-a", "-P", "-n", "-A", "metered", "-o", "User,TRESRunMins")
    assert all(",".join(f"{n}=0" for n in names) in line for line in out.splitlines()), out


def test_qos_grp_tres_keeps_the_second_job_pending(acct: Cluster, workdir: Path) -> None:
    acct.ok("sacctmgr", "-i", "add", "qos", "pool", "GrpTRES=cpu=2", "MaxTRESPU=cpu=4")
    out = acct.ok(
        "sacctmgr", "-P", "-n", "show", "qos", "where", "name=pool", "format=Name,GrpTRES,MaxTRESPU"
    )
    assert out.splitlines() == ["pool|cpu=2|cpu=4"]
    # options may follow the words, as with Slurm's sacctmgr
    assert acct.ok("sacctmgr", "show", "qos", "pool", "format=Name,GrpTRES", "-P", "-n").splitlines() == [
        "pool|cpu=2"
    ]
    acct.ok("sacctmgr", "-i", "add", "account", "pooled")
    acct.ok("sacctmgr", "-i", "add", "user", "root", "account=pooled", "qos=normal,pool")
    time.sleep(2.5)  # ctld reloads the associations
    first = acct.submit("-A", "pooled", "-q", "pool", "-n2", "--wrap", "sleep 8", cwd=workdir)
    second = acct.submit("-A", "pooled", "-q", "pool", "-n1", "--wrap", "true", cwd=workdir)
    acct.wait_state(first, {"RUNNING"})
    wait_until("the reason QOSGrpCpuLimit", lambda: acct.job_field(second, "%r") == "QOSGrpCpuLimit", 10)
    assert acct.state(second) == "PENDING"
    acct.wait_state(second, {"COMPLETED"}, timeout=60)  # once the first job ends


def test_sacct_shows_jobs_steps_and_array_tasks(acct: Cluster, workdir: Path) -> None:
    ok = acct.submit("-J", "ok", "--wrap", "true", cwd=workdir)
    fails = acct.submit("-J", "fails", "--wrap", "exit 3", cwd=workdir)
    array = acct.submit("-J", "arr", "-a", "1-2", "--wrap", "true", cwd=workdir)
    for job, end in ((ok, "COMPLETED"), (fails, "FAILED")):
        wait_sacct(acct, job, f"{job}.batch|{end}")
    wait_sacct(acct, array, f"{array}_2.batch|COMPLETED")
    out = acct.ok(
        "sacct", "-P", "-o", "JobID,JobName,State,ExitCode,Elapsed,NodeList", "-j", f"{ok},{fails},{array}"
    )
    lines = out.splitlines()
    assert lines[0] == "JobID|JobName|State|ExitCode|Elapsed|NodeList"
    rows = {line.split("|")[0]: line.split("|")[1:] for line in lines[1:]}
    assert rows[str(ok)][:3] == ["ok", "COMPLETED", "0:0"]
    assert rows[f"{ok}.batch"][:3] == ["batch", "COMPLETED", "0:0"]
    assert rows[str(fails)][:3] == ["fails", "FAILED", "3:0"]
    assert rows[f"{fails}.batch"][:3] == ["batch", "FAILED", "3:0"]
    assert rows[f"{array}_1"][:2] == ["arr", "COMPLETED"] and f"{array}_2.batch" in rows
    assert all(r[3].count(":") == 2 and r[4].startswith("node") for r in rows.values())


def test_submitit_query_parses(acct: Cluster, workdir: Path) -> None:
    a = acct.submit("--wrap", "true", cwd=workdir)
    b = acct.submit("--wrap", "sleep 30", cwd=workdir)
    wait_sacct(acct, a, f"{a}|COMPLETED")
    acct.wait_state(b, {"RUNNING"})
    # 22.05 lists the running script's .batch step, RUNNING 0:0, its End Unknown
    wait_sacct(acct, b, f"{b}.batch|RUNNING")
    running = acct.ok("sacct", "-j", str(b), "-P", "-o", "JobID,State,ExitCode,Elapsed,End").splitlines()
    assert [line.rsplit("|", 2)[0] for line in running] == [
        "JobID|State|ExitCode",
        f"{b}|RUNNING|0:0",
        f"{b}.batch|RUNNING|0:0",
    ]
    assert all(line.endswith("|Unknown") and line.count(":") == 3 for line in running[1:])
    out = acct.ok("sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", str(a), "-j", str(b))
    lines = out.splitlines()
    assert lines[0] == "JobID|State|NodeList"
    states = {line.split("|")[0]: line.split("|")[1] for line in lines[1:]}
    assert states[str(a)] == "COMPLETED" and states[str(b)] == "RUNNING"
    acct.ok("scancel", str(b))
    wait_sacct(acct, b, f"{b}|CANCELLED by 0")
    wait_sacct(acct, b, f"{b}.batch|CANCELLED")


BURN = "import time\nx = b'x' * (80 << 20)\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n    pass\n"


def test_sacct_shows_srun_steps_with_state_exit_code_and_usage(acct: Cluster, workdir: Path) -> None:
    (workdir / "burn.py").write_text(BURN)
    script = workdir / "steps.sh"
    script.write_text(
        "#!/bin/bash\nsrun -n1 true\nsrun -n1 bash -c 'exit 3'\nsrun -n1 python3 burn.py\npython3 burn.py\n"
    )
    job = acct.submit("-N1", "-n1", str(script), cwd=workdir)
    wait_sacct(acct, job, f"{job}.batch|COMPLETED", timeout=60)
    out = acct.ok("sacct", "-P", "-n", "-o", "JobID,JobName,State,ExitCode,MaxRSS,TotalCPU", "-j", str(job))
    rows = {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}
    assert rows[f"{job}.0"][:3] == ["true", "COMPLETED", "0:0"]
    assert rows[f"{job}.1"][:3] == ["bash", "FAILED", "3:0"]
    assert rows[f"{job}.2"][:3] == ["python3", "COMPLETED", "0:0"]
    for step in (f"{job}.2", f"{job}.batch"):  # 80 MB touched, over a second of CPU
        max_rss, total_cpu = rows[step][3], rows[step][4]
        assert max_rss.endswith("K") and int(max_rss[:-1]) > 80_000, (step, max_rss)
        assert total_cpu >= "00:00:01", (step, total_cpu)
    assert rows[str(job)][4] >= "00:00:01"  # the job's TotalCPU sums its steps


def test_sreport_counts_a_drained_node_as_down(acct: Cluster) -> None:
    # the node event (with the node's 4 CPUs) goes ctld -> dbd; sreport's Down column comes from it
    began = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    acct.ok("scontrol", "update", "nodename=node2", "state=drain", "reason=fan")
    time.sleep(3)
    acct.ok("scontrol", "update", "nodename=node2", "state=resume")
    ended = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 5))
    deadline = time.monotonic() + 30
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        out = acct.ok(
            "sreport",
            "-P",
            "-n",
            "-t",
            "seconds",
            "-T",
            "cpu,gres/gpu",
            "cluster",
            "utilization",
            f"start={began}",
            f"end={ended}",
        )
        rows = [line.split("|") for line in out.splitlines()]
        if rows and int(rows[0][3]) > 0:
            break
        time.sleep(0.5)
    assert [r[1] for r in rows] == ["cpu", "gres/gpu"]
    cpu = dict(
        zip(
            ["Allocated", "Down", "PLND Down", "Idle", "Planned", "Reported"],
            map(int, rows[0][2:]),
            strict=True,
        )
    )
    assert cpu["Down"] >= 2 * 4 and cpu["Down"] <= cpu["Reported"]  # 4 CPUs drained for about 3 s


def test_sacct_shows_the_batch_steps_gpu_utilization_and_memory(tmp_path: Path) -> None:
    # an emulated DGX whose fake NVML says GPU 0 is 70% busy with 1000 MiB used, GPU 1 30% with 5000 MiB
    description = json.loads((DESCRIPTIONS / "dgx_h100.json").read_text())
    description["gpus"][0].update(utilization=70, memory_used_mb=1000)
    description["gpus"][1].update(utilization=30, memory_used_mb=5000)
    (tmp_path / "busy_dgx.json").write_text(json.dumps(description))
    c = start_cluster(
        tmp_path / "c",
        nodes=1,
        accounting=True,
        up_args=(
            "--gpus-per-node",
            "8",
            "--gpu-type",
            "h100",
            "--fake-nvml",
            str(tmp_path / "busy_dgx.json"),
            "--no-cgroups",
        ),
    )
    try:
        job = c.submit("-o", "/dev/null", "--gres=gpu:h100:2", "--wrap", "sleep 4")
        wait_sacct(c, job, f"{job}.batch|COMPLETED", timeout=60)
        out = c.ok("sacct", "-P", "-o", "JobID,TRESUsageInMax,TRESUsageInAve", "-j", str(job))
        rows = {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}
        usage_max, usage_ave = rows[f"{job}.batch"]
        assert usage_max.endswith(",gres/gpumem=5000M,gres/gpuutil=70"), usage_max
        assert usage_ave.endswith(",gres/gpumem=5000M,gres/gpuutil=50"), usage_ave  # mean over its 2 GPUs
        assert rows[str(job)] == ["", ""]  # the job line has no usage of its own, as in Slurm
    finally:
        stop_cluster(c)


def test_sacct_clusters_all_and_own_name_list_the_job(acct: Cluster, workdir: Path) -> None:
    """Snakemake's Slurm plugin always asks with `--clusters all`; a job it never sees, it waits for forever."""
    name = "smk-6f1c"
    job = acct.submit("-J", name, "--wrap", "true", cwd=workdir)
    wait_sacct(acct, job, f"{job}|COMPLETED")
    # A window ending `now` lists the jobs eligible before now: under sched/backfill the job
    # can be submitted, run and recorded within one second, so ask once that second has passed.
    eligible = acct.ok("sacct", "-X", "-n", "-P", "-o", "Eligible", "-j", str(job)).strip()
    since = time.mktime(time.strptime(eligible, "%Y-%m-%dT%H:%M:%S"))
    wait_until("the second the job became eligible to pass", lambda: time.time() >= since + 1)
    cluster_name = (
        acct.ok("scontrol", "show", "config").split("ClusterName", 1)[1].split("=", 1)[1].split()[0]
    )
    start = time.strftime("%Y-%m-%dT%H:00", time.localtime(time.time() - 3600))
    snakemake = (
        "sacct",
        "-X",
        "--parsable2",
        "--clusters",
        "all",
        "--noheader",
        "--format=JobIdRaw,State",
        "--starttime",
        start,
        "--endtime",
        "now",
        "--name",
        name,
    )
    assert acct.ok(*snakemake) == f"{job}|COMPLETED\n"
    for flags in (("-M", "all"), ("-M", cluster_name), ("-L",), ("--clusters=all",)):
        assert (
            acct.ok("sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", str(job), *flags)
            == f"{job}|COMPLETED\n"
        )
    assert acct.ok("sacct", "-X", "-n", "-P", "-o", "JobID", "-j", str(job), "-M", "elsewhere") == ""
