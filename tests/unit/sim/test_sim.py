"""shoal sim: golden start times on a hand-checked trace, the SWF reader, the command's output."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from cli import shoal_sim
from ctld.sim.run import default_machine, evaluate
from ctld.sim.swf import Trace, TraceJob, read_swf

TRACES = Path("/work/shared/traces")
if not TRACES.exists():
    TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"

# A 4-processor machine. Job 2 needs all of it; job 3 is short enough to run before job 2's
# reservation (job 1's limit is 2 minutes: it ends by 120); job 4 is too long to backfill.
SMALL = """; Version: 2.2
; MaxProcs: 4
; MaxNodes: 4
1 0 -1 100 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1
2 0 -1 100 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
3 10 -1 50 2 -1 -1 -1 -1 -1 1 2 1 -1 1 -1 -1 -1
4 20 -1 200 1 -1 -1 1 -1 -1 1 2 1 -1 1 -1 -1 -1
"""

GOLDEN = [
    ("fcfs", {1: 0, 2: 100, 3: 200, 4: 200}),
    ("easy", {1: 0, 2: 100, 3: 10, 4: 200}),
    ("sjf", {1: 0, 3: 10, 2: 100, 4: 200}),
]


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    path = tmp_path / "small.swf"
    path.write_text(SMALL)
    return path


@pytest.mark.parametrize(("policy", "starts"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_start_times(small_trace: Path, policy: str, starts: dict[int, int]) -> None:
    trace = read_swf(small_trace)
    outcome = evaluate(trace, default_machine(trace), policy)
    assert {r.job_id: r.start for r in outcome.results} == starts
    assert outcome.summary.jobs == 4


def test_jobs_larger_than_the_machine_are_skipped_and_counted() -> None:
    jobs = [TraceJob(1, 0, 10, 2, 10), TraceJob(2, 0, 10, 9, 10)]
    trace = Trace("t", jobs, {"MaxProcs": "4"})
    outcome = evaluate(trace, default_machine(trace), "easy")
    assert [r.job_id for r in outcome.results] == [1]
    assert outcome.summary.skipped == 1


SHIPPED = [
    ("lublin_256.swf", 10_000, 256),
    ("lublin_256_new2.swf", 10_000, 256),
    ("NASA-iPSC-1993-3.1-cln.swf.gz", 18_239, 128),
]


@pytest.mark.parametrize(("name", "jobs", "procs"), SHIPPED, ids=[s[0] for s in SHIPPED])
def test_swf_reader_on_shipped_traces(name: str, jobs: int, procs: int) -> None:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    trace = read_swf(path)
    assert len(trace.jobs) == jobs
    assert trace.max_procs == procs
    assert all(j.procs >= 1 and j.run >= 0 for j in trace.jobs)
    # requested time is -1 in these traces: the estimate is the run time
    assert all(j.estimate == j.run for j in trace.jobs)


def test_swf_reader_header_and_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "t.swf.gz"
    with gzip.open(path, "wt") as stream:
        stream.write("; MaxNodes: 8\n; Note: submit times are start times\n")
        stream.write("1 5 -1 -1 -1 -1 -1 3 600 -1 1 4 -1 -1 -1 -1 -1 -1\n")
    trace = read_swf(path)
    assert trace.header["MaxNodes"] == "8"
    assert trace.max_procs == 8
    job = trace.jobs[0]
    assert (job.submit, job.run, job.procs, job.estimate, job.user) == (5, 0, 3, 600, 4)


def test_json_keys(small_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert shoal_sim.main([str(small_trace), "--policy", "easy", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("jobs", "utilization", "mean_wait", "avg_bounded_slowdown", "max_wait", "makespan"):
        assert key in data
    assert data["jobs"] == 4


def test_table_compare_and_csv(small_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_csv = tmp_path / "jobs.csv"
    assert (
        shoal_sim.main([str(small_trace), "--policy", "fcfs", "--compare", "easy", "--csv", str(out_csv)])
        == 0
    )
    table = capsys.readouterr().out
    assert "avg bsld" in table and "fcfs" in table and "easy" in table
    rows = out_csv.read_text().splitlines()
    assert rows[0] == "id,submit,start,end,cpus,nodes,wait,state"
    assert rows[3] == "3,10,200,250,2,2,190,COMPLETED"  # 2 processors = 2 one-CPU nodes


def test_errors_in_slurm_style(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert shoal_sim.main([os.fspath(tmp_path / "missing.swf")]) == 1
    assert capsys.readouterr().err.startswith("shoal sim: error: ")
    assert shoal_sim.main([os.fspath(tmp_path / "x"), "--windows", "ten"]) == 1
    capsys.readouterr()
    assert shoal_sim.main([os.fspath(tmp_path / "x"), "--seed", "x"]) == 1  # an option argparse refuses
    assert "shoal sim: error: argument --seed: invalid int value: 'x'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "policy", "first", "last"),
    [
        ("lublin_256.swf", "easy", 5000, 5600),
        ("lublin_256.swf", "sjf", 3000, 3500),
        ("lublin_256_new2.swf", "easy", 0, 800),
        ("lublin_256.swf", "fcfs", 0, 600),
        ("lublin_256.swf", "sjbf", 3000, 3500),
        ("lublin_256.swf", "shoal", 5000, 5600),
        ("lublin_256_new2.swf", "shoal", 7966, 8400),
        ("lublin_256.swf", "short", 5000, 5600),
    ],
    ids=[
        "l1-easy-overloaded",
        "l1-sjf",
        "l2-easy",
        "l1-fcfs",
        "l1-sjbf",
        "l1-shoal",
        "l2-shoal-starving",
        "l1-short",
    ],
)
def test_shortcuts_change_no_decision(name: str, policy: str, first: int, last: int) -> None:
    """Skipping fruitless cycles and pruning jobs too big to start leave every start time as it was."""
    from ctld.sched.policy import policy_config
    from ctld.sim.engine import Simulation
    from ctld.sim.machine import job_request

    trace = read_swf(TRACES / name)
    machine = default_machine(trace)
    jobs = [j for j in trace.jobs[first:last] if 0 < j.procs <= machine.cpus]
    config = policy_config(policy, machine.config)

    def replay(shortcuts: bool) -> list[tuple[int, int, int]]:
        sim = Simulation(
            machine.nodes,
            machine.partitions,
            config,
            lambda tj: job_request(tj, policy, machine),
            shortcuts=shortcuts,
        )
        return [(r.job_id, r.start, r.cpus) for r in sim.run(jobs)]

    assert replay(True) == replay(False)


def test_plot_writes_utilization_and_wait_pngs(small_trace: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (pip install 'shoal[plot]')")
    out = tmp_path / "plots"
    assert shoal_sim.main([str(small_trace), "--policy", "easy", "--plot", str(out)]) == 0
    for name in ("utilization.png", "wait.png"):
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG"), name


# When job 1 ends at 100, both waiting jobs need the whole machine: sjf runs the shorter job 3
# first; sjbf runs job 2 first, because the oldest waiting job ranks above every other.
AGING = """; MaxProcs: 4
1 0 -1 100 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1
2 0 -1 300 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
3 50 -1 60 4 -1 -1 4 -1 -1 1 2 1 -1 1 -1 -1 -1
"""


@pytest.mark.parametrize(
    ("policy", "starts"),
    [("sjf", {1: 0, 2: 160, 3: 100}), ("sjbf", {1: 0, 2: 100, 3: 400})],
    ids=["sjf", "sjbf"],
)
def test_sjbf_runs_the_oldest_waiting_job_first(tmp_path: Path, policy: str, starts: dict[int, int]) -> None:
    path = tmp_path / "aging.swf"
    path.write_text(AGING)
    trace = read_swf(path)
    outcome = evaluate(trace, default_machine(trace), policy)
    assert {r.job_id: r.start for r in outcome.results} == starts


@pytest.mark.parametrize("policy", ["fcfs", "easy", "sjf"])
def test_pool_decides_as_one_cpu_nodes(policy: str) -> None:
    """The pool node (the sim's default machine) starts every job when MaxProcs one-CPU nodes would."""
    from ctld.sched.model import UNLIMITED, Node, Partition
    from ctld.sim.machine import SIM_PARTITION, Machine
    from ctld.sim.run import SIM_DEFAULTS, replay

    trace = read_swf(TRACES / "lublin_256_new2.swf")
    jobs = trace.jobs[:300]  # sjf once started job 113 at 41309 on the pool, 40677 on nodes
    names = tuple(f"n{i}" for i in range(trace.max_procs))
    nodes = tuple(
        Node(name=n, cpus=1, real_memory_mb=1, partitions=frozenset({SIM_PARTITION})) for n in names
    )
    part = Partition(name=SIM_PARTITION, nodes=names, max_time_min=UNLIMITED)
    one_cpu = Machine(nodes, (part,), SIM_DEFAULTS, SIM_PARTITION)
    pool = default_machine(trace)
    on_pool = [(r.job_id, r.start, r.nodes) for r in replay(jobs, pool, policy)[0]]
    on_nodes = [(r.job_id, r.start, r.nodes) for r in replay(jobs, one_cpu, policy)[0]]
    assert on_pool == on_nodes


# Job 1 asks for 2 minutes but would run 10: it ends at its limit (120), so job 2, which needs the
# whole machine, starts then. Job 3 has no requested time: its run time is its estimate.
OVERRUN = """; MaxProcs: 4
1 0 -1 600 4 -1 -1 4 120 -1 1 1 1 -1 1 -1 -1 -1
2 10 -1 100 4 -1 -1 4 300 -1 1 1 1 -1 1 -1 -1 -1
3 20 -1 500 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
"""


def test_a_job_running_past_its_time_limit_ends_there_as_timeout(tmp_path: Path) -> None:
    path = tmp_path / "overrun.swf"
    path.write_text(OVERRUN)
    out_csv = tmp_path / "jobs.csv"
    assert shoal_sim.main([str(path), "--policy", "fcfs", "--csv", str(out_csv), "--json"]) == 0
    rows = out_csv.read_text().splitlines()
    assert rows[0] == "id,submit,start,end,cpus,nodes,wait,state"
    assert rows[1:] == [
        "1,0,0,120,4,4,0,TIMEOUT",
        "2,10,120,220,4,4,110,COMPLETED",
        "3,20,220,720,4,4,200,COMPLETED",
    ]
    outcome = evaluate(read_swf(path), default_machine(read_swf(path)), "fcfs")
    assert outcome.summary.timeouts == 1
    assert outcome.summary.makespan == 720


def _sacct_export(tmp_path: Path, *, parsable: str = "P") -> Path:
    """An export in shoal's own `sacct -a -X -P -o ...` format (rendered by cli.sacct)."""
    from cli.sacct import Row, parse_format, render
    from shoal.v1 import accounting_pb2 as pb

    t0 = 1_800_000_000
    records = [
        # job 7: 4 CPUs for 100 s, limit 10 min; job 8: the whole machine, waits for job 7
        pb.JobRecord(
            job_id=7,
            partition="gpu",
            alloc_cpus=4,
            alloc_nodes=1,
            submit_time=t0,
            start_time=t0,
            end_time=t0 + 100,
            time_limit_min=10,
            state="COMPLETED",
            cancelled_by=-1,
            array_task_id=-1,
        ),
        pb.JobRecord(
            job_id=8,
            partition="gpu",
            alloc_cpus=8,
            alloc_nodes=2,
            submit_time=t0 + 5,
            start_time=t0 + 100,
            end_time=t0 + 400,
            time_limit_min=-2,
            state="COMPLETED",
            cancelled_by=-1,
            array_task_id=-1,
        ),
        # job 9: 50 s of its 1-minute limit (cancelled jobs that ran replay too)
        pb.JobRecord(
            job_id=9,
            partition="gpu",
            alloc_cpus=2,
            alloc_nodes=1,
            submit_time=t0 + 20,
            start_time=t0 + 400,
            end_time=t0 + 450,
            time_limit_min=1,
            state="CANCELLED",
            cancelled_by=0,
            array_task_id=-1,
        ),
        # job 10 never started, job 11 is still running: neither can be replayed
        pb.JobRecord(
            job_id=10,
            partition="gpu",
            req_cpus=2,
            req_nodes=1,
            submit_time=t0 + 30,
            time_limit_min=5,
            state="PENDING",
            cancelled_by=-1,
            array_task_id=-1,
        ),
        pb.JobRecord(
            job_id=11,
            partition="gpu",
            alloc_cpus=1,
            alloc_nodes=1,
            submit_time=t0 + 40,
            start_time=t0 + 450,
            time_limit_min=5,
            state="RUNNING",
            cancelled_by=-1,
            array_task_id=-1,
        ),
    ]
    fields = parse_format("JobID,Submit,Start,End,AllocCPUS,NNodes,Timelimit,State,Partition")
    lines = render([Row(r) for r in records], fields, parsable=parsable, header=True, now=t0 + 500)
    path = tmp_path / "history.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("parsable", ["P", "p"])
def test_sacct_export_is_read_as_a_trace(tmp_path: Path, parsable: str) -> None:
    from ctld.sim.sacct import looks_like_sacct, read_sacct

    path = _sacct_export(tmp_path, parsable=parsable)
    assert looks_like_sacct(path)
    trace = read_sacct(path)
    got = [(j.job_id, j.submit, j.run, j.procs, j.estimate, j.nodes, j.partition) for j in trace.jobs]
    assert got == [(7, 0, 100, 4, 600, 1, "gpu"), (8, 5, 300, 8, 300, 2, "gpu"), (9, 20, 50, 2, 60, 1, "gpu")]
    assert trace.header["Unreplayable"] == "2"


def test_sim_replays_an_sacct_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sacct_export(tmp_path)
    out_csv = tmp_path / "jobs.csv"
    # detected without --format; on the default machine (8 one-CPU nodes: the largest job)
    assert shoal_sim.main([str(path), "--policy", "easy", "--csv", str(out_csv)]) == 0
    table = capsys.readouterr().out
    assert "3 jobs, 8 processors" in table
    assert "(2 jobs that never ran or never ended are not replayed)" in table
    # job 8 waits for job 7's 4 CPUs (reserved at job 7's limit, 600); job 9 (2 CPUs, 1 minute)
    # fits on the 4 free CPUs and ends before 600: EASY backfills it at its submit time.
    rows = out_csv.read_text().splitlines()[1:]
    assert rows == ["7,0,0,100,4,4,0,COMPLETED", "8,5,100,400,8,8,95,COMPLETED", "9,20,20,70,2,2,0,COMPLETED"]
    assert shoal_sim.main([str(path), "--format", "swf"]) == 1  # not SWF: an error, not a traceback
    assert capsys.readouterr().err.startswith("shoal sim: error: ")


# Every job needs the whole 4-processor machine. When job 1 ends at 100, `short` runs the short
# jobs (up to 10 minutes) first, shortest first (4, then 3), then the long ones in submit order
# (2 before 5, though 5 is shorter); `shoal` counts up to 30 minutes as short, so 5 (20 min) goes
# before 2 too; easy keeps submit order throughout, sjf lets 5 pass 2.
SHORT_FIRST = """; MaxProcs: 4
1 0 -1 100 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
2 10 -1 3600 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
3 20 -1 300 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
4 30 -1 60 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
5 40 -1 1200 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
"""


@pytest.mark.parametrize(
    ("policy", "starts"),
    [
        ("short", {1: 0, 4: 100, 3: 160, 2: 460, 5: 4060}),
        ("shoal", {1: 0, 4: 100, 3: 160, 5: 460, 2: 1660}),
        ("easy", {1: 0, 2: 100, 3: 3700, 4: 4000, 5: 4060}),
        ("sjf", {1: 0, 4: 100, 3: 160, 5: 460, 2: 1660}),
    ],
    ids=["short", "shoal", "easy", "sjf"],
)
def test_shoal_policy_runs_short_jobs_first_and_long_ones_in_order(
    tmp_path: Path, policy: str, starts: dict[int, int]
) -> None:
    path = tmp_path / "short_first.swf"
    path.write_text(SHORT_FIRST)
    trace = read_swf(path)
    outcome = evaluate(trace, default_machine(trace), policy)
    assert {r.job_id: r.start for r in outcome.results} == starts


# A 4-processor machine; job 1 holds 2 processors until 3600. Job 2 (all 4, 2 h) waits; job 3
# (3 processors, 5 min) is short, so it heads the queue under short-jobs-first and holds EASY's one
# reservation (3600); job 4 (1 processor, 10 h) then fits beside it and starts at 200, so job 2
# waits until 36200. With starve_wait=1 (minute) job 2 starves at 70, gets a reservation of its own,
# and job 4 may not start into it; job 3 still goes first (short jobs keep their place), job 2 starts
# when it ends. easy keeps submit order throughout.
STARVING = """; MaxProcs: 4
1 0 -1 3600 2 -1 -1 2 -1 -1 1 1 1 -1 1 -1 -1 -1
2 10 -1 7200 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1
3 100 -1 300 3 -1 -1 3 -1 -1 1 1 1 -1 1 -1 -1 -1
4 200 -1 36000 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1
"""


@pytest.mark.parametrize(
    ("options", "starts"),
    [
        ({"short_first_min": 10}, {1: 0, 4: 200, 3: 3600, 2: 36200}),
        ({"short_first_min": 10, "starve_wait_min": 1}, {1: 0, 3: 3600, 2: 3900, 4: 11100}),
        ({}, {1: 0, 2: 3600, 3: 10800, 4: 10800}),
        # jobs 2 and 3 are planned by count once they have waited a minute: job 2 at 3600 (when job
        # 1 ends, a wait of 59 minutes), job 3 after it at 10800 (3 hours). A 2-hour target is
        # missed (by job 3, which needs job 2's plan too), so both are reserved for at once ...
        (
            {"short_first_min": 10, "starve_wait_min": 1, "wait_target_min": 120},
            {1: 0, 3: 3600, 2: 3900, 4: 11100},
        ),
        # ... a 4-hour one is met, so job 4 backfills at 200 (job 2's plan misses only then)
        (
            {"short_first_min": 10, "starve_wait_min": 1, "wait_target_min": 240},
            {1: 0, 4: 200, 3: 3600, 2: 36200},
        ),
    ],
    ids=["short-first", "short-first-starve", "easy", "wait-target-missed", "wait-target-met"],
)
def test_a_starving_wide_job_keeps_long_jobs_from_backfilling_ahead(
    tmp_path: Path, options: dict[str, int], starts: dict[int, int]
) -> None:
    """The knobs as slurm.conf's `conf` policy reads them (FIFO priority, EASY backfill)."""
    from ctld.sim.run import with_config

    path = tmp_path / "starving.swf"
    path.write_text(STARVING)
    trace = read_swf(path)
    machine = with_config(default_machine(trace), scheduler="sched/backfill", bf_reservations=1, **options)
    outcome = evaluate(trace, machine, "conf")
    assert {r.job_id: r.start for r in outcome.results} == starts


CONF = """ClusterName=sim
SlurmctldHost=head
NodeName=n[1-4] CPUs=1 RealMemory=1000
PartitionName=batch Nodes=n[1-4] Default=YES MaxTime=INFINITE
SchedulerParameters=bf_resolution=1,bf_reservations=1,{options}
"""


@pytest.mark.parametrize(
    ("options", "policy"),
    [
        ("shoal_short_first=30,shoal_starve_wait=360,shoal_wait_target=3600,shoal_starve_max=10", "shoal"),
        ("shoal_short_first=10", "short"),
    ],
)
def test_policy_conf_honours_the_slurm_conf_knobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: str, policy: str
) -> None:
    """`--policy conf` with the SchedulerParameters decides as the named policy on the same machine."""
    trace = tmp_path / "starving.swf"
    trace.write_text(STARVING)
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.format(options=options))
    rows = {}
    for name in ("conf", policy, "easy"):
        out = tmp_path / f"{name}.csv"
        assert shoal_sim.main([str(trace), "--conf", str(conf), "--policy", name, "--csv", str(out)]) == 0
        rows[name] = out.read_text()
    assert rows["conf"] == rows[policy]
    assert rows["conf"] != rows["easy"]


