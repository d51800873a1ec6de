"""Any option value or #SBATCH line gets Slurm's error or is accepted: never a traceback (issue 14).

The commands run in this process with no agent to reach, so what is checked is their parsing: a value
either is refused in Slurm's words (an exit status, a `<prog>: error:` line) or gets as far as asking
the controller ("Unable to contact slurm controller").
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import sacct, sbatch, scontrol, squeue, srun
from cli.options import OptionError, SpecError

# Values that have hurt before, and the kinds of text a user (or a fuzzer) types.
NASTY = [
    "",
    "0",
    "-1",
    "-5",
    "1" * 40,
    "99999999999",
    "2147483648",
    "4294967296",
    "１２",
    "²",
    "٣",
    "1e5",
    "0x10",
    "1_000",
    " 5",
    "+5",
    "1-99999999999",
    "node[",
    "node[1-99999999]",
    "n[1-3]",
    "a,b",
    "%",
    "%j",
    "\x00",
    "now+99999999999days",
    "9999-12-31T23:59:59",
    "99999-01-01",
    "UNLIMITED",
    "1:00:00",
    "1-0",
    "USR1@99999",
    "B:USR1@60",
    "gpu:99999999999999",
    "gpu:h100:2",
    "afterok:1",
    "1T",
    "99999999999999999999T",
    "x" * 300,
]
VALUES = st.one_of(
    st.sampled_from(NASTY), st.text(max_size=12), st.text(alphabet="0123456789-:,%[]@+T.kKmMgG", max_size=16)
)

SBATCH_OPTIONS = [
    "--array",
    "--nodes",
    "--ntasks",
    "--ntasks-per-node",
    "--cpus-per-task",
    "--mem",
    "--mem-per-cpu",
    "--mem-per-gpu",
    "--cpus-per-gpu",
    "--time",
    "--time-min",
    "--begin",
    "--deadline",
    "--signal",
    "--nice",
    "--switches",
    "--gres",
    "--gpus",
    "--gpus-per-node",
    "--gpus-per-task",
    "--gpu-bind",
    "--dependency",
    "--partition",
    "--nodelist",
    "--exclude",
    "--mail-type",
    "--open-mode",
    "--kill-on-invalid-dep",
    "--threads-per-core",
    "--export",
    "--output",
    "--job-name",
    "--exclusive",
    "--requeue",
    "--hold",
    "--chdir",
    "--qos",
    "--account",
    "--constraint",
]


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every command that gets past its parsing finds no agent: it must say so, not hang or crash."""
    monkeypatch.setenv("SHOAL_AGENT_SOCKET", str(tmp_path_factory.getbasetemp() / "no-agent.sock"))
    monkeypatch.setenv("SLURM_CONF", "/nonexistent/slurm.conf")


@contextlib.contextmanager
def _captured() -> Iterator[io.StringIO]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        yield err


def _exit_status(main: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str]:
    """Run a command's main in-process: its status and stderr; any other exception fails the test."""
    with _captured() as err:
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            status = exc.code if isinstance(exc.code, int) else 1
    return status, err.getvalue()


def _assert_slurm_style(prog: str, status: int, stderr: str) -> None:
    assert "Traceback" not in stderr
    if status != 0:
        assert stderr.strip(), f"{prog} failed silently"


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(option=st.sampled_from(SBATCH_OPTIONS), value=VALUES, as_directive=st.booleans())
def test_sbatch_option_values(option: str, value: str, as_directive: bool) -> None:
    """On the command line or in an #SBATCH line: Slurm's refusal (a SpecError/OptionError with its words)
    or a JobSpec; nothing else escapes the parser."""
    script = "#!/bin/sh\ntrue\n"
    argv = [f"{option}={value}", "--wrap", "true"]
    if as_directive:
        if "\n" in value or "\x00" in value:
            value = value.replace("\n", " ").replace("\x00", "")
        script = f"#!/bin/sh\n#SBATCH {option}={value}\ntrue\n"
        argv = []
    try:
        sbatch.prepare(argv, {}, "/tmp", io.StringIO(script), 1_700_000_000)
    except (SpecError, OptionError, sbatch.Failure) as exc:
        assert str(exc).strip() or getattr(exc, "lines", None)


