"""sbatch as a user sees it: options, #SBATCH directives, SBATCH_* variables, messages, exit codes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli import sbatch
from cli.options import OptionError, SpecError, directive_words, export_environment
from shoal.v1 import controller_pb2, jobs_pb2

NOW = 1_800_000_000
SCRIPT = "#!/bin/bash\necho hi\n"


def spec_for(
    args: list[str],
    *,
    script: str = SCRIPT,
    env: dict[str, str] | None = None,
    cwd: str = "/work/dir",
    tmp_path: Path | None = None,
) -> jobs_pb2.JobSpec:
    """Build the JobSpec sbatch would send (nothing is sent)."""
    argv = list(args)
    if "--wrap" not in " ".join(argv) and tmp_path is not None:
        path = tmp_path / "job.sh"
        path.write_text(script)
        argv.append(str(path))
    stdin = io.StringIO(script)
    _, spec = sbatch.prepare(argv, env or {}, cwd, stdin, NOW)
    assert spec is not None
    return spec


def run_sbatch(args: Any, *, stdin: Any = "", env: Any = None, cwd: Any = None) -> Any:
    full_env = {**os.environ, "SHOAL_AGENT_SOCKET": "/nonexistent/agent.sock", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "cli.sbatch", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=60,
    )


# --- every option lands in its JobSpec field ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field", "expected"),
    [
        (["-J", "train"], "name", "train"),
        (["-Jtrain"], "name", "train"),
        (["--job-name=train"], "name", "train"),
        (["--job", "train"], "name", "train"),
        (["-N2"], "min_nodes", 2),
        (["--nodes=2-4"], "max_nodes", 4),
        (["-n", "8"], "num_tasks", 8),
        (["-c4"], "cpus_per_task", 4),
        (["--ntasks-per-node=2"], "ntasks_per_node", 2),
        (["--mem=4G"], "mem_per_node_mb", 4096),
        (["--mem=0"], "mem_per_node_mb", 0),
        (["--mem-per-cpu=500M"], "mem_per_cpu_mb", 500),
        (["--mem-per-gpu=16G"], "mem_per_gpu_mb", 16384),
        (["-t", "1:30:00"], "time_limit_min", 90),
        (["--time=UNLIMITED"], "time_limit_min", -2),
        ([], "time_limit_min", -1),
        (["--time-min=10"], "time_min_min", 10),
        ([], "time_min_min", -1),
        (["-p", "gpu"], "partition", "gpu"),
        (["-q", "High"], "qos", "high"),
        (["-A", "physics"], "account", "physics"),
        (["-o", "out-%j.log"], "std_out", "out-%j.log"),
        (["-e", "err-%j.log"], "std_err", "err-%j.log"),
        (["-i", "in.txt"], "std_in", "in.txt"),
        (["-D", "sub"], "work_dir", "/work/dir/sub"),
        (["--chdir=/abs"], "work_dir", "/abs"),
        ([], "work_dir", "/work/dir"),
        (["-H"], "hold", True),
        (["--array=0-15%4"], "array", "0-15%4"),
        (["-d", "afterok:12:13"], "dependency", "afterok:12:13"),
        (["-w", "node[1-3]"], "nodelist", "node[1-3]"),
        (["-w", "node[1-3]"], "min_nodes", 3),
        (["-w", "node1", "-n", "9"], "max_nodes", 9),  # -w nodes are a minimum: -n may need more (22.05)
        (["-w", "node1", "-N", "1", "-n", "9"], "max_nodes", 0),  # -N fixes the count: not widened
        (["-x", "node4"], "exclude", "node4"),
        (["-C", "h100"], "constraint", "h100"),
        (["--exclusive"], "exclusive", True),
        (["--begin=now+60"], "begin_time", NOW + 60),
        (["--signal=B:USR1@90"], "signal_num", 10),
        (["--signal=B:USR1@90"], "signal_secs", 90),
        (["--signal=B:USR1@90"], "signal_batch_only", True),
        (["--signal=USR2"], "signal_secs", 60),
        (["--signal=USR2@"], "signal_secs", 60),
        (["--signal=RB:USR1@10"], "signal_batch_only", True),
        (["--signal=R:USR1@10"], "signal_batch_only", False),
        (["--signal=65"], "signal_num", 65),
        (["--requeue"], "requeue", 1),
        (["--no-requeue"], "requeue", 0),
        ([], "requeue", -1),
        (["--open-mode=append"], "open_mode", "append"),
        (["--gres=gpu:h100:2"], "gres", "gpu:h100:2"),
        (["-G", "4"], "gpus", "4"),
        (["--gpus-per-node=h100:8"], "gpus_per_node", "h100:8"),
        (["--gpus-per-task=1"], "gpus_per_task", "1"),
        (["--cpus-per-gpu=6"], "cpus_per_gpu", 6),
        (["-W"], "wait", True),
        (["--nice"], "nice", 100),
        (["--nice=5"], "nice", 5),
        (["--comment=hello world"], "comment", "hello world"),
        (["--mail-type=end,fail"], "mail_type", "END,FAIL"),
        (["--mail-user=a@b"], "mail_user", "a@b"),
        (["--reservation=maint"], "reservation", "maint"),
        (["--wckey=k"], "wckey", "k"),
        (["-L", "matlab:2"], "licenses", "matlab:2"),
        (["--contiguous"], "contiguous", True),
        (["-O"], "overcommit", True),
        (["--kill-on-invalid-dep=yes"], "kill_on_invalid_dep", "yes"),
        (["--export=NONE"], "export_spec", "NONE"),
        (["--switches=2"], "switches", 2),
        (["--switches=2"], "switch_wait_s", -1),
        (["--switches=1@5"], "switch_wait_s", 300),
        (["--switches=1@1:00:00"], "switch_wait_s", 3600),
        (["--switches=1@1:30"], "switch_wait_s", 90),
        (["--switches=1@soon"], "switch_wait_s", -1),
        ([], "batch", True),
        # --hint (scenario 252): one thread a core unless multithread or --threads-per-core says
        (["-s"], "oversubscribe", True),
        (["--oversubscribe"], "oversubscribe", True),
        ([], "oversubscribe", False),
        (["--hint=nomultithread"], "hint", "nomultithread"),
        (["--hint=nomultithread"], "threads_per_core", 1),
        (["--hint=compute_bound"], "threads_per_core", 1),
        (["--hint=multithread"], "threads_per_core", 0),
        (["--hint=nomultithread", "--threads-per-core=2"], "threads_per_core", 2),
    ],
    ids=lambda v: str(v) if not isinstance(v, list) else " ".join(v) or "(none)",
)
def test_option_maps_to_spec_field(tmp_path: Path, args: Any, field: Any, expected: Any) -> None:
    assert getattr(spec_for(args, tmp_path=tmp_path), field) == expected


def test_ntasks_per_node_with_fixed_nodes_sets_the_task_count(tmp_path: Path) -> None:
    spec = spec_for(["-N2", "--ntasks-per-node=4"], tmp_path=tmp_path)
    assert spec.num_tasks == 8


def test_script_path_arguments_and_default_name(tmp_path: Path) -> None:
    path = tmp_path / "train.sh"
    path.write_text(SCRIPT)
    _, spec = sbatch.prepare([str(path), "--lr", "3"], {}, str(tmp_path), io.StringIO(), NOW)
    assert spec is not None
    assert spec.command == str(path)
    assert spec.name == "train.sh"
    assert list(spec.argv) == ["--lr", "3"]  # options after the script belong to it
    assert spec.script == SCRIPT.encode()
    assert spec.submit_dir == str(tmp_path)


def test_stdin_script_is_named_sbatch_and_has_no_command() -> None:
    _, spec = sbatch.prepare([], {}, "/w", io.StringIO(SCRIPT), NOW)
    assert spec is not None
    assert (spec.name, spec.command, spec.script) == ("sbatch", "", SCRIPT.encode())


def test_wrap_builds_slurms_script_and_names_the_job_wrap() -> None:
    _, spec = sbatch.prepare(["--wrap=sleep 1"], {}, "/w", io.StringIO(), NOW)
    assert spec is not None
    assert spec.script == b"#!/bin/sh\n# This script was created by sbatch --wrap.\n\nsleep 1\n"
    assert spec.name == "wrap"


# --- directives, environment, command line -----------------------------------------------------

DIRECTIVES = """#!/bin/bash
# a plain comment before the directives is fine
#SBATCH --job-name=dirtest
#SBATCH --partition=debug --time=00:05:00
#SBATCH --comment="hello world"   # trailing comment
#SBATCH -A physics
# SBATCH --nodes=2
##SBATCH --nodes=3
#SBATCH     --nice=10

