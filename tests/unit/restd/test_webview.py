"""The web view's data (GPU holders, the queue, sshare's cells), its login rules and its what-if
figures, without daemons: the view model is pure, and login needs only the jwt key."""

from __future__ import annotations

import asyncio
import math
import os
import time
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from ctld.sim.sacct import read_sacct
from restd.app import RestContext
from restd.auth import COOKIE, TOKEN_HEADER, authenticate, cookie_token
from restd.backend import Backend
from restd.errors import RestError
from restd.web import model
from restd.web.routes import add_routes, render_login
from restd.web.svg import Series, cdf_points, line_chart, time_unit, utilization_points
from restd.web.whatif import render, sacct_text
from shoal.auth.errors import AuthError
from shoal.auth.token import mint_token
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2

KEY = b"0123456789abcdef0123456789abcdef"


def _node(name: str, gpus: int) -> cluster_pb2.NodeInfo:
    return cluster_pb2.NodeInfo(
        name=name, state="MIXED", gres=f"gpu:h100:{gpus}" if gpus else "", total_gpus=gpus, cpus=8
    )


def _job(job_id: int, state: int, user: str = "alice", **fields: object) -> jobs_pb2.JobInfo:
    return jobs_pb2.JobInfo(job_id=job_id, state=state, user_name=user, **fields)  # type: ignore[arg-type]


def _alloc(node: str, *gpus: int) -> jobs_pb2.NodeAlloc:
    return jobs_pb2.NodeAlloc(node=node, gpu_indices=list(gpus), gpu_type="h100")


def test_each_gpu_cell_names_the_job_and_user_that_holds_it() -> None:
    nodes = controller_pb2.GetNodesResponse(nodes=[_node("n1", 4), _node("n2", 2), _node("cpu1", 0)])
    jobs = controller_pb2.GetJobsResponse(
        jobs=[
            _job(7, jobs_pb2.RUNNING, allocation=[_alloc("n1", 1, 2), _alloc("n2", 0)]),
            _job(8, jobs_pb2.COMPLETED, "bob", allocation=[_alloc("n1", 0)]),  # ended: holds nothing
            _job(9, jobs_pb2.RUNNING, "bob", array_job_id=5, array_task_id=3, allocation=[_alloc("n1", 3)]),
            _job(10, jobs_pb2.PENDING, "bob"),
        ]
    )
    grid = model.gpu_grid(nodes, jobs)["nodes"]
    held = {(n["name"], g["index"]): (g["job_id"], g["user"], g["type"]) for n in grid for g in n["gpus"]}
    assert held == {
        ("n1", 0): ("", "", "h100"),
        ("n1", 1): ("7", "alice", "h100"),
        ("n1", 2): ("7", "alice", "h100"),
        ("n1", 3): ("5_3", "bob", "h100"),
        ("n2", 0): ("7", "alice", "h100"),
        ("n2", 1): ("", "", "h100"),
    }
    assert [n["name"] for n in grid] == ["n1", "n2", "cpu1"] and grid[2]["gpus"] == []
    assert [g["held"] for g in grid[0]["gpus"]] == [False, True, True, True]


def test_a_gpu_held_by_a_job_private_data_hides_is_held_with_no_job_or_user() -> None:
    node = _node("n1", 4)
    node.gres_used = "gpu:h100:3(IDX:0,2-3)"  # GetNodes counts every job's GPUs; GetJobs left bob's out
    nodes = controller_pb2.GetNodesResponse(nodes=[node])
    jobs = controller_pb2.GetJobsResponse(jobs=[_job(7, jobs_pb2.RUNNING, allocation=[_alloc("n1", 0)])])
    gpus = model.gpu_grid(nodes, jobs)["nodes"][0]["gpus"]
    assert [(g["held"], g["job_id"], g["user"]) for g in gpus] == [
        (True, "7", "alice"),
        (False, "", ""),
        (True, "", ""),
        (True, "", ""),
    ]


def test_the_queue_is_squeues_with_reasons_and_planned_starts() -> None:
    begin = int(time.mktime((2026, 12, 2, 9, 0, 0, 0, 0, -1)))
    jobs = controller_pb2.GetJobsResponse(
        jobs=[
            _job(1, jobs_pb2.COMPLETED),
            _job(2, jobs_pb2.PENDING, state_reason="Resources", start_time=begin - 600, sched_nodes="n2"),
            _job(3, jobs_pb2.PENDING, state_reason="BeginTime", spec=jobs_pb2.JobSpec(begin_time=begin)),
            _job(4, jobs_pb2.RUNNING, nodes="n1", start_time=begin - 3600, time_limit_min=90),
        ]
    )
    rows = {r["job_id"]: r for r in model.queue(jobs)["jobs"]}
    assert list(rows) == ["4", "2", "3"]  # running first; finished jobs are not in the queue
    assert (rows["2"]["reason"], rows["2"]["start"], rows["2"]["planned_nodes"]) == (
        "Resources",
        "2026-12-02T08:50:00",
        "n2",
    )
    assert rows["3"]["start"] == "2026-12-02T09:00:00"  # a --begin time, as squeue --start
    assert (rows["4"]["reason"], rows["4"]["time_limit"], rows["4"]["nodes"]) == ("", "1:30:00", "n1")


