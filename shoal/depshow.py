"""A job's --dependency as Slurm 22.05 shows it (scontrol show job `Dependency=`, squeue `%E`).

22.05 keeps one element per job it waits for, each with its state: `-d afterok:12:12` shows
`afterok:12(unfulfilled)`, `-d after:5+3:6` shows `after:5+3(unfulfilled),after:6+3(unfulfilled)`; a job
that is no longer pending shows `(null)`. Fulfilled elements of a list vanish there as they are
met; ctld does not send per-element states, so a pending job's elements all show `(unfulfilled)`,
except the one element of a job whose dependency can never be satisfied, `(failed)`.
"""

from __future__ import annotations

import re

_REF = re.compile(r"^(\d+(?:_(?:\d+|\*))?)(?:\+(\d+))?$")


def elements(text: str) -> tuple[list[str], str]:
    """'afterok:12:12,after:5+3:6' -> (['afterok:12', 'after:5+3', 'after:6+3'], ','): one element per
    job waited for, each once, and the separator ('?' for any-of)."""
    sep = "?" if "?" in text else ","
    out: list[str] = []
    for term in (t.strip() for t in text.split(sep)):
        if not term:
            continue
        if term == "singleton" or _REF.match(term):  # a bare id is afterany
            items = [term] if term == "singleton" else [f"afterany:{term}"]
        else:
            kind, _, refs = term.partition(":")
            matches = [_REF.match(r) for r in refs.split(":") if r]
            if not all(matches):
                items = [term]  # not a form ctld accepts; shown as given
            else:
                plus = next((m.group(2) for m in matches if m and m.group(2)), None)
                items = [f"{kind}:{m.group(1)}" + (f"+{plus}" if plus else "") for m in matches if m]
        out.extend(i for i in items if i not in out)
    return out, sep


def shown_dependency(text: str, pending: bool, never: bool) -> str:
    """The Dependency value of a job whose --dependency was `text`; `never`: its reason is
    DependencyNeverSatisfied."""
    if not text or not pending:
        return "(null)"
    items, sep = elements(text)
    if not items:
        return "(null)"
    state = "(failed)" if never and len(items) == 1 else "(unfulfilled)"
    return sep.join(f"{item}{state}" for item in items)
