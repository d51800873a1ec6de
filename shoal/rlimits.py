"""Resource limits carried from the submitting process to the job, as Slurm's
PropagateResourceLimits: the caller's soft limits travel in the environment (SLURM_RLIMIT_NAME),
the node takes them out of the job's environment and sets them before exec, lowered to its own
hard limit. The node also caps RSS at the memory the job (or step) holds there, as 22.05 does.
Standard library only: used by the commands, the runner and the node."""

from __future__ import annotations

import resource
from collections.abc import Mapping, MutableMapping

# Slurm's names for the limits, in its order.
LIMITS: dict[str, int] = {
    "CPU": resource.RLIMIT_CPU,
    "FSIZE": resource.RLIMIT_FSIZE,
    "DATA": resource.RLIMIT_DATA,
    "STACK": resource.RLIMIT_STACK,
    "CORE": resource.RLIMIT_CORE,
    "RSS": resource.RLIMIT_RSS,
    "NPROC": resource.RLIMIT_NPROC,
    "NOFILE": resource.RLIMIT_NOFILE,
    "MEMLOCK": resource.RLIMIT_MEMLOCK,
    "AS": resource.RLIMIT_AS,
}
ENV_PREFIX = "SLURM_RLIMIT_"
CALLER_VARIABLE = "SHOAL_CALLER_RLIMITS"  # cli/native/command.c: the caller's "NAME=soft:hard,..."
EXEC_VARIABLE = "SHOAL_EXEC_RLIMITS"  # noded/native/stepd_exec.c reads exec_argument() there
USER_MARK = "U"  # a value marked so was asked for with --propagate: a refusal is told to the job
INFINITY_TEXT = str(2**64 - 1)  # RLIM_INFINITY as an unsigned 64-bit number
MEMORY_MARK = ":h"  # in EXEC_VARIABLE: "RESOURCE=BYTES:h" lowers the hard limit too (the memory cap)


class PropagateError(ValueError):
    """A PropagateResourceLimits(Except) or --propagate value names an unknown limit."""


def parse_names(text: str) -> frozenset[str]:
    """ "ALL", "NONE" or a comma list of limit names as the set of names it means; upper case only,
    as 22.05 (`--propagate=stack`: "Bad rlimit name: stack")."""
    items = [i.strip() for i in text.split(",") if i.strip()]
    if not items or items == ["ALL"]:
        return frozenset(LIMITS)
    if items == ["NONE"]:
        return frozenset()
    unknown = [i for i in items if i not in LIMITS]
    if unknown:
        raise PropagateError(f"Bad rlimit name: {unknown[0]}")
    return frozenset(items)


def propagated(limits: str = "ALL", except_: str = "") -> frozenset[str]:
    """The limits slurm.conf propagates: PropagateResourceLimits (default ALL) less
    PropagateResourceLimitsExcept (a list; NONE or empty excepts nothing)."""
    chosen = parse_names(limits or "ALL")
    text = except_.strip()
    if text and text.upper() != "NONE":
        chosen = chosen - parse_names(text)
    return chosen


def _text(value: int) -> str:
    return INFINITY_TEXT if value == resource.RLIM_INFINITY or value < 0 else str(value)


def _value(text: str) -> int:
    number = int(text)
    return resource.RLIM_INFINITY if number >= 2**63 - 1 or number < 0 else number


def encode_caller(limits: Mapping[str, tuple[int, int]]) -> str:
    """The CALLER_VARIABLE value for `limits` (name -> (soft, hard))."""
    return ",".join(f"{n}={_text(s)}:{_text(h)}" for n, (s, h) in limits.items())


def decode_caller(text: str) -> dict[str, tuple[int, int]]:
    """CALLER_VARIABLE's value back; unknown or unreadable items are skipped."""
    out: dict[str, tuple[int, int]] = {}
    for item in text.split(","):
        name, _, pair = item.partition("=")
        soft, _, hard = pair.partition(":")
        if name in LIMITS:
            try:
                out[name] = (_value(soft), _value(hard or soft))
            except ValueError:
                continue
    return out


def take_caller_limits(env: MutableMapping[str, str]) -> list[str]:
    """In the command runner's child, which runs as the caller: remove CALLER_VARIABLE from `env`
    and take the caller's limits as this process's own (what the command would have run under had
    it been started by the caller's shell). A hard limit above this process's stays this one's.
    Returns the names that could not be set."""
    failed: list[str] = []
    for name, (soft, hard) in decode_caller(env.pop(CALLER_VARIABLE, "")).items():
        which = LIMITS[name]
        _cur_soft, cur_hard = resource.getrlimit(which)
        new_hard = hard if _le(hard, cur_hard) else cur_hard
        new_soft = soft if _le(soft, new_hard) else new_hard
        try:
            resource.setrlimit(which, (new_soft, new_hard))
        except (OSError, ValueError):
            failed.append(name)
    return failed


