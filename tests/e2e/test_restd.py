"""shoal-restd against a real cluster: tokens from `scontrol token`, slurmrestd's v0.0.44 paths, and
every answer checked against the OpenAPI spec's own schema for that path, method and status."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from shoal.auth.token import mint_token
from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

SPEC = Path("/work/shared/reference/slurmrestd/openapi_v0.0.44.json")  # the spec Slurm's own tests check


@cache
def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(SPEC.read_text())
    return spec


def _schema(method: str, template: str, status: int) -> dict[str, Any]:
    """The response schema the spec gives for this path template, method and status (else default)."""
    paths = _spec()["paths"]
    item = paths.get(template) or paths.get(template.rstrip("/") + "/") or paths[template.rstrip("/")]
    responses = item[method.lower()]["responses"]
    response = responses.get(str(status)) or responses["default"]
    return {**response["content"]["application/json"]["schema"], "components": _spec()["components"]}


class Rest:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.url = (cluster.dir / "run" / "restd.url").read_text().strip()

    def token(self, user: int | None = None, *args: str) -> str:
        out = self.cluster.ok("scontrol", "token", *args, user=user)
        assert out.startswith("SLURM_JWT=eyJ"), out
        return out.strip().split("=", 1)[1]

    def call(
        self,
        method: str,
        template: str,
        token: str | None,
        body: object = None,
        raw: bytes | None = None,
        name: str | None = None,
        query: str = "",
        **params: str,
    ) -> tuple[int, dict[str, Any]]:
        """Call PATH (a spec template, filled from params); the answer is validated before it is returned."""
        path = template.format(**params)
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["X-SLURM-USER-TOKEN"] = token
        if name is not None:
            headers["X-SLURM-USER-NAME"] = name
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.url + path + query, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                status, text = resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode()
        assert "Traceback" not in text
        answer = json.loads(text)
        jsonschema.Draft4Validator(_schema(method, template, status)).validate(answer)
        return status, answer


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rest]:
    c = start_cluster(tmp_path_factory.mktemp("restd"), accounting=True, restd=True)
    yield Rest(c)
    stop_cluster(c)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    for p in (tmp_path, *tmp_path.parents):
        if str(p) in ("/", "/tmp"):
            break
        p.chmod(p.stat().st_mode | 0o011)
    tmp_path.chmod(0o1777)
    return tmp_path


S = "/slurm/v0.0.44"
DB = "/slurmdb/v0.0.44"


def test_every_read_endpoint_answers_as_the_spec_says(rest: Rest) -> None:
    token = rest.token()
    status, ping = rest.call("GET", f"{S}/ping/", token)
    assert status == 200 and ping["pings"][0]["responding"] and ping["meta"]["client"]["user"] == "root"
    _, nodes = rest.call("GET", f"{S}/nodes/", token)
    assert [n["name"] for n in nodes["nodes"]] == ["node1", "node2"]
    _, one = rest.call("GET", f"{S}/node/{{node_name}}", token, node_name="node1")
    assert one["nodes"][0]["state"] == ["IDLE"] and one["nodes"][0]["cpus"] == 4
    _, parts = rest.call("GET", f"{S}/partitions/", token)
    assert {p["name"] for p in parts["partitions"]} == {"batch", "debug"}
    _, part = rest.call("GET", f"{S}/partition/{{partition_name}}", token, partition_name="debug")
    assert part["partitions"][0]["maximums"]["time"]["number"] == 60
    rest.cluster.ok(
        "scontrol",
        "create",
        "reservation",
        "ReservationName=maint1",
        "StartTime=now+1hour",
        "Duration=30",
        "Nodes=node1",
        "Users=root",
    )
    _, resvs = rest.call("GET", f"{S}/reservations/", token)
    assert [(r["name"], r["node_list"]) for r in resvs["reservations"]] == [("maint1", "node1")]
    _, resv = rest.call("GET", f"{S}/reservation/{{reservation_name}}", token, reservation_name="maint1")
    assert resv["reservations"][0]["users"] == "root"
    _, diag = rest.call("GET", f"{S}/diag/", token)
    stats = diag["statistics"]
    assert "jobs_running" in stats and stats["schedule_cycle_total"] >= 1  # sdiag's counters (GetDiag)
    assert "REQUEST_NODE_INFO" in {r["message_type"] for r in stats["rpcs_by_message_type"]}
    assert "root" in {u["user"] for u in stats["rpcs_by_user"]}
    _, shares = rest.call("GET", f"{S}/shares", token)
    assert "root" in {s["name"] for s in shares["shares"]["shares"]}
    _, accounts = rest.call("GET", f"{DB}/accounts/", token)
    assert "root" in {a["name"] for a in accounts["accounts"]}
    _, assocs = rest.call("GET", f"{DB}/associations/", token)
    assert ("root", "root") in {(a["account"], a["user"]) for a in assocs["associations"]}
    _, qos = rest.call("GET", f"{DB}/qos/", token)
    assert "normal" in {q["name"] for q in qos["qos"]}
    _, users = rest.call("GET", f"{DB}/users/", token)
    root = next(u for u in users["users"] if u["name"] == "root")
    assert root["default"]["account"] == "root"
    status, _ = rest.call("GET", f"{S}/node/{{node_name}}", token, node_name="nosuchnode")
    assert status == 404


def test_a_user_submits_lists_and_cancels_a_job_and_cannot_cancel_anothers(rest: Rest, workdir: Path) -> None:
    token = rest.token(NOBODY)
    job = {
        "script": "#!/bin/sh\nsleep 300\n",
        "name": "rest-job",
        "current_working_directory": str(workdir),
        "environment": ["PATH=/usr/bin:/bin"],
        "time_limit": {"set": True, "number": 5},
        "tasks": 1,
    }
    status, answer = rest.call("POST", f"{S}/job/submit", token, {"job": job})
    assert status == 200, answer["errors"]
    job_id = answer["job_id"]
    rest.cluster.wait_state(job_id, {"RUNNING"})
    assert rest.cluster.job_field(job_id, "%j %u %l") == "rest-job nobody 5:00"  # squeue agrees

    _, listed = rest.call("GET", f"{S}/jobs/", token)
    mine = next(j for j in listed["jobs"] if j["job_id"] == job_id)
    assert (mine["user_name"], mine["job_state"], mine["time_limit"]["number"]) == ("nobody", ["RUNNING"], 5)
    _, later = rest.call(
        "GET", f"{S}/jobs/", token, query=f"?update_time={listed['last_update']['number'] + 5}"
    )
    assert job_id not in [j["job_id"] for j in later["jobs"]]
    _, got = rest.call("GET", f"{S}/job/{{job_id}}", token, job_id=str(job_id))
    assert got["jobs"][0]["nodes"] in ("node1", "node2")

    theirs = rest.cluster.submit("--wrap", "sleep 300", "-t", "5")  # root's
    status, refused = rest.call("DELETE", f"{S}/job/{{job_id}}", token, job_id=str(theirs))
    assert status == 403 and refused["errors"][0]["error"] == "Access/permission denied"
    assert refused["errors"][0]["error_number"] == 2002
    assert rest.cluster.state(theirs) in ("RUNNING", "PENDING")

    status, _ = rest.call("DELETE", f"{S}/job/{{job_id}}", token, job_id=str(job_id))
    assert status == 200
    rest.cluster.wait_state(job_id, {"CANCELLED"})
    rest.cluster.ok("scancel", str(theirs))

    wait_until(
        "the job in accounting",
        lambda: rest.call("GET", f"{DB}/job/{{job_id}}", token, job_id=str(job_id))[0] == 200,
    )
    _, record = rest.call("GET", f"{DB}/job/{{job_id}}", token, job_id=str(job_id))
    wait_until(
        "the cancel in accounting",
        lambda: (
            rest.call("GET", f"{DB}/job/{{job_id}}", token, job_id=str(job_id))[1]["jobs"][0]["state"][
                "current"
            ]
            == ["CANCELLED"]
        ),
    )
    assert (record["jobs"][0]["name"], record["jobs"][0]["user"]) == ("rest-job", "nobody")
    _, history = rest.call("GET", f"{DB}/jobs/", token)
    assert job_id in [j["job_id"] for j in history["jobs"]]
    status, _ = rest.call("GET", f"{S}/job/{{job_id}}", token, job_id="999999")
    assert status == 404


def test_an_operator_drains_and_resumes_a_node_and_a_user_is_refused(rest: Rest) -> None:
    status, refused = rest.call(
        "POST",
        f"{S}/node/{{node_name}}",
        rest.token(NOBODY),
        {"state": ["DRAIN"], "reason": "mine now"},
        node_name="node2",
    )
    assert status == 403 and refused["errors"][0]["error"] == "Invalid user id"  # slurmctld 22.05's words
    assert "drain" not in rest.cluster.ok("sinfo", "-h", "-p", "batch", "-n", "node2", "-o", "%t")

    admin = rest.token()
    status, _ = rest.call(
        "POST",
        f"{S}/node/{{node_name}}",
        admin,
        {"state": ["DRAIN"], "reason": "rest maint"},
        node_name="node2",
    )
    assert status == 200
    assert rest.cluster.ok("sinfo", "-h", "-p", "batch", "-n", "node2", "-o", "%t %E").split(None, 1) == [
        "drain",
        "rest maint\n",
    ]
    _, shown = rest.call("GET", f"{S}/node/{{node_name}}", admin, node_name="node2")
    assert "DRAIN" in shown["nodes"][0]["state"] and shown["nodes"][0]["reason"] == "rest maint"
    status, _ = rest.call("POST", f"{S}/node/{{node_name}}", admin, {"state": ["RESUME"]}, node_name="node2")
    assert status == 200
    assert rest.cluster.ok("sinfo", "-h", "-p", "batch", "-n", "node2", "-o", "%t").strip() == "idle"
    status, missing = rest.call(
        "POST", f"{S}/node/{{node_name}}", admin, {"state": ["DRAIN"]}, node_name="node2"
    )
    assert status == 400 and "reason" in missing["errors"][0]["error"]


def _jwt_key(rest: Rest) -> bytes:
    return (rest.cluster.dir / "jwt_hs256.key").read_bytes()


def test_bad_tokens_are_refused_with_401(rest: Rest) -> None:
    now = time.time()
    expired = mint_token(_jwt_key(rest), "root", 60, now - 3600)
    forged = mint_token(b"not the cluster's key at all!!!!", "root", 600, now)
    for token, name in (
        (None, None),
        ("garbage", None),
        (expired, None),
        (forged, None),
        (rest.token(NOBODY), "root"),
    ):
        status, answer = rest.call("GET", f"{S}/jobs/", token, name=name)
        assert status == 401, (token, name)
        assert answer["jobs"] == [] and answer["errors"][0]["error_number"] == 1007
    status, answer = rest.call("GET", f"{S}/jobs/", expired)
    assert answer["errors"][0]["description"] == "Token expired"


def test_a_malformed_job_is_refused_with_400_and_slurms_error(rest: Rest) -> None:
    token = rest.token(NOBODY)
    status, answer = rest.call("POST", f"{S}/job/submit", token, raw=b'{"job": {"script": ')
    assert status == 400 and answer["errors"][0]["error_number"] == 9001
    status, answer = rest.call("POST", f"{S}/job/submit", token, {"job": {"script": "echo no shebang"}})
    assert status == 400 and "#!" in answer["errors"][0]["error"]
    status, answer = rest.call(
        "POST",
        f"{S}/job/submit",
        token,
        {"job": {"script": "#!/bin/sh\n", "tasks": "many", "current_working_directory": "/tmp"}},
    )
    assert status == 400 and "tasks" in answer["errors"][0]["error"]


def test_scontrol_token_as_slurm_and_a_short_command(rest: Rest) -> None:
    refused = rest.cluster.run("scontrol", "token", "username=root", user=NOBODY)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "scontrol: error: slurm_fetch_token: error with request: Invalid user id",
        "Error fetching token",
    ]
    bad = rest.cluster.run("scontrol", "token", "life=5")
    assert (bad.returncode, bad.stderr.strip()) == (1, "Invalid option: `life=5`")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.scontrol", "token", "lifespan=60"],
        env=rest.cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("SLURM_JWT=eyJ")
    imported = {
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }
    assert not {m for m in imported if m.split(".")[0] in {"grpc", "jwt", "sqlalchemy", "ctld"}}


def test_shoal_status_shows_the_rest_url(rest: Rest) -> None:
    status = subprocess.run(
        [sys.executable, "-m", "cli.shoal_admin", "status", "--dir", str(rest.cluster.dir)],
        env=rest.cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"REST API: shoal-restd at {rest.url}/slurm/v0.0.44/" in status.stdout
    assert "shoal-restd: running" in status.stdout


def test_scontrol_token_without_jwt_fails_as_22_05_does(tmp_path: Path) -> None:
    c = start_cluster(
        tmp_path / "nojwt", nodes=1, extra=("AuthAltTypes=", "AuthAltParameters="), up_args=("--no-restd",)
    )
    try:
        out = c.run("scontrol", "token")
        assert (out.returncode, out.stdout, out.stderr) == (1, "", "Error fetching token\n")
        assert (
            "REST API: off"
            in subprocess.run(
                [sys.executable, "-m", "cli.shoal_admin", "status", "--dir", str(c.dir)],
                env=c.env,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        )
    finally:
        stop_cluster(c)
