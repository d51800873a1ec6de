"""Fixtures for the node agent's tests: directories a job's user (also `nobody`) can reach."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def open_dirs() -> Iterator[tuple[Path, Path]]:
    """(spool, work): under /tmp, traversable by every user; work is world-writable.

    pytest's tmp_path sits under a 0700 directory that `nobody` cannot enter.
    """
    root = Path(tempfile.mkdtemp(prefix="noded-test-", dir="/tmp"))
    os.chmod(root, 0o755)
    spool_dir, work = root / "spool", root / "work"
    spool_dir.mkdir(mode=0o755)
    work.mkdir()
    os.chmod(work, 0o777)
    try:
        yield spool_dir, work
    finally:
        shutil.rmtree(root, ignore_errors=True)