@pytest.mark.parametrize(
    ("options", "fields"),
    [
        ("shoal_short_first=10", {"short_first_min": 10, "starve_wait_min": 0, "starve_xfactor": 0}),
        ("shoal_starve_wait=1440,shoal_starve_xfactor=10", {"starve_wait_min": 1440, "starve_xfactor": 10}),
        ("shoal_starve_max=3", {"starve_max": 3, "starve_wait_min": 0}),
        ("shoal_starve_wait=360,shoal_wait_target=3600", {"starve_wait_min": 360, "wait_target_min": 3600}),
        ("bf_window=60", {"short_first_min": 0, "starve_wait_min": 0, "starve_xfactor": 0}),
    ],
)
def test_scheduler_parameters_set_the_shoal_knobs(
    tmp_path: Path, options: str, fields: dict[str, int]
) -> None:
    from ctld.sim.machine import conf_machine

    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.format(options=options))
    config = conf_machine(str(conf)).config
    assert {name: getattr(config, name) for name in fields} == fields


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("shoal_starve_wait=1d", "invalid value for SchedulerParameters option shoal_starve_wait: '1d'"),
        ("shoal_short_first", "invalid value for SchedulerParameters option shoal_short_first: ''"),
        (
            "shoal_starve_xfactor=-2",
            "invalid value for SchedulerParameters option shoal_starve_xfactor: '-2'",
        ),
        ("shoal_wait_target=2.5d", "invalid value for SchedulerParameters option shoal_wait_target: '2.5d'"),
    ],
)
def test_a_bad_shoal_knob_is_a_file_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: str, message: str
) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF.format(options=options))
    trace = tmp_path / "small.swf"
    trace.write_text(SMALL)
    assert shoal_sim.main([str(trace), "--conf", str(conf)]) == 1
    assert capsys.readouterr().err.strip().startswith(f"shoal sim: error: {conf}:5: {message}")


