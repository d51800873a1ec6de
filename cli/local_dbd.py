"""The local cluster's accounting (`shoal up`): slurmdbd.conf with the embedded SQLite backend, the
shoal-dbd process, and the first cluster/account/users so jobs can run under enforcement.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_ACCOUNT = "default"


def write_conf(directory: Path, user: str, port: int) -> list[tuple[str, str]]:
    """Write DIR/slurmdbd.conf (shoal-dbd on 127.0.0.1:port); returns the slurm.conf lines that point
    ctld and the agent at it."""
    (directory / "slurmdbd.conf").write_text(
        f"""# Accounting for the local shoal cluster, written by `shoal up`.
StorageType=accounting_storage/sqlite
StorageLoc={directory}/state/slurm_acct_db.sqlite
DbdHost=127.0.0.1
DbdPort={port}
SlurmUser={user}
AuthKeyFile={directory}/shoal.key
LogFile={directory}/log/dbd.log
PidFile={directory}/run/dbd.pid
"""
    )
    return [
        ("AccountingStorageType", "accounting_storage/slurmdbd"),
        ("AccountingStorageHost", "127.0.0.1"),
        ("AccountingStoragePort", str(port)),
    ]


def start(
    directory: Path,
    env: dict[str, str],
    spawn: Callable[[list[str], Path, dict[str, str]], subprocess.Popen[bytes]],
) -> subprocess.Popen[bytes] | None:
    """Start shoal-dbd when the cluster has a slurmdbd.conf."""
    conf = directory / "slurmdbd.conf"
    if not conf.exists():
        return None
    return spawn(
        [sys.executable, "-P", "-m", "dbd.main", "-f", str(conf)], directory / "log" / "dbd.out", env
    )


Accounts = tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]


def bootstrap(
    env: dict[str, str],
    cluster: str,
    users: list[str],
    accounts: Accounts | None = None,
    timeout: float = 30.0,
) -> str | None:
    """Create the cluster, the default account and `users` (idempotent); returns an error or None.

    With `accounts` ((name, sacctmgr settings, users), ...) that tree replaces the default account; a
    user's default account is the first that lists them (set again with modify: root already exists).
    """
    steps = [["add", "cluster", cluster]]
    if accounts is None:
        steps += [
            ["add", "account", DEFAULT_ACCOUNT, "Description=default", "Organization=shoal"],
            [
                "add",
                "user",
                ",".join(users),
                f"Account={DEFAULT_ACCOUNT}",
                f"DefaultAccount={DEFAULT_ACCOUNT}",
            ],
        ]
    else:
        first: dict[str, str] = {}
        for name, settings, members in accounts:
            steps.append(["add", "account", name, *settings])
            for user in members:
                first.setdefault(user, name)
        for name, _settings, members in accounts:
            for user in members:
                steps.append(["add", "user", user, f"Account={name}", f"DefaultAccount={first[user]}"])
        for user, name in first.items():
            steps.append(["modify", "user", "where", f"name={user}", "set", f"DefaultAccount={name}"])
    import pwd

    me = pwd.getpwuid(os.getuid()).pw_name
    mine = DEFAULT_ACCOUNT if accounts is None else first.get(me, "")
    deadline = time.monotonic() + timeout
    for words in steps:
        while True:
            out = subprocess.run(
                [sys.executable, "-P", "-m", "cli.sacctmgr", "-i", *words],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if out.returncode == 0 or "already exists" in out.stderr:
                break
            if time.monotonic() > deadline:
                return f"sacctmgr {' '.join(words)}: {out.stderr.strip() or out.stdout.strip()}"
            time.sleep(0.3)
    return _wait_for_ctld(env, mine, deadline) if mine else None


def _wait_for_ctld(env: dict[str, str], account: str, deadline: float) -> str | None:
    """Until ctld holds the accounts just made (sshare shows ctld's account tree). ctld learns them by
    polling shoal-dbd, and only from that poll does dbd know where ctld is, so that later sacctmgr
    changes reach ctld before sacctmgr returns. Without this wait, an sbatch right after `shoal up`
    could be refused with "Invalid account"."""
    while True:
        out = subprocess.run(
            [sys.executable, "-P", "-m", "cli.sshare", "-n", "-P", "-A", account],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if any(line.lstrip().startswith(f"{account}|") for line in out.stdout.splitlines()):
            return None
        if time.monotonic() > deadline:
            return f"ctld has not loaded the accounts from shoal-dbd: {out.stderr.strip() or 'no rows yet'}"
        time.sleep(0.3)


def pid_names(directory: Path) -> tuple[str, ...]:
    """The daemons of the local cluster, with shoal-dbd when it has accounting, shoal-restd when it runs one."""
    names = (
        ("noded", "agentd", "ctld", "dbd")
        if (directory / "slurmdbd.conf").exists()
        else ("noded", "agentd", "ctld")
    )
    return ("restd", *names) if (directory / "run" / "restd.url").exists() else names


def local_users() -> list[str]:
    import pwd

    me = pwd.getpwuid(os.getuid()).pw_name
    return sorted({me, "root"})
