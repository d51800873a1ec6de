"""Slurm 25.11's OpenMetrics from shoal-restd on a real cluster: a running job, a drained node, the
scheduler counters, every name of Slurm's list, and MetricsAuthUsers' token check."""

from __future__ import annotations

import pwd
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

TSV = Path(__file__).resolve().parents[1] / "data" / "slurm-25.11-openmetrics.tsv"
ENDPOINTS = ("jobs", "nodes", "partitions", "scheduler")


def _url(cluster: Cluster) -> str:
    return (cluster.dir / "run" / "restd.url").read_text().strip()


def _get(cluster: Cluster, path: str, token: str | None = None) -> tuple[int, str, str]:
    headers = {"X-SLURM-USER-TOKEN": token} if token else {}
    request = urllib.request.Request(_url(cluster) + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def _scrape(
    cluster: Cluster, endpoint: str, token: str | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, ctype, text = _get(cluster, f"/metrics/{endpoint}", token)
    assert status == 200, text
    assert ctype.startswith("application/openmetrics-text")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_a_running_job_a_drained_node_and_the_scheduler(cluster: Cluster) -> None:
    status, _, index = _get(cluster, "/metrics")
    assert status == 200 and "/metrics/jobs\n" in index and "/metrics/scheduler\n" in index
    before = _scrape(cluster, "scheduler")[("slurm_sdiag_jobs_submitted", ())]
    job = cluster.submit("--wrap", "sleep 60")
    cluster.wait_state(job, {"RUNNING"})
    cluster.ok("scontrol", "update", "NodeName=node2", "State=DRAIN", "Reason=metrics")
    try:
        jobs = _scrape(cluster, "jobs")
        assert jobs[("slurm_jobs_running", ())] >= 1
        assert jobs[("slurm_jobs_cpus_alloc", ())] >= 1
        nodes = _scrape(cluster, "nodes")
        assert nodes[("slurm_nodes_drain", ())] == 1
        assert nodes[("slurm_nodes", ())] == 2
        assert nodes[("slurm_node_cpus_alloc", (("node", "node1"),))] >= 1
        parts = _scrape(cluster, "partitions")
        assert parts[("slurm_partition_jobs_running", (("partition", "batch"),))] >= 1
        assert parts[("slurm_partition_nodes_drain", (("partition", "batch"),))] == 1
        wait_until(
            "the submission counted",
            lambda: _scrape(cluster, "scheduler")[("slurm_sdiag_jobs_submitted", ())] >= before + 1,
        )
        users = _scrape(cluster, "jobs-users-accts")
        assert users[("slurm_user_jobs_running", (("username", "root"),))] >= 1
    finally:
        cluster.ok("scancel", str(job))
        cluster.ok("scontrol", "update", "NodeName=node2", "State=RESUME")
    served = {name for endpoint in ENDPOINTS for name, _ in _scrape(cluster, endpoint)}
    slurm = {line.split("\t")[0] for line in TSV.read_text().splitlines()[1:] if line.strip()}
    assert served == slurm  # all 197 of Slurm 25.11's names, none of our own on these four


def test_shoal_status_shows_the_metrics_url(cluster: Cluster) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cli.shoal_admin", "status", "--dir", str(cluster.dir)],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"metrics: {_url(cluster)}/metrics\n" in out.stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("metrics"), restd=True)
    yield c
    stop_cluster(c)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("metrics-auth"), extra=("MetricsAuthUsers=nobody",), restd=True)
    yield c
    stop_cluster(c)


def test_metrics_auth_users_need_a_listed_users_token(guarded: Cluster) -> None:
    status, _, text = _get(guarded, "/metrics/jobs")
    assert status == 401 and "Traceback" not in text
    nobody = guarded.ok("scontrol", "token", user=NOBODY).strip().split("=", 1)[1]
    assert ("slurm_jobs", ()) in _scrape(guarded, "jobs", nobody)
    root = guarded.ok("scontrol", "token").strip().split("=", 1)[1]
    assert ("slurm_nodes", ()) in _scrape(guarded, "nodes", root)  # root is always allowed
    alice = guarded.ok("scontrol", "token", user=pwd.getpwnam("alice").pw_uid).strip().split("=", 1)[1]
    assert _get(guarded, "/metrics/jobs", alice)[0] == 403
    assert _get(guarded, "/metrics/jobs", "not-a-token")[0] == 401