def test_shoal_sim_help_is_shoal_sims(capsys: pytest.CaptureFixture[str]) -> None:
    """`shoal sim --help` shows shoal sim's options (the dispatcher used to refuse --help first)."""
    from cli import shoal_admin

    with pytest.raises(SystemExit) as done:
        shoal_admin.main(["sim", "--help"])
    assert done.value.code == 0
    assert "--backfill-rule" in capsys.readouterr().out


def test_windows_are_the_ones_the_published_baselines_drew() -> None:
    """gym's np_random(1) + numpy RandomState.randint(1024, 10000 - 1024 - 1), ten times: the list
    numpy 2.4 gives for it (checked on a machine with numpy), reproduced without numpy."""
    from ctld.sim.windows import start_indices

    assert start_indices(1, 10_000, 1024, 10) == [1981, 2756, 4299, 8850, 3316, 2714, 5228, 7762, 4022, 7085]
    assert start_indices(1, 10_000, 1024, 3) == start_indices(1, 10_000, 1024, 10)[:3]
    assert start_indices(2, 10_000, 1024, 10) != start_indices(1, 10_000, 1024, 10)
    assert all(1024 <= s < 10_000 - 1024 - 1 for s in start_indices(7, 10_000, 1024, 200))
    assert start_indices(1, 100, 1024, 2) == [0, 0]  # too short: the one window is the start