def _le(a: int, b: int) -> bool:
    """a <= b where RLIM_INFINITY is above every number."""
    if b == resource.RLIM_INFINITY:
        return True
    return a != resource.RLIM_INFINITY and a <= b


def submit_environment(propagate: str | None = None) -> dict[str, str]:
    """SLURM_RLIMIT_* for this process's soft limits, as sbatch/srun/salloc send them: every limit,
    the node's slurm.conf choosing; with --propagate (`propagate` not None), only those it names
    ("" = ALL), marked as asked for, whatever slurm.conf says."""
    names = frozenset(LIMITS) if propagate is None else parse_names(propagate)
    mark = "" if propagate is None else USER_MARK
    return {
        ENV_PREFIX + name: mark + _text(resource.getrlimit(which)[0])
        for name, which in LIMITS.items()
        if name in names
    }


def job_limits(env: MutableMapping[str, str], conf_propagated: frozenset[str]) -> dict[str, tuple[int, bool]]:
    """Take SLURM_RLIMIT_* out of a job's or step's environment: name -> (soft limit, asked for
    with --propagate), keeping those slurm.conf propagates and every one asked for."""
    out: dict[str, tuple[int, bool]] = {}
    for key in [k for k in env if k.startswith(ENV_PREFIX)]:
        text = env.pop(key)
        name = key[len(ENV_PREFIX) :]
        asked = text.startswith(USER_MARK)
        if name not in LIMITS or not (asked or name in conf_propagated):
            continue
        try:
            out[name] = (_value(text[1:] if asked else text), asked)
        except ValueError:
            continue
    return out


def memory_cap(mem_mb: int) -> int:
    """RLIMIT_RSS in bytes for the memory a job or step holds on the node (0 = none held: no cap).
    22.05 sets it, soft and hard, in every batch script and task: `sbatch --mem=2000` shows
    `ulimit -m` 2048000 (KiB), whatever the submitting shell's own RSS limit was."""
    return mem_mb * 1024 * 1024 if mem_mb > 0 else 0


def apply(limits: Mapping[str, tuple[int, bool]], memory: int = 0) -> list[str]:
    """Set each soft limit in this process (before exec, still root where the node is): one above
    the hard limit is lowered to it; then `memory` (bytes, memory_cap) as RSS's soft and hard limit,
    never above the hard one already set. Returns the messages for the job's stderr: a limit asked
    for with --propagate that could not be set as asked."""
    messages: list[str] = []
    for name, (soft, asked) in limits.items():
        which = LIMITS[name]
        _cur, hard = resource.getrlimit(which)
        value = soft if _le(soft, hard) else hard
        try:
            resource.setrlimit(which, (value, hard))
        except (OSError, ValueError) as exc:
            if asked:
                messages.append(f"Can't propagate RLIMIT_{name} of '{_text(soft)}' from submit host: {exc}")
            continue
        if asked and value != soft:
            messages.append(
                f"Can't propagate RLIMIT_{name} of '{_text(soft)}' from submit host: Operation not permitted"
            )
    if memory > 0:
        _cur, hard = resource.getrlimit(resource.RLIMIT_RSS)
        cap = memory if _le(memory, hard) else hard
        try:
            resource.setrlimit(resource.RLIMIT_RSS, (cap, cap))
        except (OSError, ValueError):
            pass  # as 22.05: the job runs without the cap
    return messages


def exec_argument(limits: Mapping[str, tuple[int, bool]], memory: int = 0) -> str:
    """The limits as noded/native/stepd_exec.c reads them (in EXEC_VARIABLE): "RESOURCE=SOFT[:u],..." (numbers;
    -1 = unlimited; ":u" = asked for with --propagate), then the memory cap, last (it wins over a
    propagated RSS), as "RESOURCE=BYTES:h" (soft and hard)."""
    items = []
    for name, (soft, asked) in limits.items():
        value = -1 if soft == resource.RLIM_INFINITY else soft
        items.append(f"{LIMITS[name]}={value}{':u' if asked else ''}")
    if memory > 0:
        items.append(f"{resource.RLIMIT_RSS}={memory}{MEMORY_MARK}")
    return ",".join(items)
