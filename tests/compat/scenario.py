"""Scenarios captured from real Slurm 22.05, how to run one against a cluster, and the one normaliser.

A scenario file (tests/compat/scenarios/NN_name.txt) extends the format of the shared reference
captures (`$ command`, `# as user X (cwd D)`, `--- stdout ---`, `--- stderr ---`, `--- exit: N ---`)
with what came before the command, so the cluster can be brought to the same state again:

    # family: squeue                  the row of the table in docs/compat.md
    # jobs: 20 21 22                  job ids the captured run got, in submission order (capture writes it)
    # rows: all                       keep rows of other jobs (default: rows led by a job id the scenario
                                      did not submit are left out on both sides: earlier scenarios, others)
    --- file: job.sh ---              a file written into the work directory before the setup
    ...
    --- setup ---
    alice: sbatch -J fill1 --wrap 'sleep 300'     a command as that user, in the work directory
    wait: RUNNING fill1 fill2         until the scenario's jobs of those names are in that state
    wait: done                        until none of the scenario's jobs is pending or running
    wait steps: 2                     until squeue -s lists 2 numbered steps of the scenario's jobs
    include: busy                     the lines of tests/compat/setups/busy.txt
    helper alice: sbatch ...          a job that only shapes the state: not one of {Jn}, its rows left out
    cancel: helpers                   cancel the helper jobs and wait until they are gone
    sleep: 2
    $ scontrol show job {J1}          {Jn}: the id of the scenario's n-th job (setup and command)

Both sides (the real cluster when capturing, shoal when replaying) run the same text through the
same `Side.shell`; both outputs go through `normalise` with that side's facts before comparing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
REPO = HERE.parent.parent
# the work directories the shared captures were made in, besides each side's own
CAPTURE_DIRS = ("/tmp/realslurm-golden-work",)


@dataclass
class Scenario:
    id: str
    command: str
    user: str = "root"
    cwd: str | None = None
    family: str = ""
    jobs: list[int] = field(default_factory=list)
    all_rows: bool = False
    files: dict[str, str] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    exit: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def word(self) -> str:
        """The command's program (`squeue`), which names its family when the file does not."""
        return self.command.split()[0] if self.command.split() else ""

    def family_name(self) -> str:
        return self.family or self.word


_AS_USER = re.compile(r"# as user (\S+)(?: \(cwd ([^)]*)\))?")
_EXIT = re.compile(r"--- exit: (-?\d+) ---")


def parse(path: Path) -> Scenario:
    """Read a scenario file (also a plain shared capture, which has no setup)."""
    lines = path.read_text().split("\n")
    sc = Scenario(id=path.stem, command="")
    section: str | None = None
    body: list[str] = []

    def close() -> None:
        text = "\n".join(body)
        if section == "stdout":
            sc.stdout = text
        elif section == "stderr":
            sc.stderr = text
        elif section == "setup":
            sc.setup = [ln for ln in body if ln.strip() and not ln.lstrip().startswith("#")]
        elif section and section.startswith("file: "):
            sc.files[section[6:]] = text
        body.clear()

    for line in lines:
        m = _EXIT.fullmatch(line)
        if m:
            close()
            sc.exit = int(m.group(1))
            section = None
            break
        if line.startswith("--- ") and line.endswith(" ---"):
            close()
            name = line[4:-4]
            section = None if name == "end setup" else name
            continue
        if section is not None and not (
            line.startswith("$ ") and not sc.command and section not in ("stdout", "stderr")
        ):
            body.append(line)
            continue
        if section is not None:  # the command line ends a file or the setup
            close()
            section = None
        if line.startswith("$ ") and not sc.command:
            sc.command = line[2:]
        elif (m := _AS_USER.fullmatch(line)) is not None:
            sc.user, sc.cwd = m.group(1), m.group(2)
        elif line.startswith("# family:"):
            sc.family = line.split(":", 1)[1].strip()
        elif line.startswith("# jobs:"):
            sc.jobs = [int(x) for x in line.split(":", 1)[1].split()]
        elif line.startswith("# rows:"):
            sc.all_rows = line.split(":", 1)[1].strip() == "all"
        elif line.startswith("# "):
            sc.notes.append(line[2:])
    # a section's text is what the command printed: the file adds one newline after it
    sc.stdout = _unterminated(sc.stdout)
    sc.stderr = _unterminated(sc.stderr)
    return sc


def _unterminated(text: str) -> str:
    return text + "\n" if text else ""


