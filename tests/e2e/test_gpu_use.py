"""Live GPU use on a real cluster (issue 17): a 2-GPU job on the fake NVML with programmed load shows in
/metrics/gpus and /shoal/v1/gpus on its node and GPUs with its job id, sstat shows its live gpuutil;
left idle, it is flagged (scontrol show job), the site's notify program runs once, and with the
cancel policy it ends CANCELLED with Reason=GpuIdle (scontrol, sacct)."""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from restd.gpus import GPUS_SCHEMA
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

USAGE_ENV = "SHOAL_FAKE_NVML_USAGE"
SRUN = Path(sys.executable).parent / "srun"  # this environment's (the real Slurm's is on PATH too)
LOAD: dict[str, Path] = {}  # the fake NVML's usage file of the module's cluster


def _set_load(path: Path, utilization: int) -> None:
    path.write_text(
        json.dumps(
            {
                str(m): {
                    "utilization": utilization,
                    "memory_used_mb": 1024 + m,
                    "temperature_c": 50 + m,
                    "power_w": 200,
                }
                for m in range(8)
            }
        )
    )


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("gpuuse")
    usage = base / "usage.json"
    _set_load(usage, 60)
    usage.chmod(0o644)
    notify = base / "notify.sh"
    notify.write_text(
        f'#!/bin/sh\necho "$SLURM_JOB_ID $SLURM_JOB_USER $SHOAL_GPU_IDLE_SINCE" >> {base}/notified\n'
    )
    notify.chmod(0o755)
    params = f"shoal_gpu_idle_threshold=10,shoal_gpu_idle_time=3,shoal_gpu_idle_cancel=3,shoal_gpu_idle_notify={notify}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(USAGE_ENV, str(usage))
        c = start_cluster(
            base / "c",
            nodes=2,
            accounting=True,
            extra=(f"SchedulerParameters={params}", "SlurmdTimeout=12"),  # pings every 4 s
            up_args=("--gpus-per-node", "8", "--gpu-type", "h100", "--no-cgroups"),
            restd=True,
        )
    LOAD["file"] = usage
    yield c
    stop_cluster(c)


def _url(c: Cluster) -> str:
    return (c.dir / "run" / "restd.url").read_text().strip()


