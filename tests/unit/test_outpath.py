"""Output file names: Slurm's %-patterns resolved for the batch step."""

from __future__ import annotations

import pytest

from shoal.outpath import resolve_output_path, resolve_streams, stream_resolver
from tests.unit.noded.noded_builders import job

PLAIN = job(42).name("train").user("alice", 1001, 1001).node("node3").obj()
ARRAY_TASK = job(57).name("sweep").node("node1").set(array_job_id=50, array_task_id=7).spec(array="0-9").obj()


@pytest.mark.parametrize(
    ("pattern", "job_info", "want"),
    [
        ("out-%j.txt", PLAIN, "/tmp/work/out-42.txt"),
        ("%x-%j.out", PLAIN, "/tmp/work/train-42.out"),
        ("%J.log", PLAIN, "/tmp/work/42.log"),
        ("%u/%N/%n.log", PLAIN, "/tmp/work/alice/node3/0.log"),
        ("/abs/%j", PLAIN, "/abs/42"),
        ("%5j.out", PLAIN, "/tmp/work/00042.out"),
        ("100%%-%j", PLAIN, "/tmp/work/100%-42"),
        ("slurm-%A_%a.out", ARRAY_TASK, "/tmp/work/slurm-50_7.out"),
        ("%j.out", ARRAY_TASK, "/tmp/work/57.out"),
        ("%A_%3a.out", ARRAY_TASK, "/tmp/work/50_007.out"),
        ("%A_%a.out", PLAIN, "/tmp/work/42_4294967294.out"),
        ("lit\\%j.out", PLAIN, "/tmp/work/lit%j.out"),
        ("sub/dir/%x", PLAIN, "/tmp/work/sub/dir/train"),
    ],
    ids=[
        "jobid",
        "name",
        "J-is-jobid-for-batch",
        "user-node-index",
        "absolute",
        "zero-pad",
        "literal-percent",
        "array-default",
        "array-j-is-own-id",
        "array-pad",
        "non-array-a-is-noval",
        "backslash-literal",
        "relative-subdir",
    ],
)
def test_resolve_output_path(pattern: str, job_info: object, want: str) -> None:
    assert resolve_output_path(pattern, job_info, "node3") == want  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("job_info", "want"),
    [
        (PLAIN, ("/tmp/work/slurm-42.out", "/tmp/work/slurm-42.out", "/dev/null")),
        (ARRAY_TASK, ("/tmp/work/slurm-50_7.out", "/tmp/work/slurm-50_7.out", "/dev/null")),
        (
            job(3).spec(std_out="o-%j", std_err="e-%j", std_in="in.txt").node("n1").obj(),
            ("/tmp/work/o-3", "/tmp/work/e-3", "/tmp/work/in.txt"),
        ),
    ],
    ids=["defaults", "array-defaults", "all-given"],
)
def test_resolve_streams(job_info: object, want: tuple[str, str, str]) -> None:
    assert resolve_streams(job_info, "n1") == want  # type: ignore[arg-type]


def test_one_resolver_gives_each_array_task_its_own_paths() -> None:
    """ctld reads an array's patterns once (stream_resolver) and fills in each task's ids."""
    spec = {"std_out": "%x-%A_%3a.out", "std_err": "/err/%j-%u", "std_in": "in-%a"}
    tasks = [
        job(100 + k)
        .name("sweep")
        .user("bob", 1002, 1002)
        .set(array_job_id=100, array_task_id=k * 5)
        .spec(**spec)
        .obj()
        for k in range(3)
    ]
    resolve = stream_resolver(tasks[0], "%N")
    assert [resolve(t) for t in tasks] == [resolve_streams(t, "%N") for t in tasks]
    assert resolve(tasks[2]) == ("/tmp/work/sweep-100_010.out", "/err/102-bob", "/tmp/work/in-10")
