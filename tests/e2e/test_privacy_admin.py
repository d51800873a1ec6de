"""PrivateData=jobs, sacctmgr AdminLevel and REST cancel-reboot on a real cluster (one for the module).

Under PrivateData=jobs alice sees neither bob's job in squeue nor his GPU in /shoal/v1/gpus or the web
view, and /metrics is off, as Slurm 25.11's; AdminLevel=Operator lets alice hold, release
and cancel bob's jobs and see them, but not drain a node, which AdminLevel=Administrator may (the
errors are 22.05's, measured on the real one); and POST /node/{name} with state REBOOT_CANCELED takes
back a pending `scontrol reboot ASAP`.
"""

from __future__ import annotations

import json
import pwd
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

ALICE = pwd.getpwnam("alice").pw_uid
BOB = pwd.getpwnam("bob").pw_uid
S = "/slurm/v0.0.44"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    top = tmp_path_factory.mktemp("privacy")
    c = start_cluster(
        top / "c",
        nodes=2,
        accounting=True,
        restd=True,
        extra=("PrivateData=jobs", "RebootProgram=/bin/true"),
        up_args=("--gpus-per-node", "2", "--gpu-type", "h100", "--no-cgroups"),
    )
    c.ok("sacctmgr", "-i", "add", "account", "lab")
    c.ok("sacctmgr", "-i", "add", "user", "alice,bob", "account=lab")
    out = top / "out"
    out.mkdir(mode=0o1777)
    out.chmod(0o1777)
    yield c
    stop_cluster(c)


def _out(c: Cluster) -> Path:
    return c.dir.parent / "out"


def _token(c: Cluster, user: int | None = None) -> str:
    return c.ok("scontrol", "token", user=user).strip().split("=", 1)[1]


def _http(c: Cluster, method: str, path: str, token: str | None, body: object = None) -> tuple[int, str]:
    url = (c.dir / "run" / "restd.url").read_text().strip() + path
    headers = {"Content-Type": "application/json", **({"X-SLURM-USER-TOKEN": token} if token else {})}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _gpu_jobs(c: Cluster, token: str) -> dict[int, str]:
    status, text = _http(c, "GET", "/shoal/v1/gpus", token)
    assert status == 200, text
    gpus: list[dict[str, Any]] = json.loads(text)["gpus"]
    return {g["job_id"]: g["user"] for g in gpus if g["job_id"] is not None}


def _gpu_job(c: Cluster, user: int) -> int:
    return c.submit(
        "-o", str(_out(c) / "gpu-%j.out"), "--gres=gpu:h100:1", "--wrap", "sleep 300", user=user, cwd=_out(c)
    )


def test_alice_sees_neither_bobs_job_nor_his_gpu_under_private_data(cluster: Cluster) -> None:
    c = cluster
    mine, his = _gpu_job(c, ALICE), _gpu_job(c, BOB)
    for job in (mine, his):
        c.wait_state(job, {"RUNNING"})
    try:
        alice, bob, root = _token(c, ALICE), _token(c, BOB), _token(c)
        wait_until("both GPU jobs in the GPU view", lambda: {mine, his} <= _gpu_jobs(c, root).keys(), 30)
        assert _gpu_jobs(c, root) == {mine: "alice", his: "bob"}
        assert _gpu_jobs(c, alice) == {mine: "alice"}  # bob's GPU reads as holding no job she may see
        assert _gpu_jobs(c, bob) == {his: "bob"}
        status, text = _http(c, "GET", "/shoal/v1/gpus", alice)
        assert sum(g["allocated"] for g in json.loads(text)["gpus"]) == 2  # bob's is in use, not his
        # the web view: its queue and its GPU grid, read with alice's token
        status, text = _http(c, "GET", "/web/api/queue", alice)
        assert status == 200 and str(his) not in {str(j["job_id"]) for j in json.loads(text)["jobs"]}
        status, text = _http(c, "GET", "/web/api/nodes", alice)
        cells = [g for n in json.loads(text)["nodes"] for g in n["gpus"]]
        assert status == 200 and {g["job_id"] for g in cells if g["held"]} == {str(mine), ""}
        assert "bob" not in {g["user"] for g in cells}
        listed = c.ok("squeue", "-h", "-o", "%i %u", user=ALICE).split("\n")
        assert listed == [f"{mine} alice", ""]
        named = c.run("squeue", "-j", str(his), user=ALICE)
        assert (named.returncode, named.stderr) == (1, "slurm_load_jobs error: Invalid job id specified\n")
        assert f"{his}." not in c.run("sstat", "-a", "-j", str(his), user=ALICE).stdout
        assert f"{his}." in c.ok("sstat", "-a", "-j", str(his), user=BOB)
        shown = c.run("scontrol", "show", "job", str(his), user=ALICE)
        assert (shown.returncode, shown.stderr) == (1, "slurm_load_jobs error: Invalid job id specified\n")
        # /metrics (the operator's scrape, read as restd's own user): off while PrivateData is set,
        # whoever asks, as Slurm 25.11's (MetricsParameters=ignore_private_data opens them to all)
        for token in (None, alice, root):
            status, text = _http(c, "GET", "/metrics/gpus", token)
            assert status == 403 and "PrivateData" in text and "bob" not in text
    finally:
        c.ok("scancel", str(mine), str(his))


