"""CPU of squeue's and sinfo's own Python in a fresh fork of a preloaded process, phase by phase.

    python bench/listing_fork.py [--queue 500] [--forks 9]

The command runner (cli/runner.py) preloads every command and forks a child per call; what a child
does for the first time costs copy-on-write page faults and any first-use work (a parser built, a
regex compiled) again in every fork. This preloads as the runner does (`cli.runner.preload`), builds
the controller's answers in-process (GetJobs as squeue's default format asks for it; the ctld harness: `--queue` held `sbatch --wrap`-like jobs with
a 41-variable environment, 20 of them running; 4 nodes, two partitions), then forks children that
parse an empty command line, choose the format, decode the answer and render it to /dev/null, and
print each phase's CPU (process time) and minor page faults, median over `--forks` children. The same
phases run over and over in this process give the warm figure (the least of six). No agent, no sockets: the agent call
and the fork itself are not in these figures (bench/listing_cpu.py has the whole call). Figures only.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: A/B against another tree

Phases = list[tuple[str, Callable[[], object]]]


def answers(queue: int) -> tuple[bytes, bytes]:
    """GetJobs and GetNodes(with_partitions) answers, serialised, from the real controller code."""
    from ctld.queries import get_jobs_wire, get_nodes
    from shoal.v1 import controller_pb2, jobs_pb2
    from tests.unit.ctld.harness import Harness, cluster, job

    env = {f"VAR_{i}": f"value {i} " * (i % 7) for i in range(41)}
    shape = cluster().nodes(4, cpus=16, mem=64000)
    shape.partition("batch", "n[1-4]", Default="YES").partition("debug", "n[1-4]", MaxTime="60")
    h = Harness.of(shape, Path(tempfile.mkdtemp()))
    for i in range(queue):
        b = job().held() if i >= 20 else job().cpus(1).time(10)
        b.spec.environment.update(env)
        b.spec.MergeFrom(jobs_pb2.JobSpec(name="wrap", work_dir="/tmp", std_out="/dev/null"))
        h.submit(b)
    h.schedule()
    h.advance(30)
    state = h.ctl.state
    try:  # as squeue asks with its default format: the brief listing, where this tree has one
        request = controller_pb2.GetJobsRequest(brief=True)
    except ValueError:
        request = controller_pb2.GetJobsRequest()
    jobs = get_jobs_wire(state, request)
    nodes = get_nodes(state, controller_pb2.GetNodesRequest(with_partitions=True)).SerializeToString()
    return jobs, nodes


def squeue_phases(data: bytes) -> Phases:
    from cli import squeue
    from shoal.v1 import controller_pb2

    box: dict[str, object] = {}

    def parse() -> None:
        parser = getattr(squeue, "PARSER", None) or squeue._parser()
        box["args"] = parser.parse_args([])

    def fields() -> None:
        args = box["args"]
        box["flt"] = squeue.build_filter(args)  # type: ignore[arg-type]
        box["fields"] = squeue.build_fields(*squeue._choose_format(args))  # type: ignore[arg-type]

    def decode() -> None:
        resp = controller_pb2.GetJobsResponse.FromString(data)
        box["jobs"], box["now"] = list(resp.jobs), resp.now

    def render() -> None:
        box["lines"] = squeue.render_queue(box["jobs"], box["now"], box["flt"], box["fields"])  # type: ignore[arg-type]

    return [
        ("parse", parse),
        ("fields", fields),
        ("decode", decode),
        ("render", render),
        ("write", lambda: _write(box)),
    ]


def sinfo_phases(data: bytes) -> Phases:
    from cli import sinfo
    from shoal.v1 import controller_pb2

    box: dict[str, object] = {}

    def parse() -> None:
        parser = getattr(sinfo, "PARSER", None) or sinfo._parser()
        box["args"] = parser.parse_args([])

    def fields() -> None:
        box["fields"] = sinfo.choose_format(box["args"])  # type: ignore[arg-type]
        box["flt"] = sinfo.build_filter(box["args"])  # type: ignore[arg-type]

    def decode() -> None:
        resp = controller_pb2.GetNodesResponse.FromString(data)
        box["parts"], box["nodes"] = list(resp.partitions), list(resp.nodes)

    def render() -> None:
        box["lines"] = sinfo.render_sinfo(box["parts"], box["nodes"], box["fields"], box["flt"])  # type: ignore[arg-type]

    return [
        ("parse", parse),
        ("fields", fields),
        ("decode", decode),
        ("render", render),
        ("write", lambda: _write(box)),
    ]


def _write(box: dict[str, object]) -> None:
    with open(os.devnull, "w") as out:
        out.write("".join(line + "\n" for line in box["lines"]))  # type: ignore[attr-defined]


def run_phases(phases: Phases) -> list[tuple[float, int]]:
    """(CPU ms, minor faults) of each phase, run once here."""
    out = []
    for _, fn in phases:
        t0, f0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        fn()
        out.append(
            ((time.process_time() - t0) * 1000, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        )
    return out


def in_forks(make: Callable[[], Phases], forks: int) -> list[list[tuple[float, int]]]:
    results = []
    for _ in range(forks):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            figures = run_phases(make())
            os.write(write, repr(figures).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            text = pipe.read().decode()
        os.waitpid(pid, 0)
        results.append(eval(text))  # our own child's repr of a list of tuples
    return results


def _in_a_child(make: Callable[[], tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    """Build the answers in a child: the controller code would compile regexes and warm caches here."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        first, second = make()
        with os.fdopen(write, "wb") as pipe:
            pipe.write(len(first).to_bytes(8, "little") + first + second)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    size = int.from_bytes(data[:8], "little")
    return data[8 : 8 + size], data[8 + size :]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queue", type=int, default=500)
    ap.add_argument("--forks", type=int, default=9)
    args = ap.parse_args()
    jobs, nodes = _in_a_child(lambda: answers(args.queue))  # leaves this process as the runner has it
    from cli import runner

    runner.preload()  # what the runner imports, then gc.freeze()
    print(f"load {os.getloadavg()[0]:.1f}; GetJobs {len(jobs)} bytes, GetNodes {len(nodes)} bytes")
    commands: list[tuple[str, Callable[[], Phases]]] = [
        ("squeue", lambda: squeue_phases(jobs)),
        ("sinfo", lambda: sinfo_phases(nodes)),
    ]
    for name, make in commands:
        results = in_forks(make, args.forks)
        labels = [label for label, _ in make()]
        cells = []
        for i, label in enumerate(labels):
            cpu = statistics.median(r[i][0] for r in results)
            faults = statistics.median(r[i][1] for r in results)
            cells.append(f"{label} {cpu:.2f} ms/{faults:.0f} faults")
        total = statistics.median(sum(c for c, _ in r) for r in results)
        warm_total = min(sum(c for c, _ in run_phases(make())) for _ in range(6))  # the first warms up
        print(
            f"{name:6} fresh fork: {', '.join(cells)}; total {total:.2f} ms (warm, in one process: {warm_total:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
