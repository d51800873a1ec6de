"""`shoal why`: a short command (no grpc, no scheduler), its arguments, and its JSON view."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cli import why
from shoal.v1 import controller_pb2 as pb
from shoal.why_view import as_json


def test_shoal_why_imports_no_grpc_nor_the_scheduler() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.shoal_admin", "why", "12"],
        capture_output=True,
        text=True,
        env={**os.environ, "SHOAL_AGENT_SOCKET": "/nonexistent/agent.sock", "SLURM_CONF": "/nonexistent"},
        timeout=60,
    )
    modules = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "cli.why" in modules and "shoal.v1.controller_pb2" in modules  # it built the request
    assert not {m for m in modules if m == "grpc" or m.startswith(("grpc.", "sqlalchemy", "ctld", "aiohttp"))}
    assert result.returncode == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "one JOBID is needed"),
        (["1", "2"], "only one JOBID"),
        (["--bogus", "1"], "unrecognized option '--bogus'"),
    ],
    ids=["no id", "two ids", "bad option"],
)
def test_bad_arguments_are_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert why.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "usage: shoal why [--json] JOBID" in err


def test_the_json_view_keeps_the_keys_the_web_view_reads() -> None:
    resp = pb.WhyResponse(
        job_id=7,
        state="PENDING",
        reason="Resources",
        text="Job 7 is PENDING, Reason: Resources.",
        planned_start=1000,
        planned_nodes="n[1-2]",
        ahead=1,
        waits_for=[
            pb.WhyWait(
                kind="resources",
                text="t",
                resource="gpu",
                needed=4,
                free=2,
                nodes="n1",
                holders=[pb.WhyHolder(job_id=3, user="bob", nodes="n1", end_time=900)],
            ),
            pb.WhyWait(
                kind="limit",
                text="l",
                scope="account a",
                limit="GrpTRES=gres/gpu=8",
                in_use=8,
                needed=2,
                job_ids=[3],
            ),
        ],
        suggestions=[pb.WhySuggestion(change="--gres=gpu:2", planned_start=500, nodes="n2")],
    )
    view = as_json(resp)
    assert {k: view[k] for k in ("job_id", "state", "reason", "planned_start", "planned_nodes", "ahead")} == {
        "job_id": 7,
        "state": "PENDING",
        "reason": "Resources",
        "planned_start": 1000,
        "planned_nodes": "n[1-2]",
        "ahead": 1,
    }
    assert view["suggestions"] == [{"change": "--gres=gpu:2", "planned_start": 500, "nodes": "n2"}]
    assert view["waits_for"][0]["held_by"] == [{"job_id": 3, "user": "bob", "nodes": "n1", "end_time": 900}]
    assert view["waits_for"][1] | {} == {
        "kind": "limit",
        "text": "l",
        "scope": "account a",
        "limit": "GrpTRES=gres/gpu=8",
        "in_use": 8,
        "asks": 2,
        "job_ids": [3],
    }
    assert as_json(pb.WhyResponse(job_id=1))["planned_start"] is None
