"""The controller's usage ledger: what jobs are charged (fair-share billing, GrpTRESMins/GrpWall minutes)."""

from __future__ import annotations

import pytest

from ctld.fairshare_usage import Charge, UsageLedger
from ctld.sched.model import UsedMinutes
from shoal.conf.slurm import parse_slurm_conf

GPU_JOB = {"cpu": 4.0, "gres/gpu": 2.0, "mem": 1000.0, "node": 1.0}


def ledger(extra: str = "") -> UsageLedger:
    return UsageLedger(
        parse_slurm_conf("ClusterName=c\nNodeName=n1 CPUs=4\nPartitionName=p Nodes=n1\n" + extra)
    )


def test_a_running_job_is_charged_per_tres_for_its_association_and_qos() -> None:
    led = ledger("PriorityDecayHalfLife=0\n")
    led.accrue(1000, [])
    led.accrue(1600, [Charge(assoc_id=2, qos="normal", tres=GPU_JOB, start=900)])
    assocs, qos = led.used_minutes()
    assert assocs == {2: UsedMinutes(cpu=40.0, gpu=20.0, wall=10.0)}
    assert qos == {"normal": UsedMinutes(cpu=40.0, gpu=20.0, wall=10.0)}
    assert led.usage == {2: 4 * 600.0}  # fair-share billing: CPUs without TRESBillingWeights


def test_only_the_part_of_a_job_since_the_last_pass_counts() -> None:
    led = ledger("PriorityDecayHalfLife=0\n")
    led.accrue(1000, [])
    ended = Charge(assoc_id=2, qos="normal", tres={"cpu": 1.0}, start=900, end=1300)  # ended between passes
    started = Charge(assoc_id=3, qos="normal", tres={"cpu": 1.0}, start=1540)
    led.accrue(1600, [ended, started])
    assocs, _ = led.used_minutes()
    assert assocs == {2: UsedMinutes(cpu=5.0, wall=5.0), 3: UsedMinutes(cpu=1.0, wall=1.0)}
    led.accrue(1660, [ended])  # already charged in full
    assert led.used_minutes()[0][2] == UsedMinutes(cpu=5.0, wall=5.0)


def test_usage_decays_with_the_half_life_and_scales_with_the_usage_factor() -> None:
    led = ledger("PriorityDecayHalfLife=00:10:00\n")
    led.accrue(1000, [])
    led.accrue(
        1600, [Charge(assoc_id=2, qos="cheap", tres={"cpu": 2.0}, start=1000, end=1600, usage_factor=0.5)]
    )
    assert led.used_minutes()[0][2].cpu == pytest.approx(10.0)
    led.accrue(2200, [])  # one half-life later
    assert led.used_minutes()[0][2].cpu == pytest.approx(5.0)
    assert led.used_minutes()[1]["cheap"].wall == pytest.approx(2.5)


def test_the_ledger_survives_a_dump_and_load() -> None:
    led = ledger()
    led.accrue(1000, [])
    led.accrue(1060, [Charge(assoc_id=2, qos="normal", tres=GPU_JOB, start=1000)])
    again = ledger()
    again.load(led.dump())
    assert again.used_minutes() == led.used_minutes() and again.usage == led.usage and again.last == 1060


def test_a_ledger_seeded_from_dbd_adds_its_cpu_and_gpu_seconds() -> None:
    led = ledger()
    led.awaits_seed = True
    led.seed({2: (600.0, 60.0)})
    assert led.usage == {2: 600.0} and not led.awaits_seed  # billing: CPUs without weights
    assert led.used_minutes()[0] == {2: UsedMinutes(cpu=10.0, gpu=1.0)}


def test_fair_share_billing_uses_the_jobs_partition_weights() -> None:
    """TRESBillingWeights is a partition key: a GPU partition can bill GPUs heavily, another only CPUs."""
    led = UsageLedger(
        parse_slurm_conf(
            "ClusterName=c\nPriorityDecayHalfLife=0\nNodeName=n1 CPUs=4\n"
            "PartitionName=gpu Nodes=n1 TRESBillingWeights=CPU=1.0,GRES/gpu=10.0\n"
            "PartitionName=cpu Nodes=n1 Default=YES\n"
        )
    )
    led.accrue(1000, [])
    led.accrue(
        1100,
        [
            Charge(assoc_id=2, qos="normal", tres=GPU_JOB, start=1000, partition="gpu"),
            Charge(assoc_id=3, qos="normal", tres=GPU_JOB, start=1000, partition="cpu"),
        ],
    )
    assert led.usage == {2: (4 + 2 * 10) * 100.0, 3: 4 * 100.0}


def test_rawusage_0_clears_the_associations_given_and_a_running_job_counts_again_from_then() -> None:
    """sacctmgr ... set RawUsage=0 (ctld/usage_reset.py): the usage and TRES minutes of those
    associations (and QOS) go; others' stay; the next pass charges a running job only from the reset."""
    led = ledger("PriorityDecayHalfLife=0\n")
    running = Charge(assoc_id=2, qos="normal", tres={"cpu": 1.0}, start=900)
    other = Charge(assoc_id=3, qos="high", tres={"cpu": 1.0}, start=900)
    led.accrue(1000, [])
    led.accrue(1600, [running, other])
    led.reset([2], ["normal"])
    assert led.usage == {3: 600.0}
    assert set(led.used_minutes()[1]) == {"high"}
    led.accrue(1660, [running])
    assert led.usage == {2: 60.0, 3: 600.0}
