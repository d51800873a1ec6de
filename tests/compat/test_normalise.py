"""The normaliser makes two runs of one scenario comparable, and must not make different behaviour match."""

from __future__ import annotations

from pathlib import Path

from tests.compat.scenario import Facts, dump, normalise, parse, submitted_ids

REAL = Facts(jobs=(20, 21, 22), workdir="/tmp/compat-real-work", conf="/etc/slurm/slurm.conf", hostname="vm")
SHOAL = Facts(
    jobs=(1307, 1308, 1309),
    workdir="/tmp/pytest-of-root/p0/compat0/work",
    conf="/tmp/pytest-of-root/p0/compat0/cluster/slurm.conf",
    hostname="vm",
)

SQUEUE_REAL = """\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
                22     batch    fill3      bob PD       0:00      1 (Priority)
                20     batch    fill1    alice  R       0:03      1 node3
                21     batch    fill2    alice  R       0:05      1 node4
                17     batch    other    alice  R       0:09      1 node1
"""


def test_ids_times_hosts_paths_ports_and_pids_are_what_differs_by_nature() -> None:
    shoal = """\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
              1309     batch    fill3      bob PD       0:00      1 (Priority)
              1307     batch    fill1    alice  R       0:01      1 node3
              1308     batch    fill2    alice  R       0:02      1 node4
"""
    assert normalise(SQUEUE_REAL, REAL) == normalise(shoal, SHOAL)
    env_real = (
        "SLURM_JOB_ID=20\nSLURM_SUBMIT_DIR=/tmp/compat-real-work\nSLURM_CONF=/etc/slurm/slurm.conf\n"
        "SLURM_SRUN_COMM_PORT=41891\nSLURM_TASK_PID=29067\nSLURM_LAUNCH_NODE_IPADDR=127.0.0.1\n"
        "SLURM_SUBMIT_HOST=vm\nStartTime=2026-11-29T21:39:58 AllocNode:Sid=localhost:2438\n"
    )
    env_shoal = (
        "SLURM_JOB_ID=1307\nSLURM_SUBMIT_DIR=/tmp/pytest-of-root/p0/compat0/work\n"
        "SLURM_CONF=/tmp/pytest-of-root/p0/compat0/cluster/slurm.conf\nSLURM_SRUN_COMM_PORT=40001\n"
        "SLURM_TASK_PID=777\nSLURM_LAUNCH_NODE_IPADDR=127.110.1.2\nSLURM_SUBMIT_HOST=vm\n"
        "StartTime=2026-12-01T10:00:00 AllocNode:Sid=vm:99\n"
    )
    assert normalise(env_real, REAL) == normalise(env_shoal, SHOAL)


def test_rows_of_jobs_the_scenario_did_not_submit_are_left_out() -> None:
    out = normalise(SQUEUE_REAL, REAL)
    assert "other" not in out and out.count("\n") == 4


def test_layouts_states_and_columns_stay_apart() -> None:
    base = "SLURM_TASKS_PER_NODE=3,1\nSLURM_JOB_ID=20\n"
    assert normalise(base, REAL) != normalise(base.replace("3,1", "2,2"), REAL)  # layout
    assert normalise(SQUEUE_REAL, REAL) != normalise(SQUEUE_REAL.replace(" R ", "PD", 1), REAL)  # state
    assert normalise(SQUEUE_REAL, REAL) != normalise(SQUEUE_REAL.replace("node3", "node1"), REAL)  # placement
    short = "\n".join(line.rsplit(None, 1)[0] for line in SQUEUE_REAL.splitlines()) + "\n"
    assert normalise(SQUEUE_REAL, REAL) != normalise(short, REAL)  # a column fewer
    sacct = "20|fill1|CANCELLED by 1001|0:0\n20.batch|batch|CANCELLED|0:15\n"
    assert normalise(sacct, REAL) != normalise(sacct.replace("by 1001", "by 0"), REAL)
    assert normalise(sacct, REAL) != normalise(sacct.replace("0:15", "0:9"), REAL)  # exit codes are no times
    assert normalise("Reason=Priority\n", REAL) != normalise("Reason=Resources\n", REAL)


def test_job_ids_keep_their_order_and_identity() -> None:
    lines = SQUEUE_REAL.splitlines(True)
    swapped = "".join([lines[0], lines[2], lines[1], *lines[3:]])
    assert normalise(SQUEUE_REAL, REAL) != normalise(swapped, REAL)  # J3 J1 J2 is not J1 J3 J2
    # the same job named in two places must be the same job on the other side too
    real = "JobId=20 Dependency=afterok:21(unfulfilled)\n"
    assert normalise(real, REAL) == normalise("JobId=1307 Dependency=afterok:1308(unfulfilled)\n", SHOAL)
    assert normalise(real, REAL) != normalise("JobId=1307 Dependency=afterok:1307(unfulfilled)\n", SHOAL)
    # numbers that are not job ids are kept, even when equal to one
    assert "NumCPUs=20" in normalise("JobId=20 NumCPUs=20 mem=20G\n", REAL)


def test_steps_of_an_allocation_srun_made_are_numbered_by_appearance() -> None:
    real = "srun: Force Terminated StepId=329.0\nsrun: Force Terminated StepId=330.0\n"
    assert normalise(real, REAL) == normalise(
        "srun: Force Terminated StepId=4.0\nsrun: Force Terminated StepId=7.0\n", SHOAL
    )
    assert normalise(real, REAL) != normalise(
        "srun: Force Terminated StepId=4.0\nsrun: Force Terminated StepId=4.0\n", SHOAL
    )


def test_submitted_ids_come_from_what_commands_print() -> None:
    text = (
        "Submitted batch job 41\n42\n43;realslurm\nsrun: job 44 queued and waiting for resources\n"
        "salloc: Granted job allocation 45\nSLURM_JOB_ID=46\n"
    )
    assert submitted_ids(text) == [41, 42, 43, 44, 45, 46]


def test_scenario_files_read_back_as_written(tmp_path: Path) -> None:
    for path in sorted((Path(__file__).parent / "scenarios").glob("*.txt")):
        sc = parse(path)
        assert sc.command, f"{path.name}: no command"
        copy = tmp_path / path.name
        copy.write_text(dump(sc))
        assert parse(copy) == sc, path.name


def test_the_families_table_in_docs_is_current() -> None:
    """docs/compat.md's table is generated from the scenarios and the allow-list: rerun report --write."""
    from tests.compat.report import current_doc_table, table

    assert current_doc_table() == table(), "run: python -m tests.compat.report --write"


def test_with_the_clusters_own_job_list_only_its_rows_are_left_out() -> None:
    text = "16 16\n17 fill other\n"
    mine = Facts(jobs=(20,), workdir="", conf="", hostname="vm", foreign=frozenset({17}))
    assert normalise(text, mine) == "16 16\n"  # 16 is no job of the cluster: the line stays
