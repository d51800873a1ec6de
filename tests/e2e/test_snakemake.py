"""Snakemake 9 with its Slurm executor plugin, unchanged, on a 3-rule workflow against a shoal cluster.

The plugin submits each rule with `sbatch --parsable --job-name <run uuid> --comment rule_<name> ...`,
feeds the job script on stdin, and polls `sacct -X --parsable2 --clusters all ... --name <uuid>` (or
`squeue --format=%i|%T --states=all --name <uuid>`) until every job has finished; inside each job its
jobstep executor runs the rule through `srun -n1 --cpu-bind=q`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._tools import put_commands_on_path
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e

pytest.importorskip("snakemake", reason="snakemake is not installed (pip install -e '.[tools]')")
pytest.importorskip(
    "snakemake_executor_plugin_slurm",
    reason="snakemake-executor-plugin-slurm is not installed (pip install -e '.[tools]')",
)

SNAKEFILE = """\
rule all:
    input: "total.txt"

rule make:
    output: "n{i}.txt"
    shell: "echo {wildcards.i} > {output}; echo $SLURM_JOB_ID >> {output}"

rule total:
    input: expand("n{i}.txt", i=[1, 2, 3])
    output: "total.txt"
    shell: "awk 'FNR == 1 {{s += $1}} END {{print s}}' {input} > {output}; echo $SLURM_JOB_ID >> {output}"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("snakemake"), nodes=2, accounting=True)
    yield c
    stop_cluster(c)


STATUS_COMMANDS = ("sacct", "squeue")


def test_three_rule_workflow_runs_through_sbatch_with_each_status_command(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One workflow per status command, at once: the plugin mostly sleeps between its status
    queries (it adds 10 s each time nothing has finished), so side by side they cost one."""
    put_commands_on_path(cluster, tmp_path / "bin", monkeypatch)
    runs: dict[str, tuple[Path, subprocess.Popen[str]]] = {}
    for status_command in STATUS_COMMANDS:
        wf = tmp_path / f"wf-{status_command}"
        wf.mkdir()
        (wf / "Snakefile").write_text(SNAKEFILE)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "snakemake",
                "--executor",
                "slurm",
                "--jobs",
                "3",
                "--default-resources",
                "mem_mb=1000",
                "runtime=5",
                "--slurm-init-seconds-before-status-checks",
                "1",
                "--slurm-status-command",
                status_command,
            ],
            cwd=wf,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        runs[status_command] = (wf, proc)
    run_names: set[str] = set()
    for status_command, (wf, proc) in runs.items():
        try:
            stdout, stderr = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        assert proc.returncode == 0, f"{status_command}: {stdout}{stderr}"
        assert "5 of 5 steps (100%) done" in stderr, status_command
        # every rule ran as its own shoal job, and the last one read what the first three wrote
        job_ids = [(wf / f"n{i}.txt").read_text().split()[1] for i in (1, 2, 3)]
        total, total_job = (wf / "total.txt").read_text().split()
        assert total == "6"
        assert len({*job_ids, total_job}) == 4
        rows = cluster.ok(
            "sacct", "-X", "-n", "-P", "-o", "JobID,JobName,State", "-j", ",".join([*job_ids, total_job])
        )
        names = {line.split("|")[1] for line in rows.splitlines()}
        assert len(names) == 1, (
            status_command,
            rows,
        )  # the plugin's run uuid, which its status query filters on
        run_names |= names
        assert sorted(line.split("|")[2] for line in rows.splitlines()) == ["COMPLETED"] * 4
        assert "Comment=rule_total" in cluster.ok("scontrol", "show", "job", total_job)
    assert len(run_names) == 2  # each run its own uuid
