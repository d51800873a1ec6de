"""sdiag against a real cluster: jobs and RPCs move its counters, -r (operators only) zeroes them."""

from __future__ import annotations

import re

import cli.sdiag  # noqa: F401  (imported here: a user's fork cannot read the interpreter's stdlib)
from tests.e2e.conftest import NOBODY, Cluster, wait_until


def _value(out: str, label: str) -> int:
    match = re.search(rf"^\s*{re.escape(label)}\s*(\d+)$", out, re.M)
    assert match, f"no {label!r} line in:\n{out}"
    return int(match.group(1))


def _rpc_count(out: str, name: str) -> int:
    match = re.search(rf"^\t{name}\s+\(\s*\d+\) count:(\d+)", out, re.M)
    return int(match.group(1)) if match else 0


def test_jobs_and_rpcs_move_the_counters_and_reset_zeroes_them(cluster: Cluster) -> None:
    before = cluster.ok("sdiag")
    done = cluster.submit("--wrap", "true")
    long = cluster.submit("--wrap", "sleep 60")
    cluster.wait_state(done, {"COMPLETED"})
    cluster.wait_state(long, {"RUNNING"})
    cluster.ok("scancel", str(long))
    cluster.wait_state(long, {"CANCELLED"})

    def moved() -> bool:
        out = cluster.ok("sdiag")
        return (
            _value(out, "Jobs submitted:") - _value(before, "Jobs submitted:") >= 2
            and _value(out, "Jobs started:") - _value(before, "Jobs started:") >= 2
            and _value(out, "Jobs completed:") - _value(before, "Jobs completed:") >= 1
            and _value(out, "Jobs canceled:") - _value(before, "Jobs canceled:") >= 1
        )

    wait_until("sdiag job counters", moved)
    after = cluster.ok("sdiag")
    assert _value(after, "Total cycles:") > _value(before, "Total cycles:")
    assert _rpc_count(after, "REQUEST_SUBMIT_BATCH_JOB") >= _rpc_count(before, "REQUEST_SUBMIT_BATCH_JOB") + 2
    assert _rpc_count(after, "REQUEST_KILL_JOB") >= 1
    assert re.search(r"^\troot\s+\(\s+0\) count:\d+", after, re.M)

    denied = cluster.run("sdiag", "-r", user=NOBODY)
    assert (denied.returncode, denied.stdout, denied.stderr) == (
        255,
        "",
        "slurm_reset_statistics: Access/permission denied\n",
    )
    assert _value(cluster.ok("sdiag"), "Jobs submitted:") >= 2

    assert cluster.ok("sdiag", "-r") == "Reset scheduling statistics\n"
    reset = cluster.ok("sdiag")
    for label in ("Jobs submitted:", "Jobs started:", "Jobs completed:", "Jobs canceled:", "Jobs failed:"):
        assert _value(reset, label) == 0, label
    assert _rpc_count(reset, "REQUEST_SUBMIT_BATCH_JOB") == 0
    assert _rpc_count(reset, "REQUEST_STATS_INFO") == 1  # the sdiag just before this one


def test_bad_option_is_refused_as_slurm_does(cluster: Cluster) -> None:
    out = cluster.run("sdiag", "-x")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == "sdiag: invalid option -- 'x'\nTry \"sdiag --help\" for more information\n"


def test_cluster_option_names_this_cluster_only(cluster: Cluster) -> None:
    name = next(
        line.split("=", 1)[1]
        for line in cluster.conf.read_text().splitlines()
        if line.startswith("ClusterName=")
    )
    assert cluster.ok("sdiag", "-M", name).startswith("*" * 55 + "\nsdiag output at ")
    out = cluster.run("sdiag", "-M", "foo")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == (
        "sdiag: error: No cluster 'foo' known by database.\n"
        "sdiag: error: 'foo' can't be reached now, or it is an invalid entry for --cluster.  "
        "Use 'sacctmgr list clusters' to see available clusters.\n"
    )