@pytest.mark.parametrize(
    ("name", "bsld", "utilization"),
    [("lublin_256.swf", 7273.77, 0.657), ("lublin_256_new2.swf", 7842.47, 0.404)],
    ids=["lublin-1", "lublin-2"],
)
def test_fcfs_reproduces_the_published_baseline(name: str, bsld: float, utilization: float) -> None:
    """BASELINES.md's FCFS column (no backfill) depends only on the trace and the protocol: with
    the same windows the figures are the published ones to the last digit."""
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    trace = read_swf(path)
    summary = evaluate(trace, default_machine(trace), "fcfs", (10, 1024), 1).summary
    assert round(summary.avg_bounded_slowdown, 2) == bsld
    assert round(summary.utilization, 3) == utilization


def test_sched_params_set_knobs_over_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--sched-params: what a SchedulerParameters change would do, without writing a slurm.conf.
    On STARVING, `short` lets job 4 (10 h) backfill ahead of the wide job 2; with
    shoal_starve_wait=1 job 2 starves after a minute and gets its own reservation (the starts of
    the "short-first-starve" case above)."""
    trace = tmp_path / "starving.swf"
    trace.write_text(STARVING)
    out = tmp_path / "out.csv"

    def starts(*extra: str) -> dict[int, int]:
        assert shoal_sim.main([str(trace), "--policy", "short", "--csv", str(out), *extra]) == 0
        rows = [line.split(",") for line in out.read_text().splitlines()[1:]]
        return {int(row[0]): int(row[2]) for row in rows}

    assert starts() == {1: 0, 4: 200, 3: 3600, 2: 36200}
    assert starts("--sched-params", "shoal_starve_wait=1") == {1: 0, 3: 3600, 2: 3900, 4: 11100}
    capsys.readouterr()
    assert shoal_sim.main([str(trace), "--sched-params", "shoal_starve=1"]) == 1
    assert "shoal sim: error: --sched-params: unknown option 'shoal_starve'" in capsys.readouterr().err
    assert shoal_sim.main([str(trace), "--sched-params", "bf_window=1d"]) == 1
    assert (
        "shoal sim: error: --sched-params: bf_window needs a whole number, not '1d'"
        in capsys.readouterr().err
    )