echo "running"
#SBATCH --job-name=after-first-command-is-ignored
"""


def test_directives_are_read_like_slurm(tmp_path: Path) -> None:
    spec = spec_for([], script=DIRECTIVES, tmp_path=tmp_path)
    assert spec.name == "dirtest"
    assert spec.partition == "debug"
    assert spec.time_limit_min == 5
    assert spec.comment == "hello world"
    assert spec.account == "physics"
    assert spec.nice == 10
    assert spec.min_nodes == 0  # "# SBATCH" and "##SBATCH" are comments


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('#SBATCH --comment="a b" -J x', ["--comment=a b", "-J", "x"]),
        ("#SBATCH --comment='it is' # note", ["--comment=it is"]),
        (r"#SBATCH --comment=a\ b", ["--comment=a b"]),
        ("#SBATCH -N2 -n4", ["-N2", "-n4"]),
    ],
    ids=["double-quotes", "single-quotes-and-comment", "escaped-space", "several"],
)
def test_directive_words(line: Any, words: Any) -> None:
    assert directive_words(f"#!/bin/sh\n{line}\n") == words


@pytest.mark.parametrize(
    ("env", "cli", "expected"),
    [
        ({}, [], "fromscript"),
        ({"SBATCH_PARTITION": "fromenv"}, [], "fromenv"),
        ({"SBATCH_PARTITION": "fromenv"}, ["-p", "fromcli"], "fromcli"),
        ({}, ["--partition=fromcli"], "fromcli"),
    ],
    ids=["script", "env-over-script", "cli-over-env", "cli-over-script"],
)
def test_precedence_script_then_env_then_command_line(
    tmp_path: Path, env: Any, cli: Any, expected: Any
) -> None:
    script = "#!/bin/sh\n#SBATCH -p fromscript\ntrue\n"
    assert spec_for(cli, script=script, env=env, tmp_path=tmp_path).partition == expected


@pytest.mark.parametrize(
    ("var", "value", "field", "expected"),
    [
        ("SBATCH_TIMELIMIT", "2:00:00", "time_limit_min", 120),
        ("SBATCH_JOB_NAME", "envname", "name", "envname"),
        ("SBATCH_ACCOUNT", "acct", "account", "acct"),
        ("SBATCH_QOS", "high", "qos", "high"),
        ("SBATCH_GRES", "gpu:2", "gres", "gpu:2"),
        ("SBATCH_GPUS", "8", "gpus", "8"),
        ("SBATCH_EXCLUSIVE", "", "exclusive", True),
        ("SBATCH_OPEN_MODE", "append", "open_mode", "append"),
        ("SBATCH_REQUEUE", "", "requeue", 1),
        ("SBATCH_NO_REQUEUE", "", "requeue", 0),
        ("SBATCH_WAIT", "", "wait", True),
        ("SBATCH_ARRAY_INX", "1-3", "array", "1-3"),
        ("SBATCH_EXPORT", "NONE", "export_spec", "NONE"),
        ("SBATCH_REQ_SWITCH", "1@2", "switch_wait_s", 120),
    ],
    ids=lambda v: str(v),
)
def test_input_environment_variables(tmp_path: Path, var: Any, value: Any, field: Any, expected: Any) -> None:
    assert getattr(spec_for([], env={var: value}, tmp_path=tmp_path), field) == expected


def test_command_line_memory_option_replaces_another_from_the_script(tmp_path: Path) -> None:
    script = "#!/bin/sh\n#SBATCH --mem-per-cpu=500M\ntrue\n"
    spec = spec_for(["--mem=2G"], script=script, tmp_path=tmp_path)
    assert (spec.mem_per_node_mb, spec.mem_per_cpu_mb) == (2048, 0)


# --- --export ----------------------------------------------------------------------------------

ENV = {"HOME": "/home/a", "PATH": "/bin", "SLURM_CONF": "/etc/slurm.conf"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, ENV),
        ("ALL", ENV),
        ("NONE", {"SLURM_CONF": "/etc/slurm.conf"}),
        ("ALL,A=b", {**ENV, "A": "b"}),
        ("NONE,A=b", {"SLURM_CONF": "/etc/slurm.conf", "A": "b"}),
        ("HOME,A=b", {"SLURM_CONF": "/etc/slurm.conf", "HOME": "/home/a", "A": "b"}),
    ],
    ids=["default", "all", "none", "all-plus", "none-plus", "list"],
)
def test_export_environment(spec: Any, expected: Any) -> None:
    assert export_environment(spec, ENV) == expected


def test_default_export_sends_the_whole_environment(tmp_path: Path) -> None:
    """And the soft limits of sbatch's process, which the node sets for the job (PropagateResourceLimits)."""
    from shoal.rlimits import submit_environment

    assert dict(spec_for([], env=ENV, tmp_path=tmp_path).environment) == {**ENV, **submit_environment()}


