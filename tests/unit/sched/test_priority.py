"""priority/multifactor against hand-computed values of Slurm's formula.

The cluster: 4 nodes x 16 CPUs x 8 GPUs (64 CPUs, 32 GPUs, 256,000 MB). PriorityMaxAge = 1 day.
Each row gives the weights, the job and the expected integer priority with the arithmetic.
"""

from __future__ import annotations

import dataclasses

import pytest

from ctld.priority_config import priority_config
from ctld.sched.cycle import run_cycle
from ctld.sched.model import UNLIMITED, Config, JobRequest, Partition, PriorityConfig, PriorityInputs
from ctld.sched.priority import BASE_PRIORITY, all_priorities, running_priorities
from shoal.conf.slurm import parse_slurm_conf
from tests.unit.sched.builders import cluster, job, snapshot

NOW = 1_000_000
DAY = 86_400
NODES = cluster(4)
NAMES = tuple(n.name for n in NODES)
PARTS = (
    Partition("batch", NAMES, max_time_min=UNLIMITED, priority_job_factor=1),
    Partition("prio", NAMES, max_time_min=UNLIMITED, priority_job_factor=4),
)
INPUTS = PriorityInputs(
    qos_priority={"normal": 0, "mid": 50, "high": 100},
    assoc_priority={7: 10, 8: 40},
    fairshare={7: 0.5, 8: 0.25},
)


def _conf(**weights: object) -> PriorityConfig:
    return dataclasses.replace(PriorityConfig(type="priority/multifactor", max_age_s=DAY), **weights)  # type: ignore[arg-type]


def _priority(conf: PriorityConfig, req: JobRequest) -> int:
    snap = snapshot(NODES, [req], partitions=PARTS, config=Config(def_mem_per_cpu_mb=1000, priority=conf))
    snap = dataclasses.replace(snap, priority_inputs=INPUTS)
    return all_priorities(snap, NOW)[req.job_id]


def _at(age_s: int) -> int:
    return NOW - age_s


