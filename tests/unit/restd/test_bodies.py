"""POST bodies of v0.0.44 into shoal's messages: what is taken, and what is refused with which error."""

from __future__ import annotations

import pytest

from restd.bodies import job_spec, node_update, signal_number
from restd.errors import RestError
from restd.main import split_listen

SCRIPT = "#!/bin/sh\ntrue\n"


def test_a_job_description_becomes_the_spec_sbatch_would_send() -> None:
    spec, warnings = job_spec(
        {
            "job": {
                "script": SCRIPT,
                "name": "j",
                "partition": "debug",
                "current_working_directory": "/work",
                "environment": ["PATH=/bin", "A=b=c"],
                "time_limit": {"set": True, "infinite": False, "number": 30},
                "tasks": 4,
                "nodes": "1-2",
                "memory_per_node": {"set": True, "number": 2000},
                "tres_per_node": "gres/gpu:h100=2",
                "qos": "High",
                "frobnicate": True,
            }
        },
        "/home/u",
        "login",
    )
    assert (spec.name, spec.partition, spec.work_dir, spec.time_limit_min, spec.num_tasks) == (
        "j",
        "debug",
        "/work",
        30,
        4,
    )
    assert (spec.min_nodes, spec.max_nodes, spec.mem_per_node_mb, spec.gpus_per_node, spec.qos) == (
        1,
        2,
        2000,
        "h100:2",
        "high",
    )
    assert dict(spec.environment) == {"PATH": "/bin", "A": "b=c"} and spec.script == SCRIPT.encode()
    assert warnings == ["Ignoring unknown field job/frobnicate"]


def test_defaults_are_sbatchs_and_the_home_directory() -> None:
    spec, _ = job_spec({"job": {"script": SCRIPT, "time_limit": {"infinite": True}}}, "/home/u", "login")
    assert (spec.work_dir, spec.time_limit_min, spec.requeue, spec.batch) == ("/home/u", -2, -1, True)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ([], "expected an object"),
        ({"script": SCRIPT}, 'missing "job"'),
        ({"job": {"script": "echo hi"}}, "does not start with #!"),
        ({"job": {"script": SCRIPT, "tasks": "many"}}, "tasks: expected a non-negative integer"),
        ({"job": {"script": SCRIPT, "environment": ["NOEQUALS"]}}, "is not NAME=value"),
        ({"job": {"script": SCRIPT, "current_working_directory": "relative"}}, "absolute path"),
        ({"job": {"script": SCRIPT, "nodes": "lots"}}, "node count"),
        ({"job": {"script": SCRIPT, "tres_per_job": "license/x=1"}}, "gres/gpu"),
        ({"job": {"script": SCRIPT, "name": 7}}, "name: expected a string"),
    ],
    ids=[
        "not-object",
        "no-job",
        "no-shebang",
        "tasks-text",
        "env-item",
        "cwd-relative",
        "nodes",
        "tres",
        "name-type",
    ],
)
def test_a_bad_job_description_is_a_400_naming_the_field(body: object, error: str) -> None:
    with pytest.raises(RestError, match=error) as refused:
        job_spec(body, "/home/u", "login")
    assert refused.value.status == 400 and refused.value.number == 9002


def test_node_updates_and_signals() -> None:
    fields = node_update({"state": ["DRAIN"], "reason": "fan"})
    assert [(f.key, f.value) for f in fields] == [("State", "DRAIN"), ("Reason", "fan")]
    for word in ("REBOOT_CANCELED", "cancel_reboot"):  # v0.0.44's enum name, and scontrol's
        assert [(f.key, f.value) for f in node_update({"state": [word]})] == [("State", "CANCEL_REBOOT")]
    for body in (
        {"state": ["DRAIN"]},
        {"state": ["SLEEPY"]},
        {},
        {"state": ["IDLE", "DRAIN"], "reason": "x"},
    ):
        with pytest.raises(RestError):
            node_update(body)
    assert (signal_number(""), signal_number("TERM"), signal_number("SIGUSR1"), signal_number("9")) == (
        0,
        15,
        10,
        9,
    )
    with pytest.raises(RestError, match="Unknown signal"):
        signal_number("NOPE")


def test_the_listen_address_is_slurmrestds_host_port() -> None:
    assert split_listen("127.0.0.1:6820") == ("127.0.0.1", 6820)
    assert split_listen(":8080") == ("0.0.0.0", 8080)
    assert split_listen("[::1]:80") == ("::1", 80)
    for bad in ("6820", "host:", "host:99999"):
        with pytest.raises(ValueError):
            split_listen(bad)
