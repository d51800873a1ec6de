"""--dependency parsing and evaluation, as a user sees it through the Dependency reasons."""

from __future__ import annotations

import pytest

from ctld.sched.dependency import evaluate, parse_dependency, referenced_ids, status_index
from ctld.sched.model import Dependency, DependencySpec, JobStatus, Phase
from tests.unit.sched.builders import job, status

PARSE = [
    ("afterok:12:13", DependencySpec((Dependency("afterok", (12, 13)),))),
    ("after:5,afterany:7", DependencySpec((Dependency("after", (5,)), Dependency("afterany", (7,))))),
    (
        "afterok:12?afternotok:13",
        DependencySpec((Dependency("afterok", (12,)), Dependency("afternotok", (13,))), True),
    ),
    ("singleton", DependencySpec((Dependency("singleton"),))),
    ("afterok:30_2", DependencySpec((Dependency("afterok", (30,)),))),
    ("afterok:30_*", DependencySpec((Dependency("afterok", (30,)),))),
    ("after:12+5", DependencySpec((Dependency("after", (12,)),))),
    ("12", DependencySpec((Dependency("afterany", (12,)),))),
    ("aftercorr:40", DependencySpec((Dependency("aftercorr", (40,)),))),
    ("", DependencySpec()),
]


@pytest.mark.parametrize("text,want", PARSE, ids=[p[0] or "empty" for p in PARSE])
def test_parse(text: str, want: DependencySpec) -> None:
    assert parse_dependency(text) == want


BAD = [
    "afterok",
    "afterok:",
    "afterok:x",
    "before:12",
    "afterok:12,afterany:13?after:14",
    "afterok:0",
    "after:-1",
    "singleton:12",
    "afterok:12:",
]


@pytest.mark.parametrize("text", BAD, ids=BAD)
def test_parse_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="^Invalid dependency specification$"):
        parse_dependency(text)


def test_referenced_ids() -> None:
    assert referenced_ids(parse_dependency("afterok:12:13?afterany:14?singleton")) == {12, 13, 14}


P, A, C, F, X = Phase.PENDING, Phase.ACTIVE, Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED

# (kind, target phase, verdict)
KINDS = [
    ("after", P, "wait"),
    ("after", A, "ok"),
    ("after", C, "ok"),
    ("after", X, "ok"),
    ("afterany", P, "wait"),
    ("afterany", A, "wait"),
    ("afterany", C, "ok"),
    ("afterany", F, "ok"),
    ("afterany", X, "ok"),
    ("afterok", A, "wait"),
    ("afterok", C, "ok"),
    ("afterok", F, "never"),
    ("afterok", X, "never"),
    ("afternotok", A, "wait"),
    ("afternotok", C, "never"),
    ("afternotok", F, "ok"),
    ("afternotok", X, "ok"),
]


@pytest.mark.parametrize("kind,phase,want", KINDS, ids=[f"{k}-{p.value}" for k, p, _ in KINDS])
def test_kinds(kind: str, phase: Phase, want: str) -> None:
    req = job(2).depends(f"{kind}:1").obj()
    assert evaluate(req, status_index([status(1, phase)])) == want


def test_unknown_target_is_satisfied() -> None:
    """Slurm purges finished jobs; a dependency on one it no longer knows does not hold a job."""
    for kind in ("after", "afterany", "afterok"):
        assert evaluate(job(2).depends(f"{kind}:77").obj(), {}) == "ok"


COMBOS = [
    ("all ok", "afterok:1,afterany:2", [status(1, C), status(2, F)], "ok"),
    ("all one waits", "afterok:1,afterany:2", [status(1, C), status(2, A)], "wait"),
    ("all one never", "afterok:1,afterany:2", [status(1, F), status(2, A)], "never"),
    ("any one ok", "afterok:1?afterok:2", [status(1, F), status(2, C)], "ok"),
    ("any waits", "afterok:1?afterok:2", [status(1, F), status(2, A)], "wait"),
    ("any all never", "afterok:1?afterok:2", [status(1, F), status(2, X)], "never"),
    ("several ids in a term", "afterok:1:2", [status(1, C), status(2, A)], "wait"),
]


@pytest.mark.parametrize("text,known,want", [c[1:] for c in COMBOS], ids=[c[0] for c in COMBOS])
def test_any_and_all(text: str, known: list[JobStatus], want: str) -> None:
    assert evaluate(job(9).depends(text).obj(), status_index(known)) == want


def _array(master: int, phases: list[Phase]) -> list[JobStatus]:
    return [status(master + i, ph, array_job_id=master, array_task_id=i) for i, ph in enumerate(phases)]


ARRAYS = [
    ("master waits for all tasks", "afterok:30", [C, C, A], "wait"),
    ("master all done", "afterok:30", [C, C, C], "ok"),
    ("master one failed", "afterok:30", [C, F, A], "never"),
    ("afterany master", "afterany:30", [C, F, X], "ok"),
    ("single task id", "afterok:31", [C, C, A], "ok"),
]


@pytest.mark.parametrize("text,phases,want", [c[1:] for c in ARRAYS], ids=[c[0] for c in ARRAYS])
def test_arrays(text: str, phases: list[Phase], want: str) -> None:
    assert evaluate(job(99).depends(text).obj(), status_index(_array(30, phases))) == want


def test_aftercorr_matches_task_ids() -> None:
    known = status_index(_array(30, [C, F, A]))
    for task, want in ((0, "ok"), (1, "never"), (2, "wait")):
        req = job(50 + task).depends("aftercorr:30").array(50, task).obj()
        assert evaluate(req, known) == want


SINGLETON = [
    ("alone", [], "ok"),
    ("same name running", [status(1, A, name="s")], "wait"),
    ("same name pending earlier", [status(1, P, name="s")], "wait"),
    ("same name pending later", [status(9, P, name="s")], "ok"),
    ("same name finished", [status(1, C, name="s")], "ok"),
    ("other user", [status(1, A, name="s", user_id=7)], "ok"),
    ("other name", [status(1, A, name="t")], "ok"),
]


@pytest.mark.parametrize("known,want", [c[1:] for c in SINGLETON], ids=[c[0] for c in SINGLETON])
def test_singleton(known: list[JobStatus], want: str) -> None:
    req = job(5).name("s").depends("singleton").obj()
    assert evaluate(req, status_index([*known, status(5, P, name="s")])) == want
