"""Prolog, Epilog, TaskProlog and TaskEpilog: real scripts run by real noded on emulated nodes.

One cluster for most of the module (default PrologFlags), and one more, `alloc`, with
PrologFlags=Contain (Alloc implied) and accounting, for the Prolog at allocation. Prolog is a glob over a prolog.d directory (run in sorted order), and what
a script does depends on the job's name, so each test picks its behaviour with `-J`. A failed Prolog
drains its node ("Prolog error") and requeues the job held; a failed Epilog drains its node; a hanging
Prolog is killed at PrologEpilogTimeout. Tests put the nodes they drained back (scontrol resume).
"""

from __future__ import annotations

import glob
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

HANG_SECONDS = "4721"  # a sleep no other test runs (grep tests/ for it): how the test finds a leftover

PROLOG_MARK = """#!/bin/sh
/usr/bin/env > {marks}/prolog-$SLURM_JOB_ID-$SLURMD_NODENAME
/bin/hostname > {marks}/prolog-host-$SLURM_JOB_ID-$SLURMD_NODENAME
echo ran >> {marks}/prolog-count-$SLURM_JOB_ID-$SLURMD_NODENAME
"""
PROLOG_CONTROL = """#!/bin/sh
echo first > {marks}/order-$SLURM_JOB_ID-$SLURMD_NODENAME.tmp
case "$SLURM_JOB_NAME-$SLURMD_NODENAME" in
  failprolog-*|failstep-node2) echo "no scratch space" >&2; exit 3 ;;
  hangprolog-*) exec /bin/sleep {hang} ;;
  slowprolog-*) /bin/sleep 3 ;;
esac
"""
PROLOG_LAST = """#!/bin/sh
/bin/mv {marks}/order-$SLURM_JOB_ID-$SLURMD_NODENAME.tmp {marks}/order-$SLURM_JOB_ID-$SLURMD_NODENAME
"""
EPILOG = """#!/bin/sh
/usr/bin/env > {marks}/epilog-$SLURM_JOB_ID-$SLURMD_NODENAME
[ "$SLURM_JOB_NAME" != failepilog ]
"""
TASK_PROLOG = """#!/bin/sh
echo "export FROM_TASK_PROLOG=yes"
echo "unset UNSET_ME"
echo "print hello from the task prolog"
"""
TASK_EPILOG = """#!/bin/sh
echo "$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID $(id -u)" > {marks}/task-epilog-$SLURM_JOB_ID-$SLURMD_NODENAME
"""
CTLD_PROLOG = """#!/bin/sh
/usr/bin/env > {marks}/ctld-prolog-$SLURM_JOB_ID
/usr/bin/id -u >> {marks}/ctld-prolog-$SLURM_JOB_ID
[ "$SLURM_JOB_NAME" != failctld ]
"""
CTLD_EPILOG = """#!/bin/sh
/usr/bin/env > {marks}/ctld-epilog-$SLURM_JOB_ID
"""
JOB = """#!/bin/sh
echo "from=$FROM_TASK_PROLOG unset=${UNSET_ME:-gone}"
"""


def _script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def _hooks_base(tmp_path_factory: pytest.TempPathFactory, name: str) -> tuple[Path, Path]:
    """A directory for a module's scripts, and its `marks` where they (and jobs) write: every user may
    reach both (nobody's jobs, root's scripts)."""
    base = tmp_path_factory.mktemp(name)
    marks = base / "marks"
    marks.mkdir()
    marks.chmod(0o1777)
    for p in (base, *base.parents):
        if str(p) in ("/", "/tmp"):
            break
        p.chmod(p.stat().st_mode | 0o011)
    return base, marks