def test_sbatch_every_option_with_every_nasty_value() -> None:
    """Each option with each value that has hurt before, on the command line: no exception but Slurm's."""
    for option in SBATCH_OPTIONS:
        for value in NASTY:
            try:
                sbatch.prepare(
                    [f"{option}={value}", "--wrap", "true"], {}, "/tmp", io.StringIO(""), 1_700_000_000
                )
            except (SpecError, OptionError, sbatch.Failure):
                pass


@FUZZ
@given(option=st.sampled_from(SBATCH_OPTIONS[:20]), value=VALUES)
def test_sbatch_main_exits_with_slurms_status(option: str, value: str) -> None:
    status, stderr = _exit_status(sbatch.main, [f"{option}={value}", "--wrap", "true"])
    _assert_slurm_style("sbatch", status, stderr)
    assert status in (0, 1, 255)


@FUZZ
@given(
    option=st.sampled_from(
        ["-j", "-u", "-p", "-t", "-w", "-n", "-A", "-q", "-o", "-O", "-S", "-M", "-i", "--start", "-R", "-L"]
    ),
    value=VALUES,
)
def test_squeue_option_values(option: str, value: str) -> None:
    argv = [option] if option == "--start" else [option, value]
    _assert_slurm_style("squeue", *_exit_status(squeue.main, argv))


@FUZZ
@given(
    option=st.sampled_from(["-j", "-u", "-N", "-S", "-E", "-s", "-o", "-A", "-r", "-M", "--name", "-q"]),
    value=VALUES,
)
def test_sacct_option_values(option: str, value: str) -> None:
    _assert_slurm_style("sacct", *_exit_status(sacct.main, [option, value]))


@FUZZ
@given(
    words=st.lists(
        st.one_of(
            VALUES,
            st.sampled_from(
                [
                    "show",
                    "job",
                    "node",
                    "hostnames",
                    "hostlist",
                    "update",
                    "jobid=1",
                    "nice=",
                    "timelimit=",
                    "create",
                    "reservation",
                    "starttime=now",
                    "duration=",
                    "nodecnt=",
                    "nodes=",
                    "users=",
                    "hold",
                    "release",
                    "requeue",
                ]
            ),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_scontrol_words(words: list[str]) -> None:
    _assert_slurm_style("scontrol", *_exit_status(scontrol.main, words))


@FUZZ
@given(
    option=st.sampled_from(
        [
            "-N",
            "-n",
            "-c",
            "-t",
            "--mem",
            "--gres",
            "--gpus",
            "-w",
            "--cpu-bind",
            "--gpu-bind",
            "--ntasks-per-node",
            "--signal",
            "--nice",
        ]
    ),
    value=VALUES,
)
def test_srun_option_values(option: str, value: str) -> None:
    _assert_slurm_style("srun", *_exit_status(srun.main, [f"{option}={value}", "true"]))


def test_sacct_bad_hostlist_is_a_name_as_in_slurm() -> None:
    """22.05: `sacct -N 'node['` lists nothing (rc 0); it was a HostlistError traceback."""
    args = sacct._parser().parse_args(["-N", "node["])
    query, _ = sacct.build_query(args, 1_700_000_000, 0)
    assert list(query.nodes) == ["node["]


def test_sacct_huge_hostlist_is_refused_without_expanding() -> None:
    """22.05: `sacct -N 'node[1-99999999]'` says "Invalid argument" (exit 22); nothing is expanded."""
    status, stderr = _exit_status(sacct.main, ["-N", "node[1-99999999]"])
    assert (status, stderr) == (22, "sacct: error: Invalid argument\n")


def test_directive_with_a_huge_switch_count(tmp_path: Path) -> None:
    """`#SBATCH --switches=<40 digits>` was a ValueError traceback; 22.05 says the number is too big."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --switches=" + "1234567890" * 4 + "\ntrue\n")
    status, stderr = _exit_status(sbatch.main, [str(script)])
    assert (status, stderr) == (
        1,
        "sbatch: error: Numeric argument (9223372036854775807) to big for --switches.\n",
    )
