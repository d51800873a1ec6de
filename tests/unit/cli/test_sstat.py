"""sstat's layout against 22.05's on the reference cluster (`sstat -a -j 6` of `sbatch --wrap 'sleep 120'`
as alice), its step selection and its errors; the GPU terms shoal adds to the TRES columns."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cli import sstat
from shoal.v1 import cluster_pb2

# 22.05, `sstat -a -j 6` (header, dashes, the batch step), and `-P` and `-P --noconvert` of the same step
REAL_HEADER = (
    "JobID         MaxVMSize  MaxVMSizeNode  MaxVMSizeTask  AveVMSize     MaxRSS MaxRSSNode MaxRSSTask     AveRSS "
    "MaxPages MaxPagesNode   MaxPagesTask   AvePages     MinCPU MinCPUNode MinCPUTask     AveCPU   NTasks AveCPUFreq "
    "ReqCPUFreqMin ReqCPUFreqMax ReqCPUFreqGov ConsumedEnergy  MaxDiskRead MaxDiskReadNode MaxDiskReadTask  "
    "AveDiskRead MaxDiskWrite MaxDiskWriteNode MaxDiskWriteTask AveDiskWrite TRESUsageInAve TRESUsageInMax "
    "TRESUsageInMaxNode TRESUsageInMaxTask TRESUsageInMin TRESUsageInMinNode TRESUsageInMinTask TRESUsageInTot "
    "TRESUsageOutAve TRESUsageOutMax TRESUsageOutMaxNode TRESUsageOutMaxTask TRESUsageOutMin TRESUsageOutMinNode "
    "TRESUsageOutMinTask TRESUsageOutTot "
)
REAL_ROW = (
    "6.batch           5512K          node3              0      5512K      3212K      node3          0      3212K "
    "       0        node3              0          0   00:00:00      node3          0   00:00:00        1      2.60M "
    "            0             0             0              0        11087           node3               0        "
    "11087        1.00M            node3                0        1.00M cpu=00:00:00,+ cpu=00:00:00,+ "
    "cpu=node3,energy=+ cpu=00:00:00,fs/d+ cpu=00:00:00,+ cpu=node3,energy=+ cpu=00:00:00,fs/d+ cpu=00:00:00,+ "
    "energy=0,fs/di+ energy=0,fs/di+ energy=node3,fs/di+           fs/disk=0 energy=0,fs/di+ energy=node3,fs/di+ "
    "          fs/disk=0 energy=0,fs/di+ "
)
REAL_P = (
    "6.batch|5512K|node3|0|5512K|3212K|node3|0|3212K|0|node3|0|0|00:00:00|node3|0|00:00:00|1|2.60M|0|0|0|0|11087|"
    "node3|0|11087|1.00M|node3|0|1.00M|cpu=00:00:00,energy=0,fs/disk=11087,mem=3212K,pages=0,vmem=5512K|"
    "cpu=00:00:00,energy=0,fs/disk=11087,mem=3212K,pages=0,vmem=5512K|"
    "cpu=node3,energy=node3,fs/disk=node3,mem=node3,pages=node3,vmem=node3|cpu=00:00:00,fs/disk=0,mem=0,pages=0,vmem=0|"
    "cpu=00:00:00,energy=0,fs/disk=11087,mem=3212K,pages=0,vmem=5512K|"
    "cpu=node3,energy=node3,fs/disk=node3,mem=node3,pages=node3,vmem=node3|cpu=00:00:00,fs/disk=0,mem=0,pages=0,vmem=0|"
    "cpu=00:00:00,energy=0,fs/disk=11087,mem=3212K,pages=0,vmem=5512K|energy=0,fs/disk=1|energy=0,fs/disk=1|"
    "energy=node3,fs/disk=node3|fs/disk=0|energy=0,fs/disk=1|energy=node3,fs/disk=node3|fs/disk=0|energy=0,fs/disk=1"
)
# shoal measures no CPU frequency (0), and prints the disk bytes written as they are (22.05: 1.00M for 1)
KNOWN_DIFFERENCES = {"AveCPUFreq", "MaxDiskWrite", "AveDiskWrite"}


def _batch(**fields: int) -> sstat.StepStat:
    usage = cluster_pb2.StepUsage(
        job_id=6, step_id=-4, node="node3", rss_kb=3212, vmem_kb=5512, ntasks=1, disk_read=11087, disk_write=1
    )
    usage.gpu_util = -1
    for key, value in fields.items():
        setattr(usage, key, value)
    return sstat.StepStat(6, -4, (usage,))


def test_the_default_columns_as_22_05_prints_them() -> None:
    fields = sstat.parse_fields(sstat.DEFAULT_FIELDS)
    header, dashes = sstat.render_header(fields, "")
    assert header == REAL_HEADER
    assert dashes.split() == ["-" * f.width for f in fields]
    ours = sstat.render_row(sstat.columns(_batch(), False), fields, "P").split("|")
    real = REAL_P.split("|")
    for field, mine, theirs in zip(fields, ours, real, strict=True):
        if field.name not in KNOWN_DIFFERENCES:
            assert mine == theirs, field.name
    aligned = sstat.render_row(sstat.columns(_batch(), False), fields, "")
    assert len(aligned) == len(REAL_ROW) and aligned[:200] == REAL_ROW[:200]


def test_noconvert_prints_bytes_and_parsable_ends_with_a_bar() -> None:
    fields = sstat.parse_fields("JobID,MaxVMSize,MaxRSS,TRESUsageInAve")
    assert sstat.render_row(sstat.columns(_batch(), True), fields, "P") == (
        "6.batch|5644288|3289088|cpu=00:00:00,energy=0,fs/disk=11087,mem=3289088,pages=0,vmem=5644288"
    )
    assert sstat.render_row(sstat.columns(_batch(), False), fields[:2], "p") == "6.batch|5512K|"
    assert sstat.render_header(fields[:2], "p") == ["JobID|MaxVMSize|"]


def test_a_gpu_step_shows_gpuutil_and_gpumem_in_the_tres_columns() -> None:
    stat = _batch(gpu_util=37, gpu_mem_mb=2048, cpu_time_us=75_000_000)
    values = sstat.columns(stat, False)
    assert values["TRESUsageInAve"] == (
        "cpu=00:01:15,energy=0,fs/disk=11087,gres/gpumem=2048M,gres/gpuutil=37,mem=3212K,pages=0,vmem=5512K"
    )
    assert values["AveCPU"] == "00:01:15"
    assert "gres/gpuutil=node3" in values["TRESUsageInMaxNode"]


def test_helpformat_lists_the_fields_as_22_05() -> None:
    lines = sstat.helpformat()
    assert lines[0] == "AveCPU              AveCPUFreq          AveDiskRead         AveDiskWrite       "
    assert lines[-1] == "TRESUsageOutMinNode TRESUsageOutMinTask TRESUsageOutTot    "
    assert len(lines) == 13


def _steps() -> list[cluster_pb2.StepUsage]:
    return [
        cluster_pb2.StepUsage(job_id=6, step_id=-4, node="n1", ntasks=1),
        cluster_pb2.StepUsage(job_id=6, step_id=1, node="n1", ntasks=2),
        cluster_pb2.StepUsage(job_id=6, step_id=0, node="n1", ntasks=1),
        cluster_pb2.StepUsage(job_id=6, step_id=0, node="n2", ntasks=1),
        cluster_pb2.StepUsage(job_id=7, step_id=0, node="n2", ntasks=1),
    ]


@pytest.mark.parametrize(
    ("word", "all_steps", "want"),
    [
        ("6", False, ["6.0"]),  # the lowest numbered step
        ("6", True, ["6.batch", "6.0", "6.1"]),  # 22.05's order
        ("6.batch", False, ["6.batch"]),
        ("6.1", False, ["6.1"]),
        ("6.extern", True, []),
        ("7", False, ["7.0"]),
    ],
    ids=["default", "allsteps", "batch", "step", "no-extern", "other-job"],
)
def test_which_steps(word: str, all_steps: bool, want: list[str]) -> None:
    (wanted,) = sstat.parse_jobs([word])
    chosen = sstat.select_steps(wanted, _steps(), all_steps)
    assert [sstat.columns(s, False)["JobID"] for s in chosen] == want


def test_a_step_on_two_nodes_compares_the_nodes() -> None:
    (wanted,) = sstat.parse_jobs(["6.0"])
    steps = _steps()
    steps[2].rss_kb, steps[3].rss_kb = 100, 300
    (stat,) = sstat.select_steps(wanted, steps, False)
    values = sstat.columns(stat, False)
    assert (values["MaxRSS"], values["MaxRSSNode"], values["AveRSS"], values["NTasks"]) == (
        "300K",
        "n2",
        "200K",
        "2",
    )
    assert values["Nodelist"] == "n[1-2]"


@pytest.mark.parametrize(
    ("argv", "err"),
    [
        ([], "sstat: error: You didn't give me any jobs to stat.\n"),
        (["-j", "abc"], "sstat: fatal: Bad job/step specified: abc\n"),
        (["-j", "6", "-o", "foo"], 'sstat: error: Invalid field requested: "foo"\n'),
        (["-x"], "sstat: invalid option -- 'x'\n"),
    ],
    ids=["no-job", "bad-job", "bad-field", "bad-option"],
)
def test_refusals_as_22_05(argv: list[str], err: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert sstat.main(argv) == 1
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", err)


def test_sstat_imports_no_grpc_nor_the_daemons() -> None:
    """A short command: it talks to ctld through the local agent (an unreachable one here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SHOAL_AGENT_SOCKET"] = "/nonexistent/agent.sock"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.sstat", "-j", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    imported = {
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }
    assert "Traceback" not in proc.stderr
    assert not {m for m in imported if m.split(".")[0] in {"grpc", "sqlalchemy", "ctld", "noded", "dbd"}}
