"""No user can exhaust the controller or read another's secrets; bad input never tracebacks (issue 14).

Crafted SubmitJob requests go through the generated stubs with a valid credential for `nobody`: the CLI
is not a trust boundary, ctld checks every field itself. Every expected message and exit code was
compared with the real Slurm 22.05 on the reference machine.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.auth.credential import encode, mint
from shoal.auth.key import load_key
from shoal.conf import load_slurm_conf
from shoal.rpc import METADATA_KEY
from shoal.v1 import controller_pb2, controller_pb2_grpc, jobs_pb2
from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster
from tests.unit.ctld.builders import crafted_spec

pytestmark = pytest.mark.e2e

TOO_LONG = "Pathname of a file, directory or other parameter too long"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two 4-CPU nodes with accounting (its SQLite file is checked too)."""
    c = start_cluster(tmp_path_factory.mktemp("hostile"), accounting=True)
    yield c
    stop_cluster(c)


def _submit_as_nobody(
    cluster: Cluster, spec: jobs_pb2.JobSpec
) -> grpc.RpcError | controller_pb2.SubmitJobResponse:
    cfg = load_slurm_conf(str(cluster.conf))
    key = load_key(cfg.auth_key_file)
    options = [("grpc.max_send_message_length", 64 * 2**20)]
    with grpc.insecure_channel(f"{cfg.control_addr}:{cfg.slurmctld_port}", options=options) as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)
        metadata = ((METADATA_KEY, encode(mint(key, NOBODY, NOBODY, host="test"))),)
        try:
            return stub.SubmitJob(controller_pb2.SubmitJobRequest(spec=spec), metadata=metadata, timeout=60)
        except grpc.RpcError as exc:
            return exc


def _spec(**fields: object) -> jobs_pb2.JobSpec:
    return crafted_spec(hold=True, **fields)  # held: what is accepted never runs


CRAFTED = [
    ("min-nodes-2^32-1", {"min_nodes": 2**32 - 1}, "Node count specification invalid"),
    (
        "cpus-overflow",
        {"num_tasks": 2**31 - 1, "cpus_per_task": 10**9},
        "Requested node configuration is not available",
    ),
    (
        "time-limit-minus-5",
        {"time_limit_min": -5},
        "Requested time limit is invalid (missing or exceeds some limit)",
    ),
    (
        "time-limit-2^63-1",
        {"time_limit_min": 2**63 - 1},
        "Requested time limit is invalid (missing or exceeds some limit)",
    ),
    ("begin-minus-1", {"begin_time": -1}, "Invalid time specified"),
    ("signal-secs-70000", {"signal_num": 10, "signal_secs": 70000}, "Invalid --signal specification"),
    ("name-1MB", {"name": "n" * 2**20}, TOO_LONG),
    ("script-20MB", {"script": b"#!/bin/sh\n" + b"#" * (20 * 2**20)}, TOO_LONG),
    ("env-100000", {"environment": {f"VAR_{i}": f"value-{i}" for i in range(100_000)}}, TOO_LONG),
    ("array-1-99999999999", {"array": "1-99999999999"}, "Invalid job array specification"),
    ("nice-minus-1000", {"nice": -1000}, "Invalid --nice value"),
]


