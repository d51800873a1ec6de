"""Job cgroups for real: v1 where this machine has it (as root), v2's BPF device filter where a
cgroup2 hierarchy is mounted; each skips with the reason otherwise."""

from __future__ import annotations

import errno
import os
import time
import uuid
from pathlib import Path

import pytest

from noded.cgroup import CgroupRequest, JobCgroup, detect_version
from noded.cgroup.bpf import DEV_CHAR, deny_program
from noded.isolation import Isolation, cgroup_request, real_cpus
from shoal.conf.cgroup import CgroupConf
from shoal.v1 import jobs_pb2

V2_MOUNTS = [
    m
    for m in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
    if os.path.exists(f"{m}/cgroup.procs") and os.path.exists(f"{m}/cgroup.controllers")
]


def _run_in(cg: JobCgroup, argv: list[str]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            cg.attach(os.getpid())
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _fake_gpus(tmp_path: Path, count: int) -> dict[int, str]:
    files = {}
    for i in range(count):
        path = tmp_path / f"nvidia{i}"
        os.mknod(path, 0o666 | 0o020000, os.makedev(195, i))
        files[i] = str(path)
    return files


def test_deny_program_shape() -> None:
    prog = deny_program([(DEV_CHAR, 195, 1), (DEV_CHAR, 195, 2)])
    assert len(prog) % 8 == 0 and len(prog) // 8 == 4 + 5 * 2 + 2
    assert prog[-8] == 0x95  # ends with exit


def test_real_cpus_wrap_on_a_smaller_machine() -> None:
    assert real_cpus([0, 1], [0, 1]) == [0, 1]
    assert real_cpus([2, 3], [0, 1]) == [0, 1]
    assert real_cpus([5], [4, 6]) == [6]


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_request_denies_the_other_gpus_and_sizes_memory(tmp_path: Path) -> None:
    conf = CgroupConf(
        constrain_cores=True,
        constrain_ram_space=True,
        constrain_devices=True,
        constrain_swap_space=True,
        allowed_ram_space=100,
        allowed_swap_space=0,
    )
    iso = Isolation(conf=conf, version="v1", gpu_files=_fake_gpus(tmp_path, 4), scope="x_")
    alloc = jobs_pb2.NodeAlloc(node="n1", cpu_ids=[0, 1], mem_mb=100, gpu_indices=[1, 2])
    req = cgroup_request(iso, "n1", 7, alloc)
    assert req.relpath == "shoal/x_n1/job_7"
    assert req.mem_bytes == 100 << 20 and req.memsw_bytes == 100 << 20
    assert req.deny_devices == [[DEV_CHAR, 195, 0], [DEV_CHAR, 195, 3]]


needs_v1 = pytest.mark.skipif(
    os.geteuid() != 0 or detect_version("cgroup/v1") != "v1",
    reason="cgroup v1 not writable here (needs root and v1 controllers)",
)


@needs_v1
def test_v1_cpuset_memory_devices_oom_and_removal(tmp_path: Path) -> None:
    gpus = _fake_gpus(tmp_path, 2)
    rel = f"shoal/test_{uuid.uuid4().hex[:8]}/job_1"
    cg = JobCgroup(
        CgroupRequest(
            version="v1",
            relpath=rel,
            cpus=[0],
            mem_bytes=40 << 20,
            memsw_bytes=40 << 20,
            deny_devices=[[DEV_CHAR, 195, 1]],
        )
    )
    cg.create()
    try:
        out = tmp_path / "out"
        script = (
            f"import os, errno\n"
            f"open({str(out)!r}, 'w').write(open('/proc/self/status').read())\n"
            f"for p in {sorted(gpus.values())!r}:\n"
            f"    try: os.open(p, os.O_RDWR)\n"
            f"    except OSError as e: open({str(out)!r}, 'a').write(p + ' ' + errno.errorcode[e.errno] + '\\n')\n"
            f"b = b'x' * (200 << 20)\n"
        )
        assert _run_in(cg, ["python3", "-c", script]) == -9
        text = out.read_text()
        assert "Cpus_allowed_list:\t0\n" in text
        assert f"{gpus[0]} ENXIO" in text and f"{gpus[1]} EPERM" in text
        assert cg.oom_killed()
        assert cg.usage()["max_rss_bytes"] > 0
    finally:
        cg.remove()
    assert not any(d.exists() for d in cg.dirs())
    assert not Path("/sys/fs/cgroup/memory", rel).parent.exists()


@pytest.mark.skipif(os.geteuid() != 0 or not V2_MOUNTS, reason="no cgroup2 hierarchy mounted (or not root)")
def test_v2_bpf_device_filter(tmp_path: Path) -> None:
    gpus = _fake_gpus(tmp_path, 2)
    rel = f"shoal/test_{uuid.uuid4().hex[:8]}/job_1"
    cg = JobCgroup(
        CgroupRequest(version="v2", mount=V2_MOUNTS[-1], relpath=rel, deny_devices=[[DEV_CHAR, 195, 1]])
    )
    try:
        cg.create()
    except Exception as exc:  # noqa: BLE001 - the kernel may refuse BPF here: say why and skip
        cg.remove()
        pytest.skip(f"cgroup v2 device filter unavailable: {exc}")
    try:
        codes = []
        for path in (gpus[0], gpus[1]):
            rc = _run_in(
                cg,
                [
                    "python3",
                    "-c",
                    f"import os\ntry: os.open({path!r}, os.O_RDWR)\n"
                    f"except OSError as e: raise SystemExit(e.errno)",
                ],
            )
            codes.append(rc)
        assert codes == [errno.ENXIO, errno.EPERM]
    finally:
        cg.remove()
    assert not (Path(V2_MOUNTS[-1]) / rel).exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or detect_version("cgroup/v1") != "v1" or not os.path.isdir("/sys/fs/cgroup/freezer"),
    reason="no writable cgroup v1 freezer here (needs root and the freezer controller)",
)
def test_v1_freezer_stops_the_group_and_removal_kills_it_frozen(tmp_path: Path) -> None:
    rel = f"shoal/test_{uuid.uuid4().hex[:8]}/job_1"
    cg = JobCgroup(CgroupRequest(version="v1", relpath=rel))
    cg.create()
    out = tmp_path / "count"
    pid = os.fork()
    if pid == 0:
        try:
            cg.attach(os.getpid())
            os.execvp(
                "sh", ["sh", "-c", f"i=0; while true; do i=$((i+1)); echo $i > {out}; sleep 0.05; done"]
            )
        finally:
            os._exit(127)
    try:
        while not out.exists() or not out.read_text().strip():
            time.sleep(0.05)
        assert cg.freeze(True) and cg.frozen()
        time.sleep(0.3)  # let FREEZING settle
        seen = out.read_text()
        time.sleep(0.5)
        assert out.read_text() == seen  # not one more line while frozen
        assert cg.freeze(False) and not cg.frozen()
        while out.read_text() == seen:
            time.sleep(0.05)
        cg.freeze(True)
    finally:
        cg.remove(timeout=10)  # thaws first: a frozen process does not die of SIGKILL on v1
    assert not any(d.exists() for d in cg.dirs())
    assert os.waitpid(pid, 0)[0] == pid


@pytest.mark.skipif(
    os.geteuid() != 0 or detect_version("cgroup/v1") != "v1" or not os.path.isdir("/sys/fs/cgroup/freezer"),
    reason="no writable cgroup v1 freezer here (needs root and the freezer controller)",
)
def test_a_group_left_frozen_by_an_earlier_job_of_the_same_id_is_thawed_for_the_new_one() -> None:
    """A cluster directory reused after a suspended job's cleanup failed: the next job 1 must not start
    frozen (its processes would never run)."""
    rel = f"shoal/test_{uuid.uuid4().hex[:8]}/job_1"
    earlier = JobCgroup(CgroupRequest(version="v1", relpath=rel))
    earlier.create()
    try:
        assert earlier.freeze(True) and earlier.frozen()
        later = JobCgroup(CgroupRequest(version="v1", relpath=rel))
        later.create()
        assert not later.frozen()
    finally:
        earlier.remove(timeout=10)