def _admin_level(c: Cluster, user: str, level: str) -> None:
    c.ok("sacctmgr", "-i", "modify", "user", user, "set", f"AdminLevel={level}")


def test_an_operator_holds_and_cancels_bobs_jobs_and_only_an_administrator_drains(cluster: Cluster) -> None:
    c = cluster
    # pending while released too (its begin time), so that alice can hold it again
    held = c.submit("--hold", "--begin=now+1hour", "-o", "/dev/null", "--wrap", "true", user=BOB, cwd=_out(c))
    try:
        plain = c.run("scontrol", "release", str(held), user=ALICE)
        assert (plain.returncode, plain.stderr) == (
            1,
            f"Invalid user id for job {held}\nslurm_suspend error: Invalid user id\n",
        )
        _admin_level(c, "alice", "Operator")
        users = c.ok("sacctmgr", "show", "user").splitlines()
        assert users[0] == "      User   Def Acct     Admin "
        assert "     alice        lab  Operator " in users
        assert "      root       root Administ+ " in users  # 22.05 cuts the name at the column's width
        assert c.ok("squeue", "-h", "-j", str(held), "-o", "%u %r", user=ALICE) == "bob JobHeldUser\n"
        c.ok("scontrol", "release", str(held), user=ALICE)
        c.ok("scontrol", "hold", str(held), user=ALICE)
        assert c.ok("squeue", "-h", "-j", str(held), "-o", "%r") == "JobHeldAdmin\n"
        drain = c.run("scontrol", "update", "nodename=node2", "state=drain", "reason=x", user=ALICE)
        assert (drain.returncode, drain.stderr) == (1, "slurm_update error: Invalid user id\n")

        _admin_level(c, "alice", "Administrator")
        c.ok("scontrol", "update", "nodename=node2", "state=drain", "reason=by alice", user=ALICE)
        assert c.ok("sinfo", "-h", "-n", "node2", "-o", "%t %E").split("\n")[0] == "drain by alice"
        c.ok("scontrol", "update", "nodename=node2", "state=resume", user=ALICE)

        _admin_level(c, "alice", "None")
        again = c.run("scancel", str(held), user=ALICE)
        assert again.returncode != 0 and "Access/permission denied" in again.stderr
        _admin_level(c, "alice", "Operator")
        c.ok("scancel", str(held), user=ALICE)
        c.wait_state(held, {"CANCELLED"})
    finally:
        _admin_level(c, "alice", "None")
        c.run("scancel", str(held))


def _node(c: Cluster, name: str) -> str:
    return c.ok("scontrol", "show", "node", name)


def test_cancel_reboot_over_rest_takes_back_a_pending_reboot(cluster: Cluster) -> None:
    c = cluster
    job = c.submit("-w", "node1", "-o", "/dev/null", "--wrap", "sleep 300", cwd=_out(c))
    c.wait_state(job, {"RUNNING"})
    try:
        c.ok("scontrol", "reboot", "ASAP", "node1")  # waits for the job: pending, not issued
        assert "Reason=Reboot ASAP" in _node(c, "node1")
        root, alice = _token(c), _token(c, ALICE)
        body = {"state": ["REBOOT_CANCELED"]}
        status, _ = _http(c, "POST", f"{S}/node/node1", alice, body)
        assert status == 403  # a user may not
        status, text = _http(c, "POST", f"{S}/node/node1", root, body)
        assert status == 200, text
        shown = _node(c, "node1")
        assert "Reason=" not in shown and "NextState" not in shown and "State=MIXED" in shown
        status, text = _http(c, "POST", f"{S}/node/node1", root, {"state": ["CANCEL_REBOOT"]})
        assert status != 200 and "Invalid node state specified" in text  # nothing left to cancel
    finally:
        c.ok("scancel", str(job))