@pytest.fixture(scope="module")
def hooks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base, marks = _hooks_base(tmp_path_factory, "hooks")
    (base / "prolog.d").mkdir()
    fmt = {"marks": marks, "hang": HANG_SECONDS}
    _script(base / "prolog.d" / "10-mark.sh", PROLOG_MARK.format(**fmt))
    _script(base / "prolog.d" / "20-control.sh", PROLOG_CONTROL.format(**fmt))
    _script(base / "prolog.d" / "30-last.sh", PROLOG_LAST.format(**fmt))
    _script(base / "epilog.sh", EPILOG.format(**fmt))
    _script(base / "task_prolog.sh", TASK_PROLOG)
    _script(base / "task_epilog.sh", TASK_EPILOG.format(**fmt))
    _script(base / "ctld_prolog.sh", CTLD_PROLOG.format(**fmt))
    _script(base / "ctld_epilog.sh", CTLD_EPILOG.format(**fmt))
    return base


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, hooks_dir: Path) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("prolog"),
        nodes=2,
        extra=(
            f"Prolog={hooks_dir}/prolog.d/*",
            f"Epilog={hooks_dir}/epilog.sh",
            "PrologEpilogTimeout=5",
            f"TaskProlog={hooks_dir}/task_prolog.sh",
            f"TaskEpilog={hooks_dir}/task_epilog.sh",
            f"PrologSlurmctld={hooks_dir}/ctld_prolog.sh",
            f"EpilogSlurmctld={hooks_dir}/ctld_epilog.sh",
            "ClusterName=hooktest",
        ),
    )
    yield c
    stop_cluster(c)


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _node(cluster: Cluster, name: str) -> str:
    return cluster.ok("scontrol", "show", "node", name)


def _resume(cluster: Cluster, name: str) -> None:
    cluster.ok("scontrol", "update", f"nodename={name}", "state=resume")


def _submit(cluster: Cluster, workdir: Path, name: str, node: str, *extra: str) -> tuple[int, Path]:
    script = workdir / f"{name}.sh"
    _script(script, JOB)
    out = workdir / f"{name}.out"
    job = cluster.submit(
        "-J", name, "-w", node, "-o", str(out), *extra, str(script), user=NOBODY, cwd=workdir
    )
    return job, out


