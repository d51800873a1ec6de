"""shoal across separate hosts: what crosses a real network (tests/e2e/hosts.py builds them).

head runs ctld and dbd and is the only host with config files; gpu1 and gpu2 each run one configless
noded, login a configless agentd. Users work from login, as on a real cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import hosts
from tests.e2e.conftest import wait_until
from tests.e2e.test_node_names import _others_may_run
from tests.e2e.test_torch import DDP

pytestmark = pytest.mark.e2e

ALICE = 1001
_WHY = hosts.why_not()
if _WHY is not None:
    pytest.skip(f"separate hosts are not possible here: {_WHY}", allow_module_level=True)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[hosts.Hosts]:
    c = hosts.start(tmp_path_factory.mktemp("hosts"), users=("root", "alice"))
    yield c
    pinned = hosts.PinnedNamespaces(c)
    hosts.stop(c)
    # nothing of the fixture is left: namespaces (and with them the veths and the bridge), processes
    try:
        assert hosts.leftovers(pinned.inodes) == []
    finally:
        pinned.close()
    assert not [p for h in c.hosts.values() for p in h.daemons if p.poll() is None]
    assert subprocess.run(["ip", "link", "show", "v-gpu1"], capture_output=True).returncode != 0


def _torch_or_skip() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (pip install -e '.[torch]'): the cross-host gloo part is skipped")


def _job_output(
    cluster: hosts.Hosts, name: str, script: str, *sbatch: str, user: int | None = None, timeout: float = 120
) -> tuple[int, str, str]:
    work = cluster.dir / "work"
    path, out = work / f"{name}.sh", work / f"{name}.out"
    path.write_text(script)
    path.chmod(0o755)
    job = int(cluster.ok("sbatch", "--parsable", "-o", str(out), *sbatch, str(path), user=user).split(";")[0])
    state = ""

    def ended() -> bool:
        nonlocal state
        state = cluster.ok("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T").strip()
        return state in ENDED

    wait_until(f"job {job} to end", ended, timeout=timeout)
    return job, state, out.read_text() if out.exists() else ""


def test_only_head_keeps_config_files_the_others_run_from_their_fetched_copy(cluster: hosts.Hosts) -> None:
    head = cluster["head"].dir / "etc"
    for name in ("gpu1", "gpu2", "login"):
        h = cluster[name]
        assert not (h.dir / "etc").exists()
        assert sorted(p.name for p in h.cache.iterdir()) == ["cgroup.conf", "gres.conf", "slurm.conf"]
        assert (h.cache / "slurm.conf").read_text() == (head / "slurm.conf").read_text()
    assert "slurmdbd.conf" not in os.listdir(cluster["login"].cache)  # the database's file stays on head
    # each noded found its node's 8 (fake NVML) GPUs
    assert cluster.ok("sinfo", "-h", "-N", "-o", "%N %G").split() == [
        "gpu1",
        "gpu:h100:8",
        "gpu2",
        "gpu:h100:8",
    ]


def test_alice_submits_from_login_and_sees_her_job_everywhere(cluster: hosts.Hosts) -> None:
    script = (
        '#!/bin/bash\necho "batch on $(hostname) conf $SLURM_CONF"\n'
        'getent hosts gpu2 | sed "s/^/resolved: /"\n'
    )
    if _others_may_run(sys.executable):  # srun is Python: alice must be able to start this interpreter
        script += "srun -l hostname | sort\n"
    job, state, text = _job_output(cluster, "alice", script, "-N2", "--ntasks-per-node=1", user=ALICE)
    assert state == "COMPLETED", text
    gpu1 = cluster["gpu1"]
    assert f"batch on gpu1 conf {gpu1.cache}/slurm.conf\n" in text, text  # gpu1's copy, not head's path
    assert f"resolved: {cluster['gpu2'].addr}" in text, text
    if "srun" in script:
        assert "0: gpu1\n1: gpu2\n" in text, text
    # the same job, seen from login as alice: squeue (all states) and sacct
    assert cluster.ok("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%u %T %N", user=ALICE).split() == [
        "alice",
        "COMPLETED",
        "gpu[1-2]",
    ]
    wait_until(
        "the job in accounting",
        lambda: (
            cluster.run(
                "sacct", "-X", "-n", "-P", "-j", str(job), "-o", "User,State,NodeList", user=ALICE
            ).stdout.split()
            == ["alice|COMPLETED|gpu[1-2]"]
        ),
        timeout=30,
    )


def test_a_two_node_step_from_login_runs_on_both_hosts_under_their_names(cluster: hosts.Hosts) -> None:
    out = cluster.ok(
        "srun",
        "-N2",
        "--ntasks-per-node=1",
        "-l",
        "bash",
        "-c",
        'echo "$(hostname) $SLURMD_NODENAME $(getent hosts $(hostname) | tr -s " \\t" " ")"',
        user=ALICE,
    )
    lines = sorted(out.splitlines())
    assert lines == [
        f"0: gpu1 gpu1 {cluster['gpu1'].addr} gpu1 ",
        f"1: gpu2 gpu2 {cluster['gpu2'].addr} gpu2 ",
    ] or [line.rstrip() for line in lines] == [
        f"0: gpu1 gpu1 {cluster['gpu1'].addr} gpu1",
        f"1: gpu2 gpu2 {cluster['gpu2'].addr} gpu2",
    ], out


def test_salloc_from_login_and_a_step_inside_its_allocation(cluster: hosts.Hosts) -> None:
    out = cluster.run("salloc", "-N2", sys.executable, "-P", "-m", "cli.srun", "-l", "hostname")
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == ["0: gpu1", "1: gpu2"], out
    assert re.search(r"^salloc: Granted job allocation \d+$", out.stderr, re.M), out.stderr


def test_gloo_all_reduce_across_the_two_hosts(cluster: hosts.Hosts) -> None:
    _torch_or_skip()
    (cluster.dir / "work" / "ddp.py").write_text(DDP)
    out = cluster.ok(
        "srun",
        "-N2",
        "--ntasks-per-node=1",
        sys.executable,
        str(cluster.dir / "work" / "ddp.py"),
        env={"GLOO_SOCKET_IFNAME": "eth0"},
        timeout=240,
    )
    found = sorted(re.findall(r"rank (\d)/(\d) on (\S+): ([\d.]+)", out))
    assert found == [("0", "2", "gpu1", "3"), ("1", "2", "gpu2", "3")], out


TORCHRUN = """#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=1
export PATH={bindir}:$PATH GLOO_SOCKET_IFNAME=eth0
srun torchrun --nnodes 2 --nproc_per_node 1 --rdzv_id $SLURM_JOB_ID --rdzv_backend c10d \\
    --rdzv_endpoint=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1):29500 {dir}/ddp.py
