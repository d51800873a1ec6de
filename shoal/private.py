"""Files only their owner may read: the controller's state and the accounting database.

Both hold every job's script and environment (a secret a user exported is in there), so as Slurm
keeps StateSaveLocation's files 0600 as SlurmUser, shoal creates them 0600 and the directories that
hold them 0700, and tightens ones an earlier version left readable to everyone.
"""

from __future__ import annotations

import os
from pathlib import Path

SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: str | os.PathLike[str]) -> None:
    """Create `path` (and missing parents) 0700; an existing one we own loses group and other access."""
    directory = Path(path)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        directory.chmod(info.st_mode & 0o700)


def private_file(path: str | os.PathLike[str]) -> None:
    """Create `path` 0600 before anything opens it (SQLite's -wal and -shm files copy the mode of the
    database), and make it and its side files 0600 when they already exist."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in SQLITE_SIDE_FILES:
        try:
            os.chmod(f"{os.fspath(path)}{suffix}", 0o600)
        except FileNotFoundError:
            pass