def _get(c: Cluster, path: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(_url(c) + path, headers={"X-SLURM-USER-TOKEN": token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _gpus(c: Cluster, token: str) -> list[dict[str, Any]]:
    status, text = _get(c, "/shoal/v1/gpus", token)
    assert status == 200, text
    body = json.loads(text)
    jsonschema.Draft4Validator(GPUS_SCHEMA).validate({"gpus": body["gpus"]})
    gpus: list[dict[str, Any]] = body["gpus"]
    return gpus


def _allocated(c: Cluster, job: int) -> tuple[str, list[int]]:
    """The job's node and GPU indices, as `scontrol -d show job` says (GRES=gpu:h100:2(IDX:0-1))."""
    show = c.ok("scontrol", "-d", "show", "job", str(job))
    match = re.search(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\d+ GRES=gpu:h100:2\(IDX:(\d+)[-,](\d+)\)", show)
    assert match, show
    first, last = int(match.group(2)), int(match.group(3))
    return match.group(1), list(range(first, last + 1)) if "-" in match.group(0) else [first, last]


@pytest.fixture(scope="module")
def busy_job(gpu_cluster: Cluster) -> int:
    out = gpu_cluster.dir.parent / "out"
    out.mkdir(mode=0o1777, exist_ok=True)
    out.chmod(0o1777)
    job = gpu_cluster.submit(
        "-o", str(out / "job-%j.out"), "--gres=gpu:h100:2", "--wrap", f"{SRUN} sleep 300"
    )
    gpu_cluster.wait_state(job, {"RUNNING"})
    return job


def test_the_jobs_gpus_in_metrics_and_json_on_its_node(gpu_cluster: Cluster, busy_job: int) -> None:
    c, job = gpu_cluster, busy_job
    node, indices = _allocated(c, job)
    token = c.ok("scontrol", "token").strip().split("=", 1)[1]
    assert _get(c, "/shoal/v1/gpus")[0] == 401  # restd's login, as the slurm endpoints
    wait_until(
        "the job's GPUs reported", lambda: any(g["job_id"] == job for g in _gpus(c, token)), timeout=30
    )
    gpus = _gpus(c, token)
    assert len(gpus) == 16 and {g["node"] for g in gpus} == {"node1", "node2"}
    held = [(g["node"], g["index"]) for g in gpus if g["job_id"] == job]
    assert held == [(node, i) for i in indices]
    mine = next(g for g in gpus if g["job_id"] == job)
    assert (mine["utilization"], mine["name"], mine["user"], mine["idle"]) == (
        60,
        "NVIDIA H100 80GB HBM3",
        "root",
        False,
    )
    assert mine["memory_used_mb"] == 1024 + mine["index"] and mine["temperature_c"] == 50 + mine["index"]

    status, text = _get(c, "/metrics/gpus")
    assert status == 200, text
    samples = {
        (s.name, s.labels["node"], s.labels["gpu"]): (s.value, s.labels["job"])
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    for i in indices:
        assert samples[("shoal_gpu_utilization_ratio", node, str(i))] == (0.6, str(job))
        assert samples[("shoal_gpu_power_watts", node, str(i))] == (200, str(job))
        assert samples[("shoal_gpu_idle", node, str(i))] == (0, str(job))
    free = next(i for i in range(8) if i not in indices)
    assert samples[("shoal_gpu_allocated", node, str(free))] == (0, "")
    assert "/metrics/gpus\n" in _get(c, "/metrics")[1]


def test_sstat_shows_the_running_jobs_live_gpuutil(gpu_cluster: Cluster, busy_job: int) -> None:
    c, job = gpu_cluster, busy_job
    wait_until(
        "the srun step reported", lambda: len(c.ok("sstat", "-a", "-n", "-j", str(job)).split("\n")) > 2
    )
    out = c.ok("sstat", "-a", "-P", "-n", "-j", str(job), "-o", "JobID,NTasks,TRESUsageInAve")
    rows = [line.split("|") for line in out.strip().split("\n")]
    assert [row[:2] for row in rows] == [[f"{job}.batch", "1"], [f"{job}.0", "1"]]
    for _, _, tres in rows:
        assert "gres/gpuutil=60" in tres and "gres/gpumem=" in tres, tres
    step_id, nodelist, tres = c.ok(
        "sstat", "-n", "-P", "-j", str(job), "-o", "JobID,Nodelist,TRESUsageInMax"
    ).split("|")
    assert (step_id, nodelist) == (f"{job}.0", _allocated(c, job)[0])  # the default: the lowest numbered step
    assert "gres/gpuutil=60" in tres, tres
    missing = c.run("sstat", "-n", "-j", f"{job}.7")
    assert (missing.returncode, missing.stderr) == (0, f"sstat: error: StepId={job}.7 not found running.\n")
    unknown = c.run("sstat", "-j", "999999")
    assert unknown.returncode == 0 and unknown.stderr == "sstat: error: couldn't get steps for job 999999\n"


def test_sstat_shows_a_step_at_once(gpu_cluster: Cluster) -> None:
    """As 22.05's (which asks slurmstepd): the step's row right after it starts, not at the next ping."""
    c = gpu_cluster
    out = c.dir.parent / "out"
    out.mkdir(mode=0o1777, exist_ok=True)
    out.chmod(0o1777)
    job = c.submit("-o", str(out / "fresh-%j.out"), "--gres=gpu:h100:1", "--wrap", f"{SRUN} sleep 300")
    try:
        wait_until(
            "ctld has the srun step",
            lambda: f"{job}.0" in c.ok("squeue", "-h", "-s", "-j", str(job), "-o", "%i").split(),
            timeout=30,
        )
        assert c.ok("sstat", "-n", "-P", "-j", str(job), "-o", "JobID,NTasks").split() == [f"{job}.0|1"]
    finally:
        c.ok("scancel", str(job))


def test_a_job_left_idle_is_flagged_notified_once_and_cancelled(gpu_cluster: Cluster, busy_job: int) -> None:
    c, job = gpu_cluster, busy_job
    _set_load(LOAD["file"], 2)  # under the 10% threshold from now on
    wait_until(
        "the job flagged idle",
        lambda: (
            "GpuIdle=yes Since=" in c.ok("scontrol", "show", "job", str(job)) or c.state(job) != "RUNNING"
        ),
        timeout=40,
    )
    wait_until("the job cancelled for idle GPUs", lambda: c.state(job) == "CANCELLED", timeout=40)
    show = c.ok("scontrol", "show", "job", str(job))
    assert "JobState=CANCELLED Reason=GpuIdle" in show and "GpuIdle=yes Since=" in show, show
    pattern = (
        rf"slurmstepd-node\d: error: \*\*\* JOB {job} ON node\d CANCELLED AT \S+ DUE TO IDLE GPUS \*\*\*"
    )
    output = c.dir.parent / "out" / f"job-{job}.out"
    # the state changes in ctld first; the job's stepd writes the line as it kills the job
    wait_until(
        "the cancel line in the job's output", lambda: re.search(pattern, output.read_text()), timeout=30
    )
    notified = (c.dir.parent / "notified").read_text().split("\n")
    assert [line.split()[:2] for line in notified if line] == [[str(job), "root"]]

    def sacct() -> str:
        return c.ok("sacct", "-n", "-P", "-X", "-j", str(job), "-o", "State,Reason").strip()

    wait_until("the cancel in sacct", lambda: sacct().startswith("CANCELLED"), timeout=30)
    assert sacct().endswith("|GpuIdle"), sacct()
