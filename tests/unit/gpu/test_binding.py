"""A task's GPUs under --gpu-bind and --gpus-per-task, and the CUDA_VISIBLE_DEVICES it gets."""

from __future__ import annotations

import pytest

from noded.gpu.binding import GpuBindError, parse_gpu_bind, split_cpus, task_gpus, visible_devices

JOB = [2, 3, 6, 7]
AFFINITY = {2: range(0, 8), 3: range(0, 8), 6: range(8, 16), 7: range(8, 16)}

CASES = [
    ("all", dict(bind=""), [JOB] * 4),
    ("per-task-1", dict(gpus_per_task=1), [[2], [3], [6], [7]]),
    ("per-task-2", dict(gpus_per_task=2), [[2, 3], [6, 7], JOB, JOB]),
    ("single-2", dict(bind="single:2"), [[2], [2], [3], [3]]),
    ("map-gpu", dict(bind="map_gpu:3,0"), [[7], [2], [7], [2]]),
    ("closest", dict(bind="closest"), [[2, 3], [2, 3], [6, 7], [6, 7]]),
    ("none", dict(bind="none"), [JOB] * 4),
]


@pytest.mark.parametrize(("kw", "want"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_task_gpus(kw: dict[str, object], want: list[list[int]]) -> None:
    task_cpus = [range(0, 4), range(4, 8), range(8, 12), range(12, 16)]
    got = [
        task_gpus(
            JOB, i, 4, task_cpus=list(task_cpus[i]), gpu_cpus={k: list(v) for k, v in AFFINITY.items()}, **kw
        )  # type: ignore[arg-type]
        for i in range(4)
    ]
    assert got == want


def test_visible_devices_count_from_zero_when_constrained() -> None:
    assert visible_devices(JOB, [6, 7], devices_constrained=True) == "2,3"
    assert visible_devices(JOB, [6, 7], devices_constrained=False) == "6,7"
    assert visible_devices(JOB, JOB, devices_constrained=True) == "0,1,2,3"


@pytest.mark.parametrize("text", ["single:0", "map_gpu:", "bogus", "single:x", "map_gpu:-1"])
def test_bad_gpu_bind(text: str) -> None:
    with pytest.raises(GpuBindError, match="Invalid --gpu-bind argument"):
        parse_gpu_bind(text)


def _affinity(description: str) -> dict[int, list[int]]:
    from noded.gpu.fake_nvml import FakeNvml, parse_cpu_list

    gpus = FakeNvml.load(description).description["gpus"]
    return {i: parse_cpu_list(str(g["cpu_affinity"])) for i, g in enumerate(gpus)}


@pytest.mark.parametrize(
    ("description", "step_gpus", "step_cpus", "tasks", "want"),
    [
        # DGX H100: GPUs 0-3 on CPUs 0-55 (socket 0), 4-7 on 56-111 (socket 1)
        ("dgx_h100", list(range(8)), list(range(0, 112)), 2, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (
            "dgx_h100",
            list(range(8)),
            [*range(0, 4), *range(56, 60)],
            4,
            [[0, 1, 2, 3]] * 2 + [[4, 5, 6, 7]] * 2,
        ),
        ("dgx_h100", [2, 5], [*range(0, 8), *range(56, 64)], 2, [[2], [5]]),
        ("dgx_h100", [4, 5], list(range(0, 8)), 2, [[4, 5], [4, 5]]),  # no GPU near: all the step's
        # PCIe A100: two NUMA domains, GPUs 0-3 on CPUs 0-31 and 4-7 on 32-63
        ("pcie_a100", [0, 1, 4, 5], [*range(0, 2), *range(32, 34)], 4, [[0, 1], [0, 1], [4, 5], [4, 5]]),
        ("pcie_a100", [0, 4], list(range(0, 64)), 1, [[0, 4]]),
    ],
    ids=[
        "dgx-one-task-per-socket",
        "dgx-two-tasks-per-socket",
        "dgx-step-subset",
        "dgx-none-near",
        "pcie-numa",
        "pcie-one-task-spans-both",
    ],
)
def test_closest_binds_tasks_to_gpus_near_their_cpus(
    description: str, step_gpus: list[int], step_cpus: list[int], tasks: int, want: list[list[int]]
) -> None:
    affinity = _affinity(description)
    blocks = split_cpus(step_cpus, tasks)
    got = [
        task_gpus(step_gpus, i, tasks, bind="closest", task_cpus=blocks[i], gpu_cpus=affinity)
        for i in range(tasks)
    ]
    assert got == want


def test_map_gpu_repetition() -> None:
    assert parse_gpu_bind("map_gpu:0*2,1*2") == ("map_gpu", [0, 0, 1, 1])
