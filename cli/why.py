"""`shoal why [--json] JOBID`: why a job waits, when it would start, and what would start it sooner.

A short command (the same light imports as squeue): ctld's Why read through the local agent, which
runs the scheduler's own explainer (ctld/sched/explain.py). Exit 1 for a job that is not (or no
longer) known, or not yours (as scontrol's `Invalid job id specified`), and for an ended job.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from cli.common import CommandError, ctld
from shoal.states import FINISHED_STATES, job_state_name
from shoal.v1 import controller_pb2 as pb

PROG = "shoal why"
USAGE = "usage: shoal why [--json] JOBID"
HELP = f"""{USAGE}

Say why a job waits (Slurm's reason and, in plain words, which resources on which nodes are held by
which jobs until when, which limit, which jobs rank ahead, dependencies, holds), when and where it
is planned to start, and which changes would start it sooner, each checked by the scheduler.

options:
  --json      the answer as JSON (the keys of shoal-restd's /shoal/v1/why/JOBID)
  -h, --help  show this help"""
ENDED = frozenset(job_state_name(state) for state in FINISHED_STATES)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = False
    ids: list[str] = []
    for arg in args:
        if arg in ("-h", "--help"):
            print(HELP)
            return 0
        if arg == "--json":
            as_json = True
        elif arg.startswith("-"):
            print(f"{PROG}: error: unrecognized option '{arg}'\n{USAGE}", file=sys.stderr)
            return 2
        else:
            ids.append(arg)
    if len(ids) != 1:
        print(
            f"{PROG}: error: {'one JOBID is needed' if not ids else 'only one JOBID, please'}\n{USAGE}",
            file=sys.stderr,
        )
        return 2
    try:
        resp = ctld("Why", pb.WhyRequest(job_id=ids[0]), pb.WhyResponse)
    except CommandError as exc:
        print(f"slurm_load_jobs error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if as_json:
        from shoal.why_view import as_json as view

        print(json.dumps(view(resp), indent=2))
    else:
        print(resp.text)
    return 1 if resp.state in ENDED else 0


if __name__ == "__main__":
    sys.exit(main())