def test_shares_are_sshares_cells() -> None:
    resp = controller_pb2.GetSharesResponse(
        rows=[
            controller_pb2.ShareRow(account="root", depth=0, norm_shares=1.0, fairshare=math.nan),
            controller_pb2.ShareRow(
                account="phys",
                user="bob",
                depth=1,
                raw_shares=2,
                norm_shares=0.5,
                raw_usage=12.7,
                fairshare=0.25,
            ),
        ]
    )
    rows = model.shares(resp)["shares"]
    assert rows[0]["raw_shares"] == "" and rows[0]["fairshare"] == ""
    assert (rows[1]["raw_shares"], rows[1]["norm_shares"], rows[1]["raw_usage"], rows[1]["fairshare"]) == (
        "2",
        "0.500000",
        "12",
        "0.250000",
    )


def test_the_history_export_is_what_shoal_sim_reads(tmp_path: Path) -> None:
    t0 = int(time.mktime((2026, 11, 20, 10, 0, 0, 0, 0, -1)))
    rows: list[dict[str, object]] = [
        {"job_id": 11, "submit_time": t0, "start_time": t0 + 60, "end_time": t0 + 660, "alloc_cpus": 4,
         "alloc_nodes": 1, "time_limit_min": 30, "state": "COMPLETED", "partition": "batch"},
        {"job_id": 12, "submit_time": t0 + 5, "start_time": 0, "end_time": 0, "alloc_cpus": 0,
         "alloc_nodes": 0, "time_limit_min": -2, "state": "CANCELLED", "partition": "batch"},
    ]  # fmt: skip
    text, ran = sacct_text(rows)
    assert ran == 1
    (tmp_path / "h.txt").write_text(text)
    trace = read_sacct(tmp_path / "h.txt")
    assert [(j.job_id, j.submit, j.run, j.procs, j.estimate, j.nodes) for j in trace.jobs] == [
        (11, 0, 600, 4, 1800, 1)
    ]
    assert trace.header["Unreplayable"] == "1"


def test_the_what_if_charts_are_svg_with_escaped_labels() -> None:
    svg = line_chart("t <x>", "hours", "jobs", [Series("a&b", [(0, 0.0), (1, 1.0)])], step=True, y_max=1.0)
    assert svg.startswith("<svg") and svg.endswith("</svg>") and svg.count("<polyline") == 1
    assert "a&amp;b" in svg and "t &lt;x&gt;" in svg and "<x>" not in svg
    assert utilization_points([(0, 10, 2), (5, 10, 2)], 4) == [(0.0, 0.5), (5.0, 1.0), (10.0, 0.0)]
    assert cdf_points([30.0, 10.0]) == [(10.0, 0.5), (30.0, 1.0)]
    assert [time_unit(s)[0] for s in (59, 3600, 7 * 3600, 30 * 86400)] == [
        "seconds",
        "minutes",
        "hours",
        "days",
    ]
    figures = render(
        [("conf", {"jobs": 2, "utilization": 0.5, "max_wait": 3}, [(0, 60, 1, 0), (0, 90, 1, 3)])], 2
    )
    assert figures["state"] == "ready" and len(figures["plots"]) == 2
    assert figures["table"][0]["policy"] == "conf" and figures["table"][0]["utilization"] == "0.500"


def test_the_cookie_counts_only_where_a_request_may_bring_it() -> None:
    token = mint_token(KEY, "root", 60, time.time())
    headers = {"Cookie": f"other=1; {COOKIE}={token}"}
    assert cookie_token(headers) == token and cookie_token({"Cookie": "bad;;=="}) == ""
    assert authenticate(headers, KEY, time.time(), cookie=True).name == "root"
    with pytest.raises(RestError):
        authenticate(headers, KEY, time.time())  # a POST or DELETE: the header or nothing
    assert authenticate({TOKEN_HEADER: token}, KEY, time.time()).name == "root"