"""


def test_the_guides_torchrun_line_rendezvous_on_the_first_host(cluster: hosts.Hosts) -> None:
    _torch_or_skip()
    work = cluster.dir / "work"
    (work / "ddp.py").write_text(DDP)
    _job, state, text = _job_output(
        cluster, "torchrun", TORCHRUN.format(bindir=Path(sys.executable).parent, dir=work), timeout=300
    )
    assert state == "COMPLETED", text
    found = sorted(re.findall(r"rank (\d)/(\d) on (\S+): ([\d.]+)", text))
    assert found == [("0", "2", "gpu1", "3"), ("1", "2", "gpu2", "3")] or found == [
        ("0", "2", "gpu2", "3"),
        ("1", "2", "gpu1", "3"),
    ], text


def test_login_picks_up_changes_on_restart_and_runs_from_its_cache_when_ctld_is_unreachable(
    cluster: hosts.Hosts,
) -> None:
    login, conf = cluster["login"], cluster["head"].dir / "etc" / "slurm.conf"
    key = ("--conf-cache", str(login.cache), "--key-file", str(login.dir / "shoal.key"))
    conf.write_text(conf.read_text() + "# changed on head\n")
    hosts.restart(cluster, "login", "shoal.agent.agentd", "--conf-server", "head", *key)
    # ctld serves the files it runs with: the change reaches login once ctld has restarted too
    assert "# changed on head" not in (login.cache / "slurm.conf").read_text()
    hosts.restart(cluster, "head", "ctld.main")
    hosts.restart(cluster, "login", "shoal.agent.agentd", "--conf-server", "head", *key)
    assert (login.cache / "slurm.conf").read_text() == conf.read_text()
    wait_until("squeue from login", lambda: cluster.run("squeue", "-h").returncode == 0, timeout=30)
    hosts.restart(cluster, "login", "shoal.agent.agentd", "--conf-server", "head:6999", *key)  # nothing there
    wait_until(
        "squeue from login, from the cache", lambda: cluster.run("squeue", "-h").returncode == 0, timeout=60
    )
    assert "running from the cached copy" in (cluster.dir / "log" / "agentd-login.out").read_text()
    hosts.restart(cluster, "login", "shoal.agent.agentd", "--conf-server", "head", *key)


def test_a_reconfigure_reaches_the_configless_nodes_copies(cluster: hosts.Hosts) -> None:
    """slurmctld tells every slurmd to reconfigure; a configless one fetches the files again."""
    conf = cluster["head"].dir / "etc" / "slurm.conf"
    original = conf.read_text()
    conf.write_text(original + "PartitionName=reconf Nodes=gpu1 State=UP\n")
    try:
        cluster.ok("scontrol", "reconfigure")  # from login, as root
        for name in ("gpu1", "gpu2"):
            copy = cluster[name].cache / "slurm.conf"
            wait_until(
                f"{name}'s new copy", lambda copy=copy: copy.read_text() == conf.read_text(), timeout=30
            )
        assert "reconf" in cluster.ok("sinfo", "-h", "-o", "%P").split()
    finally:
        conf.write_text(original)
        cluster.ok("scontrol", "reconfigure")


def _configless_noded(cluster: hosts.Hosts, server: str, cache: Path) -> subprocess.CompletedProcess[str]:
    login = cluster["login"]
    return subprocess.run(
        login.wrap(
            [
                sys.executable,
                "-P",
                "-m",
                "noded.main",
                "--conf-server",
                server,
                "--conf-cache",
                str(cache),
                "--key-file",
                str(login.dir / "shoal.key"),
            ]
        ),
        capture_output=True,
        text=True,
        timeout=60,
        env=cluster.env,
    )


def test_a_host_without_the_cluster_key_gets_no_config(cluster: hosts.Hosts) -> None:
    from shoal.auth.key import generate_key

    other = cluster.dir / "work" / "other.key"
    generate_key(str(other))
    login = cluster["login"]
    out = subprocess.run(
        login.wrap(
            [
                sys.executable,
                "-P",
                "-m",
                "shoal.agent.agentd",
                "--conf-server",
                "head",
                "--conf-cache",
                str(cluster.dir / "work" / "other-cache"),
                "--key-file",
                str(other),
                "--socket",
                str(cluster.dir / "work" / "x.sock"),
            ]
        ),
        capture_output=True,
        text=True,
        timeout=60,
        env=cluster.env,
    )
    assert out.returncode == 1
    assert out.stderr.startswith("shoal-agentd: error: failed to fetch remote configs: "), out.stderr
    assert not (cluster.dir / "work" / "other-cache" / "slurm.conf").exists()


def test_a_ctld_without_enable_configless_refuses_in_slurms_words(cluster: hosts.Hosts) -> None:
    conf = cluster["head"].dir / "etc" / "slurm.conf"
    text = conf.read_text()
    conf.write_text(text.replace("SlurmctldParameters=enable_configless\n", ""))
    try:
        hosts.restart(cluster, "head", "ctld.main")
        cache = cluster["login"].cache  # a cache does not help: ctld answered, and said no
        out = _configless_noded(cluster, "head", cache)
        assert (out.returncode, out.stderr.strip().splitlines()[-1]) == (
            1,
            "shoal-noded: error: failed to fetch remote configs: ConfigLess mode is disabled in slurm configuration.",
        ), out.stderr
    finally:
        conf.write_text(text)
        hosts.restart(cluster, "head", "ctld.main")
    wait_until("gpu1 and gpu2 idle again", lambda: hosts._idle(cluster), timeout=60)


def test_a_configless_daemon_refuses_to_start_with_no_server_and_no_cache(cluster: hosts.Hosts) -> None:
    out = _configless_noded(cluster, "head:6999", cluster.dir / "work" / "empty-cache")
    assert out.returncode == 1
    assert out.stderr.strip().endswith(
        "shoal-noded: error: failed to fetch remote configs: Unable to contact slurm controller (connect failure)"
    ), out.stderr


def test_killing_gpu2s_processes_is_a_node_failure_ctld_sees(cluster: hosts.Hosts) -> None:
    wide = int(
        cluster.ok(
            "sbatch", "--parsable", "-N2", "--no-requeue", "-o", "/dev/null", "--wrap", "sleep 300"
        ).split(";")[0]
    )
    wait_until(
        "the 2-node job running",
        lambda: cluster.ok("squeue", "-h", "-j", str(wide), "-o", "%T").strip() == "RUNNING",
        timeout=60,
    )
    gpu2 = cluster["gpu2"]
    killed = hosts.kill_host_processes(gpu2)  # noded, its stepds and the job's shell: a crash of gpu2
    assert len(killed) >= 2
    wait_until(
        "gpu2 DOWN*",
        lambda: cluster.ok("sinfo", "-h", "-n", "gpu2", "-o", "%t").strip() == "down*",
        timeout=90,
    )
    assert "Reason=Not responding" in cluster.ok("scontrol", "show", "node", "gpu2")
    wait_until(
        "the job NODE_FAIL",
        lambda: cluster.ok("squeue", "-h", "-t", "all", "-j", str(wide), "-o", "%T").strip() == "NODE_FAIL",
        timeout=60,
    )
    assert cluster.ok("sinfo", "-h", "-n", "gpu1", "-o", "%t").strip() == "idle"
    assert gpu2.processes() == []
    # gpu2 boots again: its noded fetches the config anew and, ReturnToService=2, the node is back
    gpu2.spawn(
        [
            sys.executable,
            "-P",
            "-m",
            "noded.main",
            "--conf-server",
            "head",
            "--conf-cache",
            str(gpu2.cache),
            "--key-file",
            str(gpu2.dir / "shoal.key"),
        ],
        cluster.dir / "log" / "noded-gpu2.out",
        dict(cluster.env, SHOAL_FAKE_NVML="dgx_h100"),
    )
    wait_until(
        "gpu2 idle again",
        lambda: cluster.ok("sinfo", "-h", "-n", "gpu2", "-o", "%t").strip() == "idle",
        timeout=90,
    )
