"""`scontrol reconfigure` and SIGHUP: re-read slurm.conf (gres.conf, topology.conf, cgroup.conf), check
all of it, then swap it in with every view ctld derived from it, in one locked change.

Nothing changes unless everything is usable: a file that does not parse is refused with its
file:line, a key that only a restart can change is refused by name (the list follows Slurm 23.11's
slurm.conf(5): ports, hosts, auth, the state location, the node set and node addresses), and the
old configuration keeps running. A pending job whose partition is gone ends NODE_FAIL, as Slurm's
reset_job_bitmaps does; a partition that still runs jobs cannot be removed (shoal keeps them safe).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ctld import configless, gpu_idle, transitions
from ctld.errors import FAILED_PRECONDITION, SlurmError
from ctld.nodes import new_runtime
from ctld.record import JobRecord
from ctld.sched_config import batch_sched_delay_s, bf_interval_s, sched_config, scheduler_parameters
from ctld.sched_config import partitions as sched_partitions
from ctld.sched_config import topology as sched_topology
from ctld.state import ClusterState, group_members
from ctld.validate import limits_from as submit_limits
from shoal.conf import SlurmConfig, load_slurm_conf
from shoal.conf.cgroup import load_cgroup_conf
from shoal.conf.errors import ConfigError
from shoal.v1 import jobs_pb2

log = logging.getLogger("shoal.ctld")

# (slurm.conf key, how to read it): what a running ctld cannot take without a restart
FIXED: tuple[tuple[str, Callable[[SlurmConfig], Any]], ...] = (
    ("ClusterName", lambda c: c.cluster_name),
    ("SlurmctldHost", lambda c: (c.control_machine, c.control_hosts)),
    ("ControlAddr", lambda c: c.control_addr),
    ("SlurmctldPort", lambda c: c.slurmctld_port),
    ("SlurmdPort", lambda c: c.slurmd_port),
    ("SlurmUser", lambda c: c.slurm_user),
    ("SlurmdUser", lambda c: c.slurmd_user),
    ("AuthType", lambda c: c.auth_type),
    ("AuthAltTypes", lambda c: c.auth_alt_types),
    ("AuthKeyFile", lambda c: c.auth_key_file),
    ("StateSaveLocation", lambda c: c.state_save_location),
    ("ShoalStateStore", lambda c: c.state_store),
    ("AccountingStorageType", lambda c: c.accounting_storage_type),
    ("AccountingStorageHost", lambda c: c.accounting_storage_host),
    ("AccountingStoragePort", lambda c: c.accounting_storage_port),
    ("GresTypes", lambda c: c.gres_types),
    ("SchedulerType", lambda c: c.scheduler_type),  # 22.05 keeps the old one too (INVALID_SCHEDTYPE_CHANGE)
    ("SelectType", lambda c: c.select_type),
    ("ProctrackType", lambda c: c.proctrack_type),
    ("TaskPlugin", lambda c: c.task_plugin),
)


@dataclass(frozen=True)
class Outcome:
    """What a reconfigure applied: the keys and partitions that differ, the pending jobs it ended."""

    changed: tuple[str, ...]
    failed_jobs: tuple[int, ...]


def load(path: str) -> SlurmConfig:
    """slurm.conf and its siblings read afresh; SlurmError (with file:line) when any is unusable."""
    try:
        cfg = load_slurm_conf(path)
        cgroup = os.path.join(os.path.dirname(path), "cgroup.conf")
        if os.path.exists(cgroup):
            load_cgroup_conf(cgroup)  # noded reads it; ctld only refuses a broken one for all of them
    except ConfigError as exc:
        raise SlurmError(str(exc), FAILED_PRECONDITION) from exc
    except OSError as exc:
        raise SlurmError(f"{path}: {exc.strerror or exc}", FAILED_PRECONDITION) from exc
    return cfg


def refusals(old: SlurmConfig, new: SlurmConfig) -> list[str]:
    """Why `new` cannot replace `old` in a running ctld (empty: it can)."""
    out = [
        f"{key} changed ({_show(read(old))} -> {_show(read(new))}): a restart of shoal-ctld is required"
        for key, read in FIXED
        if read(old) != read(new)
    ]
    old_nodes = {n.name: n for n in old.nodes}
    new_nodes = {n.name: n for n in new.nodes}
    added, removed = sorted(set(new_nodes) - set(old_nodes)), sorted(set(old_nodes) - set(new_nodes))
    if added or removed:
        what = ", ".join([*(f"{n} added" for n in added), *(f"{n} removed" for n in removed)])
        out.append(
            f"NodeName set changed ({what}): adding or removing nodes requires a restart of all daemons"
        )
    for name in sorted(set(old_nodes) & set(new_nodes)):
        a, b = old_nodes[name], new_nodes[name]
        for key, x, y in (
            ("NodeAddr", a.addr, b.addr),
            ("NodeHostname", a.hostname, b.hostname),
            ("Port", old.slurmd_port_of(a), new.slurmd_port_of(b)),
        ):
            if x != y:
                out.append(f"{key} of node {name} changed ({x} -> {y}): a restart is required")
    return out


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value if v) or "(null)"
    return str(value) if value not in ("", None) else "(null)"


def changed_keys(old: SlurmConfig, new: SlurmConfig) -> tuple[str, ...]:
    """Top-level keys and partitions/nodes that differ (for the log)."""
    before, after = dict(_lower(old.entries)), dict(_lower(new.entries))
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    parts_old = {p.name: p for p in old.partitions}
    parts_new = {p.name: p for p in new.partitions}
    parts = sorted(
        n for n in parts_old.keys() | parts_new.keys() if _plain(parts_old.get(n)) != _plain(parts_new.get(n))
    )
    nodes = sorted(n.name for n in new.nodes if _plain(old.node(n.name)) != _plain(n))
    return (
        *(before.get(k, after.get(k, ("", "")))[0] for k in keys),
        *(f"PartitionName={n}" for n in parts),
        *(f"NodeName={n}" for n in nodes),
    )


def _lower(entries: tuple[tuple[str, str], ...]) -> list[tuple[str, tuple[str, str]]]:
    return [(k.lower(), (k, v)) for k, v in entries]


def _plain(conf: object) -> object:
    """A NodeConf/PartitionConf without its source (file:line moves when lines are added)."""
    if conf is None:
        return None
    return {k: v for k, v in vars(conf).items() if k != "source"}


def reconfigure(state: ClusterState) -> Outcome:
    """Re-read state.cfg's files and apply them; SlurmError (nothing changed) when they are refused."""
    new = load(state.cfg.path)
    with state.transaction() as tx:
        old = state.cfg
        problems = refusals(old, new)
        gone = {p.name for p in old.partitions} - {p.name for p in new.partitions}
        busy = sorted(
            {
                j.partition
                for j in state.jobs.values()
                if j.state in (jobs_pb2.RUNNING, jobs_pb2.SUSPENDED) and _parts(j) <= gone
            }
        )
        problems += [f"PartitionName={name} removed while it runs jobs: drain it first" for name in busy]
        if problems:
            raise SlurmError("; ".join(problems), FAILED_PRECONDITION)
        now = state.now()
        failed = []
        for job in state.jobs.values():
            if job.state == jobs_pb2.PENDING and _parts(job) and _parts(job) <= gone:
                log.error(
                    "reconfigure: partition %s of pending job %d is gone: the job fails",
                    job.partition,
                    job.job_id,
                )
                transitions.finish(state, job, jobs_pb2.NODE_FAIL, 0, 0, now)
                tx.save(job)
                failed.append(job.job_id)
        for name, node in state.nodes.items():
            conf = new.node(name)
            if conf is None:
                continue
            fresh = new_runtime(new, conf, node.info.SerializeToString())
            fresh.info.not_responding = node.info.not_responding
            fresh.info.base_state = node.info.base_state
            node.conf, node.info = conf, fresh.info
            node.gpu_types = fresh.gpu_types if not node.registered else {**fresh.gpu_types, **node.gpu_types}
            tx.save_node(node)
        apply(state, new)
        for node in state.nodes.values():
            if (
                node.registered and not node.info.not_responding
            ):  # slurmctld's REQUEST_RECONFIGURE to each slurmd
                tx.after(partial(state.actions.reconfigure, node.info))
        state.wake.set()
    outcome = Outcome(changed=changed_keys(old, new), failed_jobs=tuple(failed))
    log.info("reconfigure: %s read again; changed: %s", new.path, ", ".join(outcome.changed) or "nothing")
    return outcome


def _parts(job: JobRecord) -> set[str]:
    return {p for p in job.partition.split(",") if p}


def apply(state: ClusterState, cfg: SlurmConfig) -> None:
    """Swap `cfg` in with every view derived from it (the same ones ClusterState builds at start)."""
    state.cfg = cfg
    state.partitions = {p.name: p for p in cfg.partitions}
    state.partitions_view = sched_partitions(cfg, partial(group_members, {0, state.slurm_uid}))
    state.sched_config = sched_config(cfg)
    state.bf_interval = bf_interval_s(cfg)
    state.batch_sched_delay = batch_sched_delay_s(cfg)
    state.gpu_idle_policy = gpu_idle.policy_from(scheduler_parameters(cfg.scheduler_parameters))
    state.submit_limits = submit_limits(cfg.max_array_size, cfg.scheduler_parameters)
    state.topology = sched_topology(cfg)
    state.shares.configure(cfg)
    state.accounting.configure(cfg)
    state.config_files = configless.snapshot(cfg)
    state.drop_requests()  # pending jobs' JobRequests were built with the old partitions and nodes