CASES = [
    # age: (now - eligible) / PriorityMaxAge, at most 1
    ("age-half", _conf(weight_age=1000), job(1).submitted(_at(DAY // 2)).obj(), 500),
    ("age-saturates", _conf(weight_age=1000), job(1).submitted(_at(2 * DAY)).obj(), 1000),
    ("age-from-begin", _conf(weight_age=1000), job(1).submitted(_at(DAY)).begin(_at(DAY // 4)).obj(), 250),
    ("age-future-begin", _conf(weight_age=1000), job(1).submitted(_at(DAY)).begin(NOW + 60).obj(), 1),
    # job size: ((1/4 nodes) + (4/64 CPUs)) / 2 = 0.15625 -> 156.25
    ("size", _conf(weight_job_size=1000), job(1).submitted(NOW).tasks(4).obj(), 156),
    # favor small: ((1 - 1/4) + (1 - 4/64)) / 2 = 0.84375
    (
        "size-favor-small",
        _conf(weight_job_size=1000, favor_small=True),
        job(1).submitted(NOW).tasks(4).obj(),
        843,
    ),
    ("size-whole-cluster", _conf(weight_job_size=1000), job(1).submitted(NOW).nodes(4).tasks(64).obj(), 1000),
    (
        "size-whole-cluster-favor-small",
        _conf(weight_job_size=1000, favor_small=True),
        job(1).submitted(NOW).nodes(4).tasks(64).obj(),
        1,
    ),
    # SMALL_RELATIVE_TO_TIME: max(1 node x 64/4 CPUs, 4 CPUs) = 16; 16 / 60 min / 64 CPUs = 0.0041667
    (
        "size-relative-to-time",
        _conf(weight_job_size=1000, flags=frozenset({"SMALL_RELATIVE_TO_TIME"})),
        job(1).submitted(NOW).tasks(4).time(60).obj(),
        4,
    ),
    (
        "size-relative-to-time-favor-small",
        _conf(weight_job_size=1000, favor_small=True, flags=frozenset({"SMALL_RELATIVE_TO_TIME"})),
        job(1).submitted(NOW).tasks(4).time(60).obj(),
        995,
    ),
    # partition: PriorityJobFactor / the largest (4)
    ("partition-low", _conf(weight_partition=1000), job(1).submitted(NOW).obj(), 250),
    ("partition-high", _conf(weight_partition=1000), job(1).submitted(NOW).partition("prio").obj(), 1000),
    (
        "partition-no-normal",
        _conf(weight_partition=10, flags=frozenset({"NO_NORMAL_PART"})),
        job(1).submitted(NOW).partition("prio").obj(),
        40,
    ),
    # QOS: Priority / the largest QOS Priority (100)
    ("qos-mid", _conf(weight_qos=1000), dataclasses.replace(job(1).submitted(NOW).obj(), qos="mid"), 500),
    ("qos-high", _conf(weight_qos=1000), dataclasses.replace(job(1).submitted(NOW).obj(), qos="high"), 1000),
    (
        "qos-no-normal",
        _conf(weight_qos=3, flags=frozenset({"NO_NORMAL_QOS"})),
        dataclasses.replace(job(1).submitted(NOW).obj(), qos="mid"),
        150,
    ),
    # association: Priority / the largest association Priority (40)
    ("assoc", _conf(weight_assoc=1000), dataclasses.replace(job(1).submitted(NOW).obj(), assoc_id=7), 250),
    # fair-share: the association's factor (siblings 0.5 and 0.25)
    (
        "fairshare-a",
        _conf(weight_fairshare=10000),
        dataclasses.replace(job(1).submitted(NOW).obj(), assoc_id=7),
        5000,
    ),
    (
        "fairshare-b",
        _conf(weight_fairshare=10000),
        dataclasses.replace(job(1).submitted(NOW).obj(), assoc_id=8),
        2500,
    ),
    # TRES: 8 CPUs of 64 x 1000 + 4 GPUs of 32 x 2000 = 125 + 250
    (
        "tres",
        _conf(weight_tres=(("cpu", 1000.0), ("gres/gpu", 2000.0))),
        job(1).submitted(NOW).tasks(8).gpus_per_node(4).obj(),
        375,
    ),
    (
        "tres-no-normal",
        _conf(weight_tres=(("gres/gpu", 100.0),), flags=frozenset({"NO_NORMAL_TRES"})),
        job(1).submitted(NOW).gpus_per_node(4).obj(),
        400,
    ),
    # nice is subtracted; negative nice (admins) adds
    ("nice", _conf(weight_age=1000), job(1).submitted(_at(DAY // 2)).nice(100).obj(), 400),
    ("negative-nice", _conf(weight_age=1000), job(1).submitted(_at(DAY // 2)).nice(-50).obj(), 550),
    # everything: 500 (age) + 187.5 (size: (1/4 + 8/64) / 2) + 1000 (partition) + 500 (qos) + 375 (tres) = 2562.5
    (
        "all-factors",
        _conf(
            weight_age=1000,
            weight_job_size=1000,
            weight_partition=1000,
            weight_qos=1000,
            weight_tres=(("cpu", 1000.0), ("gres/gpu", 2000.0)),
        ),
        dataclasses.replace(
            job(1)
            .submitted(_at(DAY // 2))
            .tasks(4)
            .cpus_per_task(2)
            .gpus_per_node(4)
            .partition("prio")
            .obj(),
            qos="mid",
        ),
        2562,
    ),
    # SiteFactor (operators) is added as is, weight 1; a large negative one clamps at 1
    (
        "site",
        _conf(weight_age=1000),
        dataclasses.replace(job(1).submitted(_at(DAY // 2)).obj(), site_factor=700),
        1200,
    ),
    (
        "site-negative",
        _conf(weight_age=1000),
        dataclasses.replace(job(1).submitted(_at(DAY // 2)).obj(), site_factor=-2_147_483_645),
        1,
    ),
    # an admin's Priority= wins
    ("admin", _conf(weight_age=1000), job(1).submitted(_at(DAY)).priority(42).obj(), 42),
    # priority/basic: first in, first out
    ("basic", PriorityConfig(), job(5).obj(), BASE_PRIORITY - 5),
]


@pytest.mark.parametrize(("conf", "req", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_multifactor(conf: PriorityConfig, req: JobRequest, expected: int) -> None:
    assert _priority(conf, req) == expected


def test_order_follows_priority() -> None:
    """One free node: the job with the larger multifactor priority starts although it came later."""
    conf = _conf(weight_tres=(("gres/gpu", 1000.0),))
    first = job(1).nodes(1).tasks(16).obj()
    second = job(2).nodes(1).tasks(16).gpus_per_node(8).obj()
    snap = snapshot(NODES[:1], [first, second], config=Config(def_mem_per_cpu_mb=1000, priority=conf))
    result = run_cycle(snap, NOW)
    assert [s.job_id for s in result.starts] == [2]
    assert result.priorities == {1: 1, 2: 1000}


def test_tier_before_priority() -> None:
    """A higher PriorityTier partition's job goes first whatever the priorities."""
    parts = (
        Partition("low", NAMES[:1], max_time_min=UNLIMITED, priority_tier=1),
        Partition("high", NAMES[:1], max_time_min=UNLIMITED, priority_tier=2),
    )
    conf = _conf(weight_age=1000)
    old = job(1).nodes(1).tasks(16).partition("low").submitted(_at(DAY)).obj()
    new = job(2).nodes(1).tasks(16).partition("high").submitted(NOW).obj()
    snap = snapshot(
        NODES[:1], [old, new], partitions=parts, config=Config(def_mem_per_cpu_mb=1000, priority=conf)
    )
    assert [s.job_id for s in run_cycle(snap, NOW).starts] == [2]


CONF_CASES = [
    ("defaults", "", PriorityConfig()),
    (
        "multifactor",
        "PriorityType=priority/multifactor\nPriorityWeightAge=1000\nPriorityWeightFairshare=2000\n"
        "PriorityWeightJobSize=3\nPriorityWeightPartition=4\nPriorityWeightQOS=5\nPriorityWeightAssoc=6\n"
        "PriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000\nPriorityMaxAge=1-0\nPriorityFavorSmall=YES\n"
        "PriorityFlags=SMALL_RELATIVE_TO_TIME,NO_NORMAL_ALL\n",
        PriorityConfig(
            type="priority/multifactor",
            weight_age=1000,
            weight_fairshare=2000,
            weight_job_size=3,
            weight_partition=4,
            weight_qos=5,
            weight_assoc=6,
            weight_tres=(("cpu", 1000.0), ("mem", 2000.0), ("gres/gpu", 3000.0)),
            max_age_s=DAY,
            favor_small=True,
            flags=frozenset(
                {
                    "SMALL_RELATIVE_TO_TIME",
                    "NO_NORMAL_ALL",
                    "NO_NORMAL_ASSOC",
                    "NO_NORMAL_PART",
                    "NO_NORMAL_QOS",
                    "NO_NORMAL_TRES",
                }
            ),
        ),
    ),
    ("bad-values-keep-defaults", "PriorityWeightAge=lots\nPriorityMaxAge=soon\n", PriorityConfig()),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CONF_CASES], ids=[c[0] for c in CONF_CASES])
def test_priority_config(text: str, expected: PriorityConfig) -> None:
    cfg = parse_slurm_conf("ClusterName=c\nNodeName=n1 CPUs=4\nPartitionName=p Nodes=n1\n" + text)
    assert priority_config(cfg) == expected


@pytest.mark.parametrize(
    ("flags", "expected"),
    [(frozenset({"CALCULATE_RUNNING"}), {1: 500}), (frozenset(), {})],
    ids=["calculate-running", "default"],
)
def test_running_priorities(flags: frozenset[str], expected: dict[int, int]) -> None:
    conf = _conf(weight_age=1000, flags=flags)
    snap = snapshot(NODES, [], partitions=PARTS, config=Config(def_mem_per_cpu_mb=1000, priority=conf))
    running = job(1).submitted(_at(DAY // 2)).obj()
    assert running_priorities(snap, [running], NOW) == expected