def dump(sc: Scenario) -> str:
    """The scenario file's text (capture writes it; parse reads it back the same)."""
    head = [f"# family: {sc.family_name()}"]
    head += [f"# {n}" for n in sc.notes]
    if sc.jobs:
        head.append("# jobs: " + " ".join(str(j) for j in sc.jobs))
    if sc.all_rows:
        head.append("# rows: all")
    for name, text in sc.files.items():
        head += [f"--- file: {name} ---", text]
    if sc.setup:
        head += ["--- setup ---", *sc.setup, "--- end setup ---"]
    head.append(f"$ {sc.command}")
    if sc.user != "root" or sc.cwd:
        head.append(f"# as user {sc.user} (cwd {sc.cwd or '.'})")
    out = [*head, "--- stdout ---"]
    if sc.stdout:
        out.append(sc.stdout[:-1] if sc.stdout.endswith("\n") else sc.stdout)
    out.append("--- stderr ---")
    if sc.stderr:
        out.append(sc.stderr[:-1] if sc.stderr.endswith("\n") else sc.stderr)
    out.append(f"--- exit: {sc.exit} ---")
    return "\n".join(out) + "\n"


def load_all(directory: Path = SCENARIOS) -> list[Scenario]:
    return [parse(p) for p in sorted(directory.glob("*.txt"))]


# ---------------------------------------------------------------- running on a side