def _hook_processes() -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if f"sleep {HANG_SECONDS}" in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def test_prolog_and_epilog_run_as_root_with_the_jobs_environment(
    cluster: Cluster, workdir: Path, hooks_dir: Path
) -> None:
    job, out = _submit(cluster, workdir, "hello", "node1", "--export=ALL,UNSET_ME=still-here")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    marks = hooks_dir / "marks"
    env = _env_file(marks / f"prolog-{job}-node1")
    assert env["SLURM_JOB_ID"] == str(job)
    assert env["SLURM_JOB_USER"] == "nobody" and env["SLURM_JOB_UID"] == str(NOBODY)
    assert env["SLURM_JOB_NODELIST"] == "node1" and env["SLURMD_NODENAME"] == "node1"
    assert env["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd"
    assert env["SLURM_CLUSTER_NAME"] == "hooktest"
    assert env["SLURM_JOB_PARTITION"] == cluster.job_field(job, "%P")
    assert "UNSET_ME" not in env and "PATH" not in env  # the job's own environment is not the prolog's
    assert (marks / f"order-{job}-node1").read_text() == "first\n"  # every prolog.d script, in sorted order
    assert (marks / f"prolog-host-{job}-node1").read_text().strip() == "node1"  # the node's own hostname
    wait_until("the epilog", lambda: (marks / f"epilog-{job}-node1").exists())
    assert _env_file(marks / f"epilog-{job}-node1")["SLURM_SCRIPT_CONTEXT"] == "epilog_slurmd"
    # TaskProlog's export and unset reached the script, its print went to the script's output
    assert out.read_text().splitlines() == ["hello from the task prolog", "from=yes unset=gone"]
    epilog = (marks / f"task-epilog-{job}-node1").read_text().split()
    assert epilog == ["epilog_task", str(job), str(NOBODY)]  # TaskEpilog ran as the user
    assert "State=IDLE " in _node(cluster, "node1")


def test_a_failing_prolog_drains_the_node_and_requeues_the_job_held(cluster: Cluster, workdir: Path) -> None:
    job, out = _submit(cluster, workdir, "failprolog", "node2")
    try:
        wait_until(
            "the job held", lambda: cluster.job_field(job, "%T %r") == "PENDING launch failed requeued held"
        )
        assert cluster.job_field(job, "%Q") == "0"
        node = _node(cluster, "node2")
        assert "State=IDLE+DRAIN " in node
        assert re.search(r"Reason=Prolog error \[slurm@", node), node
        assert not out.exists()  # the script never ran
        shown = cluster.ok("scontrol", "show", "job", str(job))
        assert "Restarts=1" in shown and "JobState=PENDING Reason=launch_failed_requeued_held " in shown
    finally:
        cluster.run("scancel", str(job))
        _resume(cluster, "node2")


def test_a_hanging_prolog_is_killed_at_the_timeout(cluster: Cluster, workdir: Path) -> None:
    job, out = _submit(cluster, workdir, "hangprolog", "node2")
    try:
        wait_until(
            "the job held",
            lambda: cluster.job_field(job, "%T %r") == "PENDING launch failed requeued held",
            timeout=60,
        )
        assert "Reason=Prolog error" in _node(cluster, "node2")
        assert _hook_processes() == []  # the prolog's whole process group was killed
        assert not out.exists()
        assert "killed after 5 s" in cluster.log("noded") + cluster.log("ctld")
    finally:
        cluster.run("scancel", str(job))
        _resume(cluster, "node2")


def test_a_failing_epilog_drains_the_node(cluster: Cluster, workdir: Path) -> None:
    job, out = _submit(cluster, workdir, "failepilog", "node2")
    try:
        assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"  # the job's own result stands
        wait_until("node2 drained", lambda: "Reason=Epilog error" in _node(cluster, "node2"))
        assert "DRAIN" in _node(cluster, "node2")
        assert out.read_text().endswith("from=yes unset=gone\n")
    finally:
        _resume(cluster, "node2")


TWO_NODES = """#!/bin/sh
srun -N2 -l /bin/sh -c 'echo "$SLURMD_NODENAME from=$FROM_TASK_PROLOG"' | sort
srun -N2 /bin/true
"""


def test_the_other_nodes_run_the_prolog_at_their_first_step_and_the_epilog_at_the_end(
    cluster: Cluster, workdir: Path, hooks_dir: Path
) -> None:
    script = workdir / "two.sh"
    _script(script, TWO_NODES)
    out = workdir / "two.out"
    job = cluster.submit(
        "-J", "two", "-N2", "-o", str(out), str(script), cwd=workdir
    )  # root: srun is in its venv
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    marks = hooks_dir / "marks"
    for node in ("node1", "node2"):  # once on each node, though two steps ran there
        assert (marks / f"prolog-count-{job}-{node}").read_text() == "ran\n", node
        assert _env_file(marks / f"prolog-{job}-{node}")["SLURMD_NODENAME"] == node
        wait_until(f"the epilog on {node}", lambda n=node: (marks / f"epilog-{job}-{n}").exists())  # type: ignore[misc]
        assert (marks / f"task-epilog-{job}-{node}").read_text().split()[0] == "epilog_task"
    lines = out.read_text().splitlines()
    assert "0: node1 from=yes" in lines and "1: node2 from=yes" in lines  # TaskProlog reached srun's tasks
    assert lines.count("hello from the task prolog") >= 1
    assert not list(Path(cluster.dir / "spool").glob("*/prolog*.json"))  # nothing left of the job's hooks


def test_a_failing_prolog_at_a_step_drains_that_node_and_fails_the_step(
    cluster: Cluster, workdir: Path
) -> None:
    script = workdir / "stepfail.sh"
    _script(script, "#!/bin/sh\nsrun -N2 /bin/true\necho srun=$?\n")
    out = workdir / "stepfail.out"
    job = cluster.submit("-J", "failstep", "-N2", "-w", "node[1-2]", "-o", str(out), str(script), cwd=workdir)
    try:
        assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
        assert cluster.job_field(job, "%B") == "node1"
        text = out.read_text()
        assert "srun=1" in text and "Job prolog failed" in text, text
        node = _node(cluster, "node2")
        assert "DRAIN" in node and "Reason=Prolog error" in node
        assert "DRAIN" not in _node(cluster, "node1")
    finally:
        _resume(cluster, "node2")


def test_prolog_slurmctld_runs_before_the_launch_and_epilog_slurmctld_at_the_end(
    cluster: Cluster, workdir: Path, hooks_dir: Path
) -> None:
    job, out = _submit(cluster, workdir, "ctldhooks", "node1")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    marks = hooks_dir / "marks"
    prolog = (marks / f"ctld-prolog-{job}").read_text()
    env = _env_file(marks / f"ctld-prolog-{job}")
    assert env["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmctld" and env["SLURM_JOB_NODELIST"] == "node1"
    assert prolog.splitlines()[-1] == str(Path(cluster.dir).stat().st_uid)  # SlurmUser (the cluster's owner)
    wait_until("EpilogSlurmctld", lambda: (marks / f"ctld-epilog-{job}").exists())
    env = _env_file(marks / f"ctld-epilog-{job}")
    assert (env["SLURM_SCRIPT_CONTEXT"], env["SLURM_JOB_EXIT_CODE2"]) == ("epilog_slurmctld", "0:0")


def test_a_failing_prolog_slurmctld_requeues_the_job(cluster: Cluster, workdir: Path) -> None:
    job, out = _submit(cluster, workdir, "failctld", "node1")
    try:
        wait_until("a requeue", lambda: "Restarts=0" not in cluster.ok("scontrol", "show", "job", str(job)))
        assert cluster.state(job) in ("PENDING", "RUNNING")
        assert not out.exists()  # never launched
        assert "PrologSlurmctld" in cluster.log("ctld")
    finally:
        cluster.run("scancel", str(job))
    assert "DRAIN" not in _node(cluster, "node1")  # the node is not to blame


def test_a_job_cancelled_during_its_prolog_never_starts_and_its_epilog_runs(
    cluster: Cluster, workdir: Path, hooks_dir: Path
) -> None:
    job, out = _submit(cluster, workdir, "slowprolog", "node1")
    marks = hooks_dir / "marks"
    wait_until("the prolog", lambda: (marks / f"prolog-{job}-node1").exists())
    cluster.ok("scancel", str(job))
    assert cluster.wait_state(job, {"CANCELLED", "COMPLETED", "FAILED"}) == "CANCELLED"
    wait_until("the epilog", lambda: (marks / f"epilog-{job}-node1").exists())
    assert not out.exists()  # the script never ran, nor did anything around it
    assert not (marks / f"task-epilog-{job}-node1").exists()
    assert "DRAIN" not in _node(cluster, "node1")


ONE_STEP = """#!/bin/sh
srun -N1 -w node1 /bin/true
"""


def test_by_default_the_prolog_runs_only_on_the_nodes_where_the_job_runs_something(
    cluster: Cluster, workdir: Path, hooks_dir: Path
) -> None:
    script = workdir / "onestep.sh"
    _script(script, ONE_STEP)
    job = cluster.submit(
        "-J", "onestep", "-N2", "-w", "node[1-2]", "-o", str(workdir / "o"), str(script), cwd=workdir
    )
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    marks = hooks_dir / "marks"
    wait_until("the epilog on node1", lambda: (marks / f"epilog-{job}-node1").exists())
    assert (marks / f"prolog-count-{job}-node1").read_text() == "ran\n"  # the batch step's node
    assert not (marks / f"prolog-count-{job}-node2").exists()  # no step ran there: no Prolog, no Epilog
    assert not (marks / f"epilog-{job}-node2").exists()


# ---------------------------------------------------------------- PrologFlags=Contain (implies Alloc)

ALLOC_PROLOG = """#!/bin/sh
echo ran >> {marks}/prolog-count-$SLURM_JOB_ID-$SLURMD_NODENAME
case "$SLURM_JOB_NAME-$SLURMD_NODENAME" in
  failalloc-node2) exit 3 ;;
  slowalloc-*) /bin/sleep 2 ;;
esac
/bin/date +%s.%N > {marks}/prolog-end-$SLURM_JOB_ID-$SLURMD_NODENAME
"""
ALLOC_EPILOG = """#!/bin/sh
echo ran > {marks}/epilog-$SLURM_JOB_ID-$SLURMD_NODENAME
"""
ALLOC_JOB = """#!/bin/sh
/bin/date +%s.%N > {marks}/script-start-$SLURM_JOB_ID
srun -N1 -w node1 /bin/true
"""


@pytest.fixture(scope="module")
def alloc_hooks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base, marks = _hooks_base(tmp_path_factory, "alloc-hooks")
    _script(base / "prolog.sh", ALLOC_PROLOG.format(marks=marks))
    _script(base / "epilog.sh", ALLOC_EPILOG.format(marks=marks))
    _script(base / "job.sh", ALLOC_JOB.format(marks=marks))
    return base


@pytest.fixture(scope="module")
def alloc(tmp_path_factory: pytest.TempPathFactory, alloc_hooks: Path) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("prolog-alloc"),
        nodes=2,
        accounting=True,
        extra=(
            f"Prolog={alloc_hooks}/prolog.sh",
            f"Epilog={alloc_hooks}/epilog.sh",
            "PrologFlags=Contain",
            "PrologEpilogTimeout=20",
        ),
    )
    yield c
    stop_cluster(c)


def _extern_cgroups(c: Cluster, job: int) -> set[str]:
    """The nodes where job `job` has its step_extern cgroup (in any controller's hierarchy)."""
    scope = f"{zlib.crc32(os.path.abspath(c.conf).encode()):08x}_"
    found = glob.glob(f"/sys/fs/cgroup/*/shoal/{scope}*/job_{job}/step_extern")
    found += glob.glob(f"/sys/fs/cgroup/shoal/{scope}*/job_{job}/step_extern")
    return {Path(p).parent.parent.name.removeprefix(scope) for p in found}


def test_alloc_runs_the_prolog_on_every_node_before_the_script_and_the_epilog_everywhere(
    alloc: Cluster, workdir: Path, alloc_hooks: Path
) -> None:
    assert "PrologFlags             = Alloc,Contain\n" in alloc.ok("scontrol", "show", "config")
    marks = alloc_hooks / "marks"
    job = alloc.submit(
        "-J", "slowalloc", "-N2", "-o", str(workdir / "o"), str(alloc_hooks / "job.sh"), cwd=workdir
    )
    wait_until("Reason=Prolog", lambda: alloc.job_field(job, "%T %r") in ("RUNNING Prolog", "COMPLETED None"))
    assert alloc.job_field(job, "%T %r") == "RUNNING Prolog"  # 22.05: RUNNING with Reason=Prolog
    # Contain: each node makes the extern cgroup when its RunProlog arrives, before the 2 s Prolog
    # (the two nodes' RunProlog calls go out in parallel once the start commits)
    wait_until("both extern cgroups", lambda: _extern_cgroups(alloc, job) == {"node1", "node2"}, timeout=10)
    assert alloc.job_field(job, "%T %r") == "RUNNING Prolog"
    assert alloc.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    started = float((marks / f"script-start-{job}").read_text())
    for node in ("node1", "node2"):  # node2 runs no step: its Prolog ran at allocation all the same
        assert (marks / f"prolog-count-{job}-{node}").read_text() == "ran\n", node
        assert float((marks / f"prolog-end-{job}-{node}").read_text()) <= started, node
        wait_until(f"the epilog on {node}", lambda n=node: (marks / f"epilog-{job}-{n}").exists())  # type: ignore[misc]

    # the extern step, as 22.05's sacct shows it (between .batch and the srun step)
    def steps() -> list[str]:
        out = alloc.ok(
            "sacct", "-j", str(job), "-n", "-P", "-o", "JobID,JobName,State,ExitCode,NodeList,NTasks"
        )
        return out.splitlines()

    # (.batch is RUNNING in accounting until its last record arrives: wait for the whole list)
    expected = [
        f"{job}|slowalloc|COMPLETED|0:0|node[1-2]|",
        f"{job}.batch|batch|COMPLETED|0:0|node1|1",
        f"{job}.extern|extern|COMPLETED|0:0|node[1-2]|2",
        f"{job}.0|true|COMPLETED|0:0|node1|1",
    ]
    wait_until("the steps in accounting", lambda: len(steps()) == 4 and "RUNNING" not in "".join(steps()))
    assert steps() == expected
    assert not list(Path(alloc.dir / "spool").glob("*/prolog*.json"))  # nothing left of the job's hooks
    wait_until("the extern cgroups gone", lambda: not _extern_cgroups(alloc, job))


def test_the_extern_step_is_listed_by_squeue_s_and_scontrol_show_step(alloc: Cluster, workdir: Path) -> None:
    """Under Contain the job's `.extern` step is one of its running steps: the whole allocation, a task
    per node; squeue -s lists it after `.batch` (22.05 orders step ids unsigned: extern above batch).
    The reference cluster has no Contain (scenario 216), so this cluster carries the check."""
    job = alloc.submit(
        "-J", "ext", "-N2", "-o", str(workdir / "o"), "--wrap", "srun -N1 -w node1 sleep 60", cwd=workdir
    )
    try:

        def rows() -> list[str]:
            return alloc.ok("squeue", "-s", "-j", str(job), "-h", "-o", "%i %j %N %u").splitlines()

        wait_until("the job's steps", lambda: len(rows()) == 3)
        user = alloc.ok("squeue", "-h", "-j", str(job), "-o", "%u").strip()
        assert rows() == [
            f"{job}.0 sleep node1 {user}",
            f"{job}.batch batch node1 {user}",
            f"{job}.extern extern node[1-2] {user}",
        ]
        records = alloc.ok("scontrol", "show", "step", str(job)).split("\n\n")  # the job's steps
        assert [r.split()[0] for r in records if r.strip()] == [
            f"StepId={job}.extern",  # extern, batch, then the numbered ones
            f"StepId={job}.batch",
            f"StepId={job}.0",
        ]
        shown = records[0]
        assert "State=RUNNING" in shown and "NodeList=node[1-2]" in shown, shown
        assert "Nodes=2 " in shown and "Tasks=2 Name=extern" in shown, shown
        assert f"StepId={job}.extern" in alloc.ok("scontrol", "show", "step")  # every step, the extern too
        # 22.05 reads the step of `scontrol show step JOB.extern` as a number: a word is step 0
        assert alloc.ok("scontrol", "show", "step", f"{job}.extern").startswith(f"StepId={job}.0 ")
    finally:
        alloc.ok("scancel", str(job))
        alloc.wait_state(job, {"CANCELLED", "COMPLETED", "FAILED"})
    assert alloc.ok("squeue", "-s", "-j", str(job), "-h") == ""  # gone with its job


def test_salloc_waits_for_the_prologs_under_alloc(alloc: Cluster, alloc_hooks: Path) -> None:
    marks = alloc_hooks / "marks"
    out = alloc.run(
        "salloc", "-J", "slowalloc", "-N2", "/bin/sh", "-c", f"cat {marks}/prolog-end-$SLURM_JOB_ID-node2"
    )
    assert out.returncode == 0, out.stderr  # the command found what the Prolog wrote at its end
    job = re.search(r"Granted job allocation (\d+)", out.stderr)
    assert job is not None, out.stderr
    assert out.stderr.splitlines()[:3] == [
        f"salloc: Granted job allocation {job[1]}",
        "salloc: Waiting for resource configuration",
        "salloc: Nodes node[1-2] are ready for job",
    ]


def test_a_failing_prolog_at_allocation_drains_the_node_and_requeues_the_job_held(
    alloc: Cluster, workdir: Path, alloc_hooks: Path
) -> None:
    marks = alloc_hooks / "marks"
    job = alloc.submit(
        "-J", "failalloc", "-N2", "-o", str(workdir / "o"), str(alloc_hooks / "job.sh"), cwd=workdir
    )
    try:
        wait_until(
            "the job held", lambda: alloc.job_field(job, "%T %r") == "PENDING launch failed requeued held"
        )
        node = _node(alloc, "node2")
        assert "DRAIN" in node and re.search(r"Reason=Prolog error \[slurm@", node), node
        assert "DRAIN" not in _node(alloc, "node1")
        assert not (marks / f"script-start-{job}").exists()  # the script never ran
        wait_until("node1's epilog", lambda: (marks / f"epilog-{job}-node1").exists())
    finally:
        alloc.run("scancel", str(job))
        _resume(alloc, "node2")