def test_propagate_sends_only_the_named_limits(tmp_path: Path) -> None:
    env = spec_for(["--propagate=NOFILE,CORE"], env=ENV, tmp_path=tmp_path).environment
    assert sorted(k for k in env if k.startswith("SLURM_RLIMIT_")) == [
        "SLURM_RLIMIT_CORE",
        "SLURM_RLIMIT_NOFILE",
    ]
    assert env["SLURM_RLIMIT_CORE"].startswith("U")  # asked for: sent whatever slurm.conf excepts


# --- validation errors (nothing is submitted) --------------------------------------------------


@pytest.mark.parametrize(
    ("args", "variables"),
    [
        (["--distribution=block:block"], {"SLURM_DISTRIBUTION": "block:block"}),
        (["--mem-bind=local"], {"SLURM_MEM_BIND": "local", "SLURM_MEM_BIND_VERBOSE": "quiet"}),
        # scenario 255: lower case, no -> none, quiet dropped, v -> verbose; the map list as given
        (["--mem-bind=q,Local"], {"SLURM_MEM_BIND": "local", "SLURM_MEM_BIND_VERBOSE": "quiet"}),
        (["--mem-bind=V,NO"], {"SLURM_MEM_BIND": "verbose,none", "SLURM_MEM_BIND_VERBOSE": "verbose"}),
        (
            ["--mem-bind=v,map_mem:0,1"],
            {"SLURM_MEM_BIND": "verbose,map_mem:0,1", "SLURM_MEM_BIND_VERBOSE": "verbose"},
        ),
        (["-m", "Block:Cyclic,NoPack"], {"SLURM_DISTRIBUTION": "block:cyclic,nopack"}),
        (
            ["--mem-bind=verbose,local"],
            {"SLURM_MEM_BIND": "verbose,local", "SLURM_MEM_BIND_VERBOSE": "verbose"},
        ),
        (["--cpu-freq=high"], {"SLURM_CPU_FREQ_REQ": "High"}),
        (["--cpu-freq=2000000"], {"SLURM_CPU_FREQ_REQ": "2000000"}),
        (["--cpu-freq=low-high:ondemand"], {"SLURM_CPU_FREQ_REQ": "Low-High:OnDemand"}),
        (["--gpu-freq=high"], {"SLURM_GPU_FREQ": "high"}),
        (["--profile=task,energy"], {"SLURM_PROFILE": "Energy,Task"}),
        (["--acctg-freq=task=10"], {"SLURM_ACCTG_FREQ": "task=10"}),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_options_passed_on_to_the_steps_in_the_jobs_environment(
    tmp_path: Path, args: Any, variables: Any
) -> None:
    """Scenario 253 (22.05): sbatch puts these in the job's environment, where its sruns read them."""
    env = spec_for(args, tmp_path=tmp_path).environment
    assert {k: env[k] for k in variables} == variables


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-t", "abc"], "Invalid --time specification"),
        (["--time-min=x"], "Invalid --time-min specification"),
        (["--mem=12Q"], "Invalid --mem specification"),
        (["--mem-per-cpu=lots"], "Invalid --mem-per-cpu specification"),
        (["-N", "x"], '"x" is not a valid node count'),
        (["-N", "4-2"], "Maximum node count 2 is less than minimum node count 4"),
        (["-N", "2147483648"], '"2147483648" is not a valid node count'),
        (["-N", "１"], '"１" is not a valid node count'),
        (["-t", "１２"], "Invalid --time specification"),
        (["-c", "２"], 'Invalid numeric value "２" for --cpus-per-task.'),
        (["-n", "²"], 'Invalid numeric value "²" for --ntasks.'),
        (["-c", "99999999999"], 'Invalid numeric value "99999999999" for --cpus-per-task.'),
        (["--mem=99999999999999999999T"], "Invalid --mem specification"),
        (["--signal=USR1@99999"], "Invalid --signal specification"),
        (["--nice=99999999999"], "Invalid --nice value, out of range (+/- 2147483645)"),
        (["--switches=" + "1234567890" * 4], "Numeric argument (9223372036854775807) to big for --switches."),
        (["-n", "many"], 'Invalid numeric value "many" for --ntasks.'),
        (["-c", "0"], 'Invalid numeric value "0" for --cpus-per-task.'),
        (["--array=5-1"], "Invalid job array specification"),
        (["--array=a-b"], "Invalid job array specification"),
        (["-d", "afterfoo:12"], "Batch job submission failed: Job dependency problem"),
        (["-d", "afterok:"], "Batch job submission failed: Job dependency problem"),
        (["--begin=someday"], "Invalid --begin specification"),
        (["--signal=NOSUCH"], "Invalid --signal specification"),
        (["--signal=X:USR1"], "Invalid --signal specification"),
        (["--signal=USR1@65536"], "Invalid --signal specification"),
        (["--signal=0@10"], "Invalid --signal specification"),
        (["--open-mode=sideways"], "Invalid --open-mode argument: sideways. Ignored"),
        (["--mail-type=SOMETIMES"], "--mail-type=SOMETIMES invalid"),
        (["--kill-on-invalid-dep=maybe"], "Invalid --kill-on-invalid-dep specification"),
        (["--switches=two"], 'Invalid numeric value "two" for --switches.'),
        (["--switches=x@5"], 'Invalid numeric value "x" for --switches.'),
        (["--switches=0"], 'Invalid numeric value "0" for --switches.'),
        (["--hint=bogus"], 'unrecognized --hint argument "bogus", see --hint=help'),
        (["--hint=memory_bound"], "--hint=memory_bound is not supported by shoal"),
        (["--profile=bogus"], "invalid --profile=bogus option"),
        (["--distribution=bogus"], "Invalid --distribution specification"),
        (["--distribution=plane"], "Invalid plane size or size not specified"),
        (["-m", "block:cyclic:cyclic:cyclic"], "Invalid --distribution specification"),
        (
            ["--distribution=arbitrary"],
            "Invalid --distribution specification\nsbatch: error: With Arbitrary distribution you need to"
            " specify a nodelist or hostfile with the -w option",
        ),
        (["--mem-bind="], 'unrecognized --mem-bind argument ""'),
        (["--mem-bind=local,bogus"], 'unrecognized --mem-bind argument "bogus"'),
        (
            ["--cpu-freq=fast"],
            'unrecognized --cpu-freq argument "fast"\nsbatch: error: Invalid --cpu-freq argument',
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_bad_values_use_slurms_words(tmp_path: Path, args: Any, message: Any) -> None:
    with pytest.raises(SpecError) as info:
        spec_for(args, tmp_path=tmp_path)
    assert info.value.message == message


def test_two_memory_options_on_the_command_line_are_fatal(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        spec_for(["--mem=1G", "--mem-per-cpu=1G"], tmp_path=tmp_path)
    assert (info.value.level, info.value.message) == (
        "fatal",
        "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.",
    )


@pytest.mark.parametrize(
    ("args", "lines"),
    [
        (["--foo"], ["sbatch: unrecognized option '--foo'"]),
        (["--foo=1"], ["sbatch: unrecognized option '--foo=1'"]),
        (["-y"], ["sbatch: invalid option -- 'y'"]),
        (["--partition"], ["sbatch: option '--partition' requires an argument"]),
        (["-p"], ["sbatch: option requires an argument -- 'p'"]),
        (["--hold=1"], ["sbatch: option '--hold' doesn't allow an argument"]),
    ],
    ids=["long", "long-with-value", "short", "missing-long", "missing-short", "flag-with-value"],
)
def test_getopt_errors(args: Any, lines: Any) -> None:
    with pytest.raises(OptionError) as info:
        sbatch.prepare(args, {}, "/w", io.StringIO(SCRIPT), NOW)
    assert info.value.lines == [*lines, 'Try "sbatch --help" for more information']


def test_bad_directive_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(OptionError) as info:
        spec_for([], script="#!/bin/sh\n#SBATCH --bogus=1\ntrue\n", tmp_path=tmp_path)
    assert info.value.lines[0] == "sbatch: unrecognized option '--bogus=1'"


def test_stray_word_in_a_directive(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        spec_for([], script="#!/bin/sh\n#SBATCH -J x oops\ntrue\n", tmp_path=tmp_path)
    assert info.value.message == "Invalid directive found in batch script: oops"


# --- the command as a process ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdin", "lines"),
    [
        ("", ["sbatch: error: Batch script is empty!"]),
        ("  \n\n", ["sbatch: error: Batch script contains only whitespace!"]),
        (
            "echo hi\n",
            [
                "sbatch: error: This does not look like a batch script.  The first",
                "sbatch: error: line must start with #! followed by the path to an interpreter.",
                "sbatch: error: For instance: #!/bin/sh",
            ],
        ),
        (
            "#!/bin/sh\necho \0\n",
            [
                "sbatch: error: The Slurm controller does not allow scripts that",
                "sbatch: error: contain a NULL character '\\0'.",
            ],
        ),
        (
            "#!/bin/sh\r\necho\r\n",
            [
                "sbatch: error: Batch script contains DOS line breaks (\\r\\n)",
                "sbatch: error: instead of expected UNIX line breaks (\\n).",
            ],
        ),
    ],
    ids=["empty", "whitespace", "no-shebang", "nul", "dos"],
)
def test_bad_scripts_are_refused(stdin: Any, lines: Any) -> None:
    result = run_sbatch([], stdin=stdin)
    assert result.returncode == 1
    assert result.stderr.splitlines() == lines
    assert result.stdout == ""


def test_missing_script_file() -> None:
    result = run_sbatch(["/nonexistent/job.sh"])
    assert (result.returncode, result.stderr) == (
        1,
        "sbatch: error: Unable to open file /nonexistent/job.sh\n",
    )


def test_unknown_option_exit_code_and_text() -> None:
    """22.05 (captured 2026-12-01): `sbatch --bogus`, `sbatch -Z`, `sbatch -p`, an unknown #SBATCH
    option: getopt's two lines, exit 255."""
    result = run_sbatch(["--foo", "--wrap=true"])
    assert result.returncode == 255
    assert (
        result.stderr == "sbatch: unrecognized option '--foo'\nTry \"sbatch --help\" for more information\n"
    )


def test_bad_time_is_refused_before_contacting_anyone() -> None:
    result = run_sbatch(["-t", "abc", "--wrap=true"])
    assert (result.returncode, result.stderr) == (255, "sbatch: error: Invalid --time specification\n")


def test_no_controller_reports_connect_failure() -> None:
    result = run_sbatch(["--wrap=sleep 1"])
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n"
    )


def test_script_arguments_with_wrap_are_refused(tmp_path: Path) -> None:
    result = run_sbatch(["--wrap=true", "extra"])
    assert (result.returncode, result.stderr) == (
        1,
        "sbatch: error: Script arguments not permitted with --wrap option\n",
    )


@pytest.mark.parametrize("flag", ["-h", "--help", "--usage"])
def test_help_and_usage(flag: Any) -> None:
    result = run_sbatch([flag])
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: sbatch")


def test_help_imports_no_grpc_and_no_protobuf_messages() -> None:
    repo = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.sbatch", "--help"],
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=60,
    )
    assert result.returncode == 0
    modules = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert not {m for m in modules if m == "grpc" or m.startswith("grpc.")}
    assert not {m for m in modules if m.startswith(("sqlalchemy", "ctld", "noded"))}


def test_submit_path_imports_no_grpc() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.sbatch", "--wrap=true"],
        capture_output=True,
        text=True,
        env={**os.environ, "SHOAL_AGENT_SOCKET": "/nonexistent/agent.sock"},
        timeout=60,
    )
    modules = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "shoal.v1.controller_pb2" in modules  # it really built a request
    assert not {m for m in modules if m == "grpc" or m.startswith(("grpc.", "sqlalchemy", "ctld", "noded"))}


# --- what the controller's answers look like ---------------------------------------------------


def test_test_only_line() -> None:
    resp = controller_pb2.SubmitJobResponse(
        job_id=7, test_start_time=NOW, test_cpus=6, test_nodes="node1", test_partition="debug"
    )
    line = sbatch.test_only_line(resp)
    assert line.startswith("sbatch: Job 7 to start at 20")
    assert line.endswith(" using 6 processors on nodes node1 in partition debug")


@pytest.mark.parametrize(
    ("prog", "argv", "option"),
    [
        ("sbatch", ["-n", "0", "--wrap", "true"], "--ntasks"),
        ("sbatch", ["-c", "0", "--wrap", "true"], "--cpus-per-task"),
        ("srun", ["-n", "0", "true"], "--ntasks"),
    ],
    ids=["sbatch-ntasks", "sbatch-cpus", "srun-ntasks"],
)
def test_zero_counts_are_refused_not_read_as_unset(
    prog: str, argv: list[str], option: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env["SHOAL_AGENT_SOCKET"] = str(tmp_path / "no-agent.sock")
    out = subprocess.run(
        [sys.executable, "-m", f"cli.{prog}", *argv],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 1
    assert f'Invalid numeric value "0" for {option}.' in out.stderr
    assert "Unable to contact" not in out.stderr  # refused before anything is sent
