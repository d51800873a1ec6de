"""`srun --help` and `salloc --help`: every option the command accepts, in Slurm's layout.

Built from the commands' own option tables, so the help never lists an option that is refused nor
leaves out one that works. The descriptions are shoal's own words.
"""

from __future__ import annotations

from collections.abc import Iterable

from cli.options import NO_ARG, OPTIONAL, Opt

# dest -> (value shown after "=", what it does); options without an entry are not listed
DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "account": ("name", "charge the job to this account"),
    "begin": ("time", "start no earlier than this time"),
    "chdir": ("path", "working directory of the tasks"),
    "comment": ("text", "a comment kept with the job"),
    "constraint": ("list", "required node features"),
    "contiguous": ("", "nodes must be contiguous"),
    "cpu_bind": ("type", "how tasks are bound to CPUs"),
    "cpus_per_task": ("ncpus", "CPUs needed by each task"),
    "deadline": ("time", "remove the job if it cannot end by then"),
    "dependency": ("type:jobid", "start after other jobs (afterok:id ...)"),
    "distribution": ("type", "how tasks are laid out (block, cyclic)"),
    "acctg_freq": ("freq", "accounting sampling interval, passed on to the steps"),
    "cpu_freq": ("freq", "CPU frequency for the steps (shoal's nodes set none)"),
    "gpu_freq": ("freq", "GPU frequency for the steps (shoal's nodes set none)"),
    "hint": ("type", "nomultithread, multithread or compute_bound (--hint=help)"),
    "profile": ("types", "profiling for the steps (shoal gathers none)"),
    "error": ("file", "where the tasks' standard error goes"),
    "exact": ("", "a step gets only the CPUs it asks for"),
    "exclude": ("hosts", "nodes not to use"),
    "exclusive": ("", "do not share nodes with other jobs"),
    "export": ("names", "environment passed to the tasks (ALL, NONE, A,B=c)"),
    "gid": ("group", "run as this group (root only)"),
    "hold": ("", "submit the job held"),
    "immediate": ("secs", "give up if resources are not free within secs"),
    "input": ("file", "standard input of the tasks (a file, a task id, all, none)"),
    "jobid": ("id", "run as a step of this existing job"),
    "job_name": ("name", "name of the job"),
    "kill_on_bad_exit": ("0|1", "end the step when a task fails"),
    "label": ("", "prefix each output line with its task number"),
    "licenses": ("names", "licenses the job needs"),
    "mail_type": ("types", "BEGIN, END, FAIL, ALL ..."),
    "mail_user": ("user", "who gets the mail"),
    "mem": ("size", "memory per node (K/M/G/T)"),
    "mem_bind": ("type", "how tasks are bound to memory"),
    "mem_per_cpu": ("size", "memory per CPU"),
    "mpi": ("type", "MPI plugin (accepted; tasks start alike)"),
    "nice": ("value", "lower the job's priority"),
    "no_kill": ("", "keep the job when one of its nodes fails"),
    "no_shell": ("", "allocate, print the job id, run nothing"),
    "nodelist": ("hosts", "nodes to use"),
    "nodes": ("n[-m]", "number of nodes"),
    "ntasks": ("n", "number of tasks"),
    "ntasks_per_node": ("n", "tasks on each node"),
    "open_mode": ("append|truncate", "how output files are opened"),
    "output": ("file", "where the tasks' standard output goes"),
    "overcommit": ("", "allow more tasks than CPUs"),
    "oversubscribe": ("", "may share CPUs where the partition allows (shoal's partitions do not)"),
    "overlap": ("", "share the job's resources with other steps"),
    "partition": ("name", "partition(s) to run in"),
    "propagate": ("rlimits", "resource limits passed to the tasks"),
    "pty": ("", "run task 0 in a pseudo terminal"),
    "qos": ("name", "quality of service"),
    "quiet": ("", "print errors only"),
    "reservation": ("name", "run inside a reservation"),
    "switches": ("n[@time]", "at most n leaf switches (wait up to time for them)"),
    "threads_per_core": ("n", "threads to use on each core"),
    "time": ("limit", "time limit (minutes, [D-]HH:MM:SS, UNLIMITED)"),
    "time_min": ("limit", "smallest acceptable time limit"),
    "uid": ("user", "run as this user (root only)"),
    "unbuffered": ("", "pass output on as it comes"),
    "verbose": ("", "more messages"),
    "wait_secs": ("secs", "end the step secs after its first task ends"),
    "wckey": ("key", "workload characterization key"),
    "whole": ("", "a step gets whole nodes"),
    "cpus_per_gpu": ("n", "CPUs per allocated GPU"),
    "gpus": ("[type:]n", "GPUs for the whole job"),
    "gpu_bind": ("type", "how tasks are bound to GPUs"),
    "gpus_per_node": ("[type:]n", "GPUs on each node"),
    "gpus_per_socket": ("[type:]n", "GPUs on each socket"),
    "gpus_per_task": ("[type:]n", "GPUs for each task"),
    "gres": ("list", "generic resources per node (gpu:h100:2)"),
    "mem_per_gpu": ("size", "memory per GPU"),
}
GPU = {
    "cpus_per_gpu",
    "gpus",
    "gpu_bind",
    "gpus_per_node",
    "gpus_per_socket",
    "gpus_per_task",
    "gres",
    "mem_per_gpu",
}
HELP_ONLY = {"help", "usage", "version"}


def _line(opt: Opt, metavar: str, text: str) -> str:
    short = f"-{opt.short}, " if opt.short else "    "
    value = (
        ""
        if opt.arg == NO_ARG or not metavar
        else (f"[={metavar}]" if opt.arg == OPTIONAL else f"={metavar}")
    )
    left = f"  {short}--{opt.longs[0]}{value}"
    return f"{left:<30}{text}" if len(left) < 30 else f"{left} {text}"


def help_text(usage: str, options: Iterable[Opt]) -> str:
    """The whole --help text: the usage line, then the described options by section."""
    listed = sorted((o for o in options if o.dest in DESCRIPTIONS), key=lambda o: o.longs[0].lower())
    run = [_line(o, *DESCRIPTIONS[o.dest]) for o in listed if o.dest not in GPU]
    gpu = [_line(o, *DESCRIPTIONS[o.dest]) for o in listed if o.dest in GPU]
    parts = [
        usage,
        "",
        "Parallel run options:",
        *run,
        "",
        "GPU scheduling options:",
        *gpu,
        "",
        "Help options:",
        "  -h, --help                  this help",
        "      --usage                 a short usage line",
        "",
        "Other options:",
        "  -V, --version               print the version",
    ]
    return "\n".join(parts) + "\n"
