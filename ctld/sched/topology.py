"""topology/tree: which nodes a multi-node job tries, so that it spans the fewest switches.

As Slurm's tree plugin: of the switches with enough usable nodes for the job, the lowest level
is tried first and, at one level, the best fit (the fewest usable nodes that still suffice).
Under that switch the leaf switches are taken best fit too, so the job spans as few leaves as it
can. `--switches=N[@wait]` keeps only node sets within N leaf switches until the job has waited
`wait` (at most SchedulerParameters max_switch_wait), then takes any.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from ctld.sched.model import Config, JobRequest, Node, Switch, Topology


def node_groups(
    nodes: list[Node],
    needed: int,
    topo: Topology | None,
    usable: Callable[[Node], bool],
    max_leaves: int = 0,
) -> Iterator[list[Node]]:
    """Node lists to try in turn, best first; each keeps the candidates' order within a leaf.

    Without a topology, or for a one-node job, the one list is `nodes` itself. `usable` says
    whether a node can take at least the job's smallest per-node share.
    """
    if topo is None or needed < 2:
        yield nodes
        return
    fits = [node for node in nodes if usable(node)]
    names = frozenset(node.name for node in fits)
    eligible = sorted(
        ((switch.level, len(switch.nodes & names), switch.name, switch) for switch in topo.switches),
        key=lambda entry: entry[:3],
    )
    for _level, avail, _name, switch in eligible:
        if avail < needed:
            continue
        leaves = pick_leaves(switch, topo, names, needed)
        if max_leaves and len(leaves) > max_leaves:
            continue
        rank = {leaf: i for i, leaf in enumerate(leaves)}
        leaf_of = {name: leaf for leaf in leaves for name in topo.leaf_nodes[leaf]}
        chosen = sorted((n for n in fits if n.name in leaf_of), key=lambda n: rank[leaf_of[n.name]])
        if not max_leaves:  # the rest of the switch, should the chosen nodes not all fit after all
            chosen += [n for n in fits if n.name in switch.nodes and n.name not in leaf_of]
        yield chosen


def pick_leaves(switch: Switch, topo: Topology, usable: frozenset[str], needed: int) -> list[str]:
    """Leaf switches under `switch` holding `needed` usable nodes: the best-fitting leaf that
    suffices, else the largest, repeated until enough."""
    avail = {leaf: len(topo.leaf_nodes.get(leaf, frozenset()) & usable) for leaf in switch.leaves}
    picked: list[str] = []
    left = needed
    while left > 0:
        open_leaves = [leaf for leaf in switch.leaves if leaf not in picked and avail[leaf] > 0]
        if not open_leaves:
            break
        enough = [leaf for leaf in open_leaves if avail[leaf] >= left]
        leaf = min(enough, key=avail.__getitem__) if enough else max(open_leaves, key=avail.__getitem__)
        picked.append(leaf)
        left -= avail[leaf]
    return picked


def switch_request(job: JobRequest, now: int, config: Config) -> JobRequest:
    """The job as this cycle places it: its --switches count dropped once it has waited long enough."""
    if not job.max_switches:
        return job
    wait = config.max_switch_wait_s
    if job.switch_wait_s >= 0:
        wait = min(wait, job.switch_wait_s)
    if now >= max(job.submit_time, job.begin_time) + wait:
        return dataclasses.replace(job, max_switches=0)
    return job