@dataclass
class Side:
    """One cluster to run scenarios on: its commands (PATH), slurm.conf and a work directory."""

    name: str
    path: str
    conf: str
    workdir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    paths: tuple[str, ...] = ()  # more directories of this side that outputs may name
    # a setup's fixed sleeps end once the side has settled (shoal, whose scheduler we can watch);
    # the real side keeps them as they were when its captures were made
    settles: bool = False

    def shell(self, user: str, script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `script` with bash as `user` in the work directory, with only this side's environment."""
        env = {"PATH": self.path, "SLURM_CONF": self.conf, "HOME": "/tmp", **self.extra_env}
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
        full = f"{exports}umask 022; cd {shlex.quote(str(self.workdir))} || exit 99; {script}"
        if user == "root":
            argv = ["bash", "-c", full]
        else:
            argv = ["su", user, "-s", "/bin/bash", "-c", full]
        try:
            return subprocess.run(
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd="/",
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(
                argv, 124, _text(exc.stdout), _text(exc.stderr) + "(timed out)\n"
            )


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


# the short commands the native launcher serves (cli/command.py; not imported: it would pull in the CLI)
NATIVE = (
    "sbatch",
    "squeue",
    "sinfo",
    "scontrol",
    "scancel",
    "sacct",
    "sacctmgr",
    "sprio",
    "sshare",
    "sreport",
)
SHOAL_COMMANDS = (
    "sbatch",
    "srun",
    "salloc",
    "squeue",
    "sinfo",
    "scontrol",
    "scancel",
    "sacct",
    "sacctmgr",
    "sprio",
    "sshare",
    "sreport",
)


def shoal_bin(directory: Path) -> Path:
    """A directory of `squeue` ... that run this checkout's commands with an interpreter every user may run.

    The test's own interpreter may live where alice cannot read (/root/.pyenv); a system python of the
    same version imports the same site-packages, so the scenario runs as the user it names.
    """
    directory.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    system = Path("/usr/bin/python3")
    if system.exists():
        version = subprocess.run(
            [str(system), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
        ).stdout.strip()
        if version == str(tuple(sys.version_info[:2])):
            py = str(system)
    native = Path(sysconfig.get_path("scripts"))
    for name in SHOAL_COMMANDS:
        script = directory / name
        script.unlink(missing_ok=True)
        if name in NATIVE and _is_native(native / name):
            # the installed launcher hands the command to the cluster's runner (this checkout's code)
            script.symlink_to(native / name)
            continue
        script.write_text(f'#!/bin/sh\nexec {py} -m cli.{name} "$@"\n')
        script.chmod(0o755)
    return directory


def _is_native(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def shoal_pythonpath() -> str:
    return os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])


# job ids in what a command printed: (pattern, group); the context says it is a job id
_ID_SOURCES = (
    re.compile(r"Submitted batch job (\d+)"),
    re.compile(r"(?m)^(\d+)(?:;\S+)?$"),  # --parsable
    re.compile(r"\bjob (\d+) queued"),
    re.compile(r"Granted job allocation (\d+)"),
    re.compile(r"\bJob (\d+) to start at"),
    re.compile(r"\bSLURM_JOB_ID=(\d+)"),
    re.compile(r"\bSLURM_ARRAY_JOB_ID=(\d+)"),
    re.compile(r"\bJobId=(\d+)"),
)


def submitted_ids(text: str) -> list[int]:
    """Job ids a command reported creating, in order."""
    found: list[tuple[int, int]] = []
    for rx in _ID_SOURCES:
        found += [(m.start(), int(m.group(1))) for m in rx.finditer(text)]
    out: list[int] = []
    for _pos, jid in sorted(found):
        if jid not in out:
            out.append(jid)
    return out


def expand(text: str, jobs: list[int]) -> str:
    """{J1}, {J2} ... -> the scenario's job ids (an id not yet known stays as written)."""
    return re.sub(
        r"\{J(\d+)\}",
        lambda m: str(jobs[int(m.group(1)) - 1]) if int(m.group(1)) <= len(jobs) else m.group(0),
        text,
    )


@dataclass
class Run:
    stdout: str
    stderr: str
    exit: int
    jobs: list[int]
    log: list[str]
    helpers: list[int] = field(default_factory=list)

    @property
    def all_jobs(self) -> list[int]:
        return [*self.jobs, *self.helpers]


def play(sc: Scenario, side: Side, settle_timeout: float = 60) -> Run:
    """Write the scenario's files, run its setup and its command on `side`; the jobs it made stay."""
    side.workdir.mkdir(parents=True, exist_ok=True)
    side.workdir.chmod(0o1777)
    for name, text in sc.files.items():
        p = side.workdir / name
        p.write_text(text + "\n")
        p.chmod(0o755)
    jobs: list[int] = []
    helpers: list[int] = []
    log: list[str] = []
    for line in setup_lines(sc):
        line = expand(line, jobs)
        key, _, rest = line.partition(":")
        rest = rest.strip()
        if key == "sleep":
            if side.settles:
                settle(side, [*jobs, *helpers], float(rest))
            else:
                time.sleep(float(rest))
        elif key == "wait":
            _wait(side, jobs, rest.split(), settle_timeout, log)
        elif key == "wait steps":
            _wait_steps(side, jobs, int(rest), settle_timeout, log)
        elif key == "cancel" and rest == "helpers":
            cancel(side, helpers)
            _wait(side, helpers, ["done"], settle_timeout, log)
        else:
            helper = key.startswith("helper ")
            out = side.shell(key.removeprefix("helper ").strip(), rest)
            log.append(f"{line}\n  -> {out.returncode} {out.stdout.strip()} {out.stderr.strip()}")
            new = [j for j in submitted_ids(out.stdout + out.stderr) if j not in jobs and j not in helpers]
            (helpers if helper else jobs).extend(new)
    out = side.shell(sc.user, expand(sc.command, jobs))
    jobs += [j for j in submitted_ids(out.stdout + out.stderr) if j not in jobs and j not in helpers]
    return Run(out.stdout, out.stderr, out.returncode, jobs, log, helpers)


def setup_lines(sc: Scenario) -> list[str]:
    """The setup with `include: NAME` replaced by tests/compat/setups/NAME.txt (a state many scenarios share)."""
    out: list[str] = []
    for line in sc.setup:
        key, _, rest = line.partition(":")
        if key == "include":
            text = (HERE / "setups" / f"{rest.strip()}.txt").read_text()
            out += [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        else:
            out.append(line)
    return out


def _wait(side: Side, jobs: list[int], words: list[str], timeout: float, log: list[str]) -> None:
    """`wait: done` or `wait: STATE name...` over the scenario's jobs, seen through squeue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = job_states(side, jobs)
        if words == ["done"]:
            if not any(
                state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED")
                for _name, state in rows
            ):
                if side.settles:
                    _wait_recorded(side, jobs, timeout)
                else:  # the accounting records follow the end (sooner, real sacct shows a stale JobName)
                    time.sleep(3)
                return
        else:
            state, names = words[0], set(words[1:])
            if names and all(any(n == name and s == state for name, s in rows) for n in names):
                return
        time.sleep(0.3)
    log.append(f"wait {' '.join(words)}: timed out ({job_states(side, jobs)})")


def settle(side: Side, jobs: list[int], most: float) -> None:
    """A setup's `sleep: N` on a side that settles: at most N seconds, and done as soon as the
    scheduler has looked at every pending job (a reason other than None) and the jobs' states and
    reasons stayed the same over three looks in a row (about half a second)."""
    deadline = time.monotonic() + most
    last, same = "", 0
    while time.monotonic() < deadline:
        rows = (
            side.shell("root", f"squeue -h -t all -j {','.join(map(str, jobs))} -o '%i %T %r'").stdout
            if jobs
            else ""
        )
        looked = all(not (f.split()[1:] == ["PENDING", "None"]) for f in rows.splitlines())
        same = same + 1 if looked and rows == last else 0
        if same >= 2:
            return
        last = rows
        time.sleep(0.2)


def _wait_recorded(side: Side, jobs: list[int], timeout: float) -> None:
    """Until accounting has every job's final record (State and JobName as the job ended)."""
    if not jobs:
        return
    deadline = time.monotonic() + timeout
    active = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED")
    while time.monotonic() < deadline:
        out = side.shell(
            "root", f"sacct -X -n -P -o JobID,State -j {','.join(map(str, jobs))}"
        ).stdout.splitlines()
        rows = [line.split("|") for line in out if "|" in line]
        # an array's tasks are J_1, J_2 ...: the array is recorded once none of them is active
        seen = {r[0].split("_")[0] for r in rows} - {
            r[0].split("_")[0] for r in rows if r[1].startswith(active)
        }
        if {str(j) for j in jobs} <= seen:
            return
        time.sleep(0.2)


def _wait_steps(side: Side, jobs: list[int], count: int, timeout: float, log: list[str]) -> None:
    """`wait steps: N`: until squeue -s lists N steps numbered 0 and up of the scenario's jobs (their
    sruns have started; a fixed sleep falls short on a loaded machine)."""
    deadline = time.monotonic() + timeout
    found: list[str] = []
    while jobs and time.monotonic() < deadline:
        out = side.shell("root", f"squeue -h -s -j {','.join(map(str, jobs))} -o '%i'")
        found = [s for s in out.stdout.split() if s.rpartition(".")[2].isdigit()]
        if len(found) >= count:
            return
        time.sleep(0.3)
    log.append(f"wait steps {count}: timed out ({found})")


def job_states(side: Side, jobs: list[int]) -> list[tuple[str, str]]:
    if not jobs:
        return []
    out = side.shell("root", f"squeue -h -t all -j {','.join(map(str, jobs))} -o '%j %T'")
    return [tuple(line.split(None, 1)) for line in out.stdout.splitlines() if len(line.split()) == 2]  # type: ignore[misc]


def cancel(side: Side, jobs: list[int]) -> None:
    """Cancel the scenario's own jobs, by id (the real cluster is shared: never anyone else's)."""
    if jobs:
        side.shell("root", f"scancel {' '.join(map(str, jobs))} 2>/dev/null; true")


# ---------------------------------------------------------------- the normaliser


@dataclass(frozen=True)
class Facts:
    """What differs between two runs of the same scenario by nature, not by behaviour."""

    jobs: tuple[int, ...]  # the scenario's own job ids, in submission order
    workdir: str
    conf: str
    hostname: str
    paths: tuple[str, ...] = ()
    all_rows: bool = False
    # when known (a cluster of our own): the only ids whose rows are left out; else every id not ours
    foreign: frozenset[int] | None = None


# a line led by a job id (squeue, sacct, sprio rows): the id, then an array or step suffix or a separator
_LEADING_ID = re.compile(
    r"^(\s*)(\d+)((?:_\[[\d,\-%]+\]|_\d+)?(?:\.(?:batch|extern|TDB|\d{1,3}))?)( +|(?=[|;\t]|$))"
)
# other places a job id is named
_ID_CONTEXTS = re.compile(
    r"(?:Submitted batch job |Granted job allocation |\b[Jj]ob (?:id )?|JobId=|ArrayJobId=|JobID=|SLURM_JOB_ID=|"
    r"SLURM_JOBID=|SLURM_ARRAY_JOB_ID=|slurm-|\b(?:after|afterok|afterany|afternotok|aftercorr):)(\d+)"
    r"|(?<![\w.\-])(\d+)(?=_\d|_\[|\.batch\b|\.extern\b|\.TDB\b|\.\d{1,3}\b(?!\.))"
    r"|(?<=[\w][-_])(\d+)(?=\.(?:out|err)\b)"  # job.sh's -o name-%j.out
    r"|(?<=\|)(\d+)(?=\||$)"  # a parsable column (sacct JobIDRaw)
)
_STEP_ID = re.compile(r"\bStepId=(\d+)(?=\.)")
_ISO = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\b")
_CTIME = re.compile(
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"[ \d]\d \d\d:\d\d:\d\d \d{4}\b"
)
_ADDR = re.compile(r"\b127\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")
_VOLATILE = re.compile(
    r"\b(SLURM_SRUN_COMM_PORT|SLURM_STEP_LAUNCHER_PORT|SLURM_TASK_PID|SLURM_WORKING_CLUSTER|MASTER_PORT"
    r"|CPULoad|FreeMem|Port|SlurmctldPort|SlurmdPort)=\S+"
)
_SID = re.compile(r"AllocNode:Sid=\S+")
_SRUN = re.compile(r"SrunHost:Pid=(?!\(null\):0\b)\S+")  # a step's srun (the batch step has none)
_OS = re.compile(r"\bOS=.*?(?= {2,}|$)", re.M)


def drop_foreign_rows(
    text: str, jobs: tuple[int, ...] | list[int], foreign: frozenset[int] | None = None
) -> str:
    """Leave out lines led by the id of a job the scenario did not submit (capture stores what is left).

    With `foreign` (every job id the cluster has, from sacct) only rows of those jobs go: a line led by
    some other number stays, so it cannot vanish from both sides and match by accident.
    """
    mine = set(jobs)

    def other(jid: int) -> bool:
        return jid not in mine and (foreign is None or jid in foreign)

    return "\n".join(
        line for line in text.split("\n") if not ((m := _LEADING_ID.match(line)) and other(int(m.group(2))))
    )


def cluster_jobs(side: Side) -> frozenset[int]:
    """Every job id the side's accounting knows (array and step suffixes cut off)."""
    out = side.shell("root", "sacct -a -X -n -P -o JobIDRaw -S 2000-01-01T00:00:00")
    return frozenset(int(m.group(1)) for m in re.finditer(r"(?m)^(\d+)", out.stdout))


def normalise(text: str, facts: Facts) -> str:
    """Make two captures of one scenario comparable: only what differs by nature is replaced.

    Job ids become J1, J2 ... by submission order (so a different id order or a missing job still
    differs; a row led by one loses the padding around it, since ids differ in width); rows of jobs the scenario did not submit are left out (earlier scenarios, other users of
    a shared cluster); times, dates, the host name, loopback addresses, ports, pids and the work
    directory become placeholders. Layouts, states, counts and columns are left as they are.
    """
    rank = {jid: i + 1 for i, jid in enumerate(facts.jobs)}
    if not facts.all_rows:
        text = drop_foreign_rows(text, facts.jobs, facts.foreign)
    lines = []
    for line in text.split("\n"):
        m = _LEADING_ID.match(line)
        if m and int(m.group(2)) in rank:  # the id's width (and the column's padding) is no behaviour
            line = f"J{rank[int(m.group(2))]}{m.group(3)}{' ' if m.group(4) else ''}{line[m.end() :]}"
        lines.append(line)
    text = "\n".join(lines)

    def job(m: re.Match[str]) -> str:
        g = next(i for i in (1, 2, 3, 4) if m.group(i) is not None)
        jid = int(m.group(g))
        if jid not in rank:
            return m.group(0)
        return m.group(0)[: m.start(g) - m.start()] + f"J{rank[jid]}"

    text = _ID_CONTEXTS.sub(job, text)
    # a step of an allocation srun made itself: its job id is printed nowhere else, so it is S1, S2 ...
    # by first appearance (the same job named twice is still the same on the other side)
    steps: dict[int, str] = {}
    text = _STEP_ID.sub(
        lambda m: (
            m.group(0)
            if int(m.group(1)) in rank
            else "StepId=" + steps.setdefault(int(m.group(1)), f"S{len(steps) + 1}")
        ),
        text,
    )
    if facts.conf:
        text = text.replace(facts.conf, "<CONF>")
    for path in sorted({facts.workdir, *CAPTURE_DIRS, *facts.paths}, key=len, reverse=True):
        if path:
            text = text.replace(path, "<CWD>" if path in (facts.workdir, *CAPTURE_DIRS) else "<DIR>")
    text = _ISO.sub("<TIME>", text)
    text = _CTIME.sub("<DATE>", text)
    text = _SID.sub("AllocNode:Sid=<HOST>:<PID>", text)
    text = _SRUN.sub("SrunHost:Pid=<HOST>:<PID>", text)
    text = _VOLATILE.sub(lambda m: f"{m.group(1)}=<N>", text)
    text = _OS.sub("OS=<OS>", text)
    text = _ADDR.sub("<ADDR>", text)
    if facts.hostname:
        text = re.sub(rf"\b{re.escape(facts.hostname)}\b", "<HOST>", text)
    text = re.sub(r"(?<![\d:])0:0\d\b(?!:)", "0:0S", text)  # seconds of elapsed time (an exit code is 0:9)
    text = re.sub(r"\b00:00:[0-5]\d\b", "00:00:SS", text)
    return text
