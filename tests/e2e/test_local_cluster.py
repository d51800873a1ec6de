"""`shoal up` as a newcomer runs it: the installed command, from wherever they happen to stand."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

SCRIPTS = Path(sysconfig.get_path("scripts"))


def _base_addr() -> str:
    """A loopback block of this xdist worker that start_cluster never hands out (it uses 0-249)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return f"127.{int(os.environ.get('SHOAL_TEST_NET', '10')) + index}.251.2"


def test_shoal_up_from_the_directory_that_holds_the_clone(tmp_path: Path) -> None:
    """Right after `git clone .../shoal`, the caller's cwd has a `shoal/` folder; no daemon may import it."""
    clone = tmp_path / "shoal"
    (clone / "shoal").mkdir(parents=True)
    (clone / "README.md").write_text("a clone\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "PYTHONPATH"))}
    env.pop("SHOAL_AGENT_SOCKET", None)
    directory = tmp_path / "cluster"
    shoal = str(SCRIPTS / "shoal")
    assert Path(shoal).exists(), f"the console script {shoal} is not installed (pip install -e .)"
    up = subprocess.run([shoal, "up", "--dir", str(directory), "--nodes", "2", "--cpus-per-node", "2",
                         "--base-addr", _base_addr(), "--no-accounting"],
                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    try:
        logs = "".join(p.read_text() for p in (directory / "log").glob("*") if p.is_file())
        assert up.returncode == 0, f"{up.stderr}\n{logs}"
        assert "quick-start job 1 completed" in up.stdout
        assert "Traceback" not in logs
    finally:
        subprocess.run([shoal, "down", "--dir", str(directory)], cwd=tmp_path, env=env, capture_output=True,
                       timeout=60)