@pytest.mark.parametrize(("fields", "message"), [c[1:] for c in CRAFTED], ids=[c[0] for c in CRAFTED])
def test_crafted_submit_job_is_refused_in_slurms_words(
    cluster: Cluster, fields: dict[str, object], message: str
) -> None:
    before = cluster.ok("squeue", "-h", "-t", "all", "-o", "%i").split()
    answer = _submit_as_nobody(cluster, _spec(**fields))
    assert isinstance(answer, grpc.RpcError), f"accepted: job {answer}"
    assert (answer.code(), answer.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert cluster.ok("squeue", "-h", "-t", "all", "-o", "%i").split() == before
    assert cluster.run("scontrol", "ping").returncode == 0


def test_huge_array_is_refused_at_once_by_sbatch_and_ctld(cluster: Cluster) -> None:
    """22.05: `sbatch -a 1-99999999999 --wrap true` -> "Batch job submission failed: Invalid job array
    specification", exit 1 (it used to grow to 23.6 GB)."""
    out = cluster.run("sbatch", "-a", "1-99999999999", "--wrap", "true", user=NOBODY)
    assert (out.returncode, out.stderr) == (
        1,
        "sbatch: error: Batch job submission failed: Invalid job array specification\n",
    )


def test_only_operators_may_set_a_negative_nice(cluster: Cluster, workdir: Path) -> None:
    """22.05 as alice: `sbatch --nice=-5` -> "Batch job submission failed: Invalid --nice value", exit 1;
    as root it is accepted with Nice=-5."""
    out = cluster.run("sbatch", "--nice=-5", "--hold", "--wrap", "true", user=NOBODY, cwd=workdir)
    assert (out.returncode, out.stderr) == (
        1,
        "sbatch: error: Batch job submission failed: Invalid --nice value\n",
    )
    job = cluster.submit("--nice=-5", "--hold", "--wrap", "true")
    assert cluster.job_field(job, "%y") == "-5"
    cluster.ok("scancel", str(job))


@pytest.mark.parametrize(
    ("argv", "status", "stderr"),
    [
        (("--time=１２",), 255, "sbatch: error: Invalid --time specification\n"),
        (("-N", "１"), 255, 'sbatch: error: "１" is not a valid node count\n'),
        (("-c", "２"), 1, 'sbatch: error: Invalid numeric value "２" for --cpus-per-task.\n'),
        (
            ("--switches=" + "1234567890" * 4,),
            1,
            "sbatch: error: Numeric argument (9223372036854775807) to big for --switches.\n",
        ),
    ],
    ids=["fullwidth-time", "fullwidth-nodes", "fullwidth-cpus", "switches-40-digits"],
)
def test_option_values_get_slurms_words_and_status(
    cluster: Cluster, workdir: Path, argv: tuple[str, ...], status: int, stderr: str
) -> None:
    out = cluster.run("sbatch", *argv, "--wrap", "true", user=NOBODY, cwd=workdir)
    assert (out.returncode, out.stderr) == (status, stderr)


def test_more_cpus_than_the_partition_has_pends_as_in_slurm(cluster: Cluster, workdir: Path) -> None:
    """22.05 (16-CPU nodes, EnforcePartLimits=NO): `sbatch -c 1000` is accepted and pends with
    PartitionConfig, while `-c 17` is refused; shoal does the same on its 4-CPU nodes."""
    job = cluster.submit("-c", "1000", "--wrap", "true", user=NOBODY, cwd=workdir)
    assert cluster.job_field(job, "%T %r") == "PENDING PartitionConfig"
    out = cluster.run("sbatch", "-c", "5", "--wrap", "true", user=NOBODY, cwd=workdir)
    assert out.returncode == 1
    assert out.stderr.endswith("Batch job submission failed: Requested node configuration is not available\n")
    cluster.ok("scancel", str(job))


def test_reservation_by_a_user_is_refused_as_in_slurm(cluster: Cluster) -> None:
    """22.05 as alice: `scontrol create reservation ...` -> "Error creating the reservation: Invalid user
    id", exit 1 (not Access/permission denied)."""
    out = cluster.run(
        "scontrol",
        "create",
        "reservation",
        "starttime=now",
        "duration=1",
        "users=nobody",
        "nodes=node1",
        user=NOBODY,
    )
    assert (out.returncode, out.stderr) == (1, "Error creating the reservation: Invalid user id\n")


def test_sacct_with_a_bad_hostlist_lists_nothing(cluster: Cluster) -> None:
    """22.05: `sacct -N 'node['` prints the header and exits 0 (shoal raised HostlistError)."""
    out = cluster.run("sacct", "-N", "node[", user=NOBODY)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert out.stdout.splitlines()[0].split()[:2] == ["JobID", "JobName"]
    assert len(out.stdout.splitlines()) == 2


def test_state_and_accounting_files_are_slurmusers_only(cluster: Cluster, workdir: Path) -> None:
    """Every job's script and environment is in the state store: 0700/0600 after a real `shoal up`, and
    `nobody` cannot read a secret root exported."""
    cluster.ok("sbatch", "--hold", "--export=ALL,SHOAL_SECRET=hunter2", "--wrap", "true")
    state = Path(load_slurm_conf(str(cluster.conf)).state_save_location)
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    files = [p for p in state.iterdir() if p.name.startswith(("ctld_state.db", "slurm_acct_db.sqlite"))]
    assert {p.name for p in files} >= {"ctld_state.db", "slurm_acct_db.sqlite"}
    assert {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in files} == {p.name: 0o600 for p in files}
    pid = os.fork()
    if pid == 0:  # as nobody: the directory is closed to it
        code = 0
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            (state / "ctld_state.db").read_bytes()
            code = 1
        except PermissionError:
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "nobody could read ctld_state.db"


_OPTION_VALUES = st.one_of(
    st.sampled_from(
        [
            "0",
            "-1",
            "1" * 40,
            "99999999999",
            "１２",
            "²",
            "node[",
            "1-99999999999",
            "gpu:99",
            "now+1",
            "9999-12-31",
            "USR1@99999",
            "-5",
            "",
            "%",
            "x" * 2000,
        ]
    ),
    st.text(alphabet="0123456789-:,%[]@+", max_size=12),
)
_OPTIONS = [
    "--array",
    "--nodes",
    "--ntasks",
    "--cpus-per-task",
    "--mem",
    "--time",
    "--begin",
    "--signal",
    "--nice",
    "--switches",
    "--gres",
    "--dependency",
    "--nodelist",
    "--exclude",
    "--job-name",
    "--partition",
]


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(option=st.sampled_from(_OPTIONS), value=_OPTION_VALUES)
def test_live_fuzz_sbatch_never_tracebacks(cluster: Cluster, option: str, value: str) -> None:
    """The real commands against the running cluster: accepted, or refused in Slurm's style."""
    out = cluster.run(
        "sbatch", "--hold", "--parsable", f"{option}={value}", "--wrap", "true", user=NOBODY, cwd="/tmp"
    )
    assert "Traceback" not in out.stderr and "Unexpected error" not in out.stderr
    if out.returncode == 0:
        cluster.ok("scancel", out.stdout.strip().split(";")[0])
    else:
        assert out.returncode in (1, 255) and out.stderr.startswith("sbatch: ")
    assert cluster.run("scontrol", "ping").returncode == 0


def test_sbatch_waits_for_a_controller_that_is_briefly_down(tmp_path: Path) -> None:
    """22.05's commands keep trying an unreachable controller for MessageTimeout (10 s) before "Unable to
    contact slurm controller (connect failure)"; shoal's agent now does the same, so a submission made
    while ctld restarts (or while the agent reconnects, as right after `shoal up`) is accepted."""
    c = start_cluster(tmp_path / "brief", nodes=1)
    try:
        pid = int((c.dir / "run" / "ctld.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text():
            time.sleep(0.05)
        answers: list[subprocess.CompletedProcess[str]] = []
        submit = threading.Thread(
            target=lambda: answers.append(c.run("sbatch", "--parsable", "--wrap", "true"))
        )
        submit.start()
        time.sleep(4)  # the submission waits on a controller that is down (longer than the old 3 s grace)
        with open(c.dir / "log" / "ctld.restart.out", "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "ctld.main", "-f", str(c.conf)],
                env=c.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        submit.join(60)
        (out,) = answers
        assert out.returncode == 0, out.stderr
        job = out.stdout.strip()
        assert c.job_field(job, "%i") == job
    finally:
        stop_cluster(c)
