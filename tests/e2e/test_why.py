"""`shoal why` end to end: a GPU job pending behind running GPU jobs is told who holds its GPUs until
when, its planned start (the one squeue --start shows) and a smaller request that starts at once,
which does when submitted; the same answer over REST; another user's job is not visible."""

from __future__ import annotations

import json
import pwd
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

OTHER = pwd.getpwnam("daemon").pw_uid  # a user who is not an operator and owns no job here


@pytest.fixture(scope="module")
def why_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("why"),
        nodes=2,
        up_args=("--gpus-per-node", "4", "--gpu-type", "h100", "--no-cgroups"),
        extra=("SchedulerParameters=bf_resolution=1",),
        restd=True,
    )
    yield c
    stop_cluster(c)


@pytest.fixture(scope="module")
def waiting(why_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Job a holds node1's 4 GPUs for 10 minutes, b two of node2's for 20; job w (nobody's) asks 4."""
    c = why_cluster
    work = tmp_path_factory.mktemp("whywork")
    work.chmod(0o1777)
    common = ("--mem=100", "-D", str(work), "--wrap", "sleep 600")
    a = c.submit("-w", "node1", "--gres=gpu:4", "-t", "10", *common)
    b = c.submit("-w", "node2", "--gres=gpu:2", "-t", "20", *common)
    c.wait_state(a, {"RUNNING"})
    c.wait_state(b, {"RUNNING"})
    w = c.submit("--gres=gpu:4", "-t", "5", "--mem=100", "-D", str(work), "--wrap", "true", user=NOBODY)
    wait_until("w pending for Resources", lambda: c.job_field(w, "%T %r") == "PENDING Resources")
    return {"a": a, "b": b, "w": w}


def _why(c: Cluster, *args: str, user: int | None = None) -> Any:
    return c.run("shoal_admin", "why", *args, user=user)


def test_a_job_behind_running_gpu_jobs_gets_who_holds_them_its_start_and_a_working_suggestion(
    why_cluster: Cluster, waiting: dict[str, int], tmp_path: Path
) -> None:
    c, a, b, w = why_cluster, waiting["a"], waiting["b"], waiting["w"]
    out = _why(c, str(w), user=NOBODY)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    planned = c.ok("squeue", "--start", "-h", "-j", str(w), "-o", "%S").strip()
    end_a = c.ok("squeue", "-h", "-j", str(a), "-o", "%e").strip()
    end_b = c.ok("squeue", "-h", "-j", str(b), "-o", "%e").strip()
    assert lines[0] == f"Job {w} is PENDING, Reason: Resources."
    assert (
        f"It needs 4 GPUs on a node; node[1-2] have at most 2 free. Held by job {a} (root) on node1 until "
        f"{end_a}, job {b} (root) on node2 until {end_b}." in lines
    )
    assert planned == end_a  # backfill's plan: when job a's time limit runs out
    assert f"Planned start: {planned} on node1 (backfill's plan)." in lines
    assert lines[-1] == "Sooner: --gres=gpu:2 would start it now on node2."
    answer = json.loads(_why(c, "--json", str(w), user=NOBODY).stdout)
    assert [s["change"] for s in answer["suggestions"]] == ["--gres=gpu:2"]
    # the suggestion works: the same job with --gres=gpu:2 starts at once
    tmp_path.chmod(0o1777)
    smaller = c.submit(
        "--gres=gpu:2", "-t", "5", "--mem=100", "-D", str(tmp_path), "--wrap", "sleep 60", user=NOBODY
    )
    assert c.wait_state(smaller, {"RUNNING"}, timeout=30) == "RUNNING"
    assert c.job_field(smaller, "%N") == "node2"
    c.ok("scancel", str(smaller))


def test_running_unknown_and_other_users_jobs(why_cluster: Cluster, waiting: dict[str, int]) -> None:
    c, a, w = why_cluster, waiting["a"], waiting["w"]
    running = _why(c, str(a))
    assert running.returncode == 0 and f"Job {a} is RUNNING on node1 in partition batch" in running.stdout
    for job_id, user in (("99999", None), (str(w), OTHER), ("x1", None)):
        refused = _why(c, job_id, user=user)
        assert (refused.returncode, refused.stdout) == (1, ""), job_id
        assert refused.stderr == "slurm_load_jobs error: Invalid job id specified\n"
    assert _why(c, str(w)).returncode == 0  # root is an operator: any job


def _get(url: str, token: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, headers={"X-SLURM-USER-TOKEN": token})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_rest_answers_the_owner_and_hides_the_job_from_others(
    why_cluster: Cluster, waiting: dict[str, int]
) -> None:
    c, w = why_cluster, waiting["w"]
    url = (c.dir / "run" / "restd.url").read_text().strip()
    token = c.ok("scontrol", "token", user=NOBODY).strip().split("=", 1)[1]
    status, body = _get(f"{url}/shoal/v1/why/{w}", token)
    assert status == 200
    assert {
        "job_id",
        "state",
        "reason",
        "text",
        "waits_for",
        "planned_start",
        "planned_nodes",
        "ahead",
        "suggestions",
    } <= set(body)
    assert (body["job_id"], body["state"], body["reason"], body["planned_nodes"]) == (
        w,
        "PENDING",
        "Resources",
        "node1",
    )
    assert body["planned_start"] > time.time()
    assert body["text"] == _why(c, str(w), user=NOBODY).stdout.rstrip("\n")
    held = next(x for x in body["waits_for"] if x["kind"] == "resources")
    assert [h["job_id"] for h in held["held_by"]] == [waiting["a"], waiting["b"]]
    assert body["suggestions"][0]["change"] == "--gres=gpu:2"
    other = c.ok("scontrol", "token", user=OTHER).strip().split("=", 1)[1]
    status, refused = _get(f"{url}/shoal/v1/why/{w}", other)
    unknown_status, unknown = _get(f"{url}/slurm/v0.0.44/job/999999", other)
    assert (
        (status, refused["errors"])
        == (unknown_status, unknown["errors"])
        == (
            404,
            [
                {
                    "description": "Invalid job id specified",
                    "error_number": 2017,
                    "error": "Invalid job id specified",
                    "source": "slurm_load_job()",
                }
            ],
        )
    )


def test_the_nodes_four_gpus_have_live_readings(why_cluster: Cluster, waiting: dict[str, int]) -> None:
    """`--gpus-per-node 4 --gpu-type h100`: the fake NVML is the DGX H100's first 4 GPUs, so restd lists
    4 per node with their readings and job a on node1's four; discovery agrees with slurm.conf (no drain)."""
    c, a = why_cluster, waiting["a"]
    url = (c.dir / "run" / "restd.url").read_text().strip()
    token = c.ok("scontrol", "token").strip().split("=", 1)[1]

    def gpus() -> list[dict[str, Any]]:
        status, body = _get(f"{url}/shoal/v1/gpus", token)
        return list(body["gpus"]) if status == 200 else []

    wait_until("both nodes' GPU readings", lambda: len(gpus()) == 8, timeout=40)
    got = gpus()
    assert [(g["node"], g["index"]) for g in got] == [(f"node{n}", i) for n in (1, 2) for i in range(4)]
    assert {(g["name"], g["memory_total_mb"]) for g in got} == {("NVIDIA H100 80GB HBM3", 81559)}
    assert [g["job_id"] for g in got if g["node"] == "node1"] == [a] * 4
    for node in ("node1", "node2"):
        show = c.ok("scontrol", "show", "node", node)
        assert "Gres=gpu:h100:4\n" in show and "DRAIN" not in show, show