def _client(tmp_path: Path) -> TestClient:  # type: ignore[type-arg]
    backend = Backend(KEY, "127.0.0.1:9", None, timeout=1)  # never reached: login needs no daemon
    app = web.Application()
    add_routes(app, RestContext(backend=backend, jwt_key=KEY, cluster="c1"), None)
    return TestClient(TestServer(app))


# (key, lifetime s, age s) of the token, minted when the test runs (a token minted at collection
# expires before its test runs in a long suite on a loaded machine); None: not a token at all
_TOKENS: dict[str, tuple[bytes, int, int] | None] = {
    "good": (KEY, 600, 0),
    "expired": (KEY, 60, 3600),
    "forged": (b"another key, not the cluster one", 600, 0),
    "garbage": None,
}


@pytest.mark.parametrize(
    "kind, where",
    [
        ("good", "/web/nodes"),
        ("expired", "/web/login?error=expired"),
        ("forged", "/web/login?error=invalid"),
        ("garbage", "/web/login?error=invalid"),
    ],
    ids=["good", "expired", "forged", "garbage"],
)
def test_the_url_token_becomes_the_cookie_or_the_login_page_says_why(
    tmp_path: Path, kind: str, where: str
) -> None:
    spec = _TOKENS[kind]
    token = "garbage" if spec is None else mint_token(spec[0], "root", spec[1], time.time() - spec[2])

    async def run() -> None:
        async with _client(tmp_path) as client:
            resp = await client.get(f"/web/?token={token}", allow_redirects=False)
            assert (resp.status, resp.headers["Location"]) == (303, where)
            cookie = resp.cookies.get(COOKIE)
            if where == "/web/nodes":
                assert cookie is not None and cookie.value == token and cookie["httponly"]
                assert cookie["samesite"] == "Lax"
                page = await client.get("/web/nodes", headers={"Cookie": f"{COOKIE}={token}"})
                assert page.status == 200 and 'data-user="root"' in await page.text()
            else:
                assert cookie is None or cookie.value == ""
                page = await client.get(where)
                text = await page.text()
                assert page.status == 200 and "scontrol token" in text and token not in text
                data = await client.get("/web/api/nodes", headers={"Cookie": f"{COOKIE}={token}"})
                assert data.status == 401 and set(await data.json()) == {"error", "login"}

    asyncio.run(run())


def test_pages_without_a_cookie_go_to_the_login_form_and_the_form_logs_in(tmp_path: Path) -> None:
    token = mint_token(KEY, "nobody", 600, time.time())

    async def run() -> None:
        async with _client(tmp_path) as client:
            for path in ("/web/nodes", "/web/queue", "/web/shares", "/web/whatif"):
                resp = await client.get(path, allow_redirects=False)
                assert (resp.status, resp.headers["Location"]) == (303, "/web/login")
            resp = await client.post(
                "/web/login", data={"token": f"SLURM_JWT={token}"}, allow_redirects=False
            )
            assert resp.headers["Location"] == "/web/nodes" and resp.cookies[COOKIE].value == token
            forged = await client.post(
                "/web/login", data={"token": token}, headers={"Origin": "http://evil.example"}
            )
            assert forged.status == 403 and COOKIE not in forged.cookies
            out = await client.post("/web/logout", allow_redirects=False)
            assert out.headers["Location"] == "/web/login?error=logout" and out.cookies[COOKIE].value == ""
            missing = await client.get("/web/nosuchpage", headers={"Cookie": f"{COOKIE}={token}"})
            assert missing.status == 404

    asyncio.run(run())


def test_the_login_page_escapes_its_message() -> None:
    assert "&lt;b&gt;" in render_login("<b>", "c<1>") and "<b>" not in render_login("<b>", "c")


def test_the_url_shoal_up_prints_carries_a_token_of_the_caller(tmp_path: Path) -> None:
    import pwd

    from cli.local_restd import JWT_KEY, WEB_TOKEN_LIFESPAN, web_url
    from shoal.auth.token import generate_jwt_key, verify_token

    assert web_url(tmp_path, "http://h:1") == "http://h:1/web/"  # no jwt key: the plain URL
    key = generate_jwt_key(str(tmp_path / JWT_KEY))
    url = web_url(tmp_path, "http://h:1", now=1000.0)
    assert url.startswith("http://h:1/web/?token=")
    token = url.split("=", 1)[1]
    assert verify_token(key, token, 1000 + WEB_TOKEN_LIFESPAN - 1) == pwd.getpwuid(os.getuid()).pw_name
    with pytest.raises(AuthError):
        verify_token(key, token, 1000 + WEB_TOKEN_LIFESPAN + 1)
