"""Configless: the config files ctld serves to nodes and login hosts (SlurmctldParameters=enable_configless).

A noded or agentd started with `--conf-server head` fetches them at start (shoal.conf.configless),
again when ctld tells it to reconfigure, and runs from its cached copy, so only the controller's host keeps the files. What is served:
slurm.conf, the gres.conf, cgroup.conf and topology.conf that exist beside it, and every file
slurm.conf Includes from its own directory (named relative to it, so the copy reads the same).
"""

from __future__ import annotations

import os

from ctld.errors import FAILED_PRECONDITION, SlurmError
from shoal.conf import SlurmConfig
from shoal.conf.errors import ConfigError
from shoal.conf.reader import read_config_file

ENABLE = "enable_configless"
DISABLED = "ConfigLess mode is disabled in slurm configuration."  # slurmd 22.05's words
SIBLINGS = ("gres.conf", "cgroup.conf", "topology.conf")


def enabled(cfg: SlurmConfig) -> bool:
    words = (cfg.get("SlurmctldParameters") or "").replace(",", " ").split()
    return ENABLE in (w.lower() for w in words)


def snapshot(cfg: SlurmConfig) -> dict[str, str] | SlurmError:
    """The files as ctld loaded them (at start, again at each reconfigure: nodes never get a file
    that ctld itself does not run with), or the refusal every fetch gets."""
    try:
        return config_files(cfg)
    except SlurmError as exc:
        return exc


def config_files(cfg: SlurmConfig) -> dict[str, str]:
    """{name relative to slurm.conf's directory: text}; SlurmError when configless is not enabled
    or a file cannot be read (a node must not start from half a configuration)."""
    if not enabled(cfg):
        raise SlurmError(DISABLED, FAILED_PRECONDITION)
    conf = os.path.abspath(cfg.path)
    conf_dir = os.path.dirname(conf)
    names = [conf] + [
        os.path.join(conf_dir, n) for n in SIBLINGS if os.path.isfile(os.path.join(conf_dir, n))
    ]
    try:
        included = {line.source.rsplit(":", 1)[0] for line in read_config_file(conf)}
    except ConfigError as exc:
        raise SlurmError(str(exc), FAILED_PRECONDITION) from exc
    names += sorted(
        os.path.abspath(p)
        for p in included
        if os.path.abspath(p) != conf and os.path.abspath(p).startswith(conf_dir + os.sep)
    )
    files: dict[str, str] = {}
    for path in names:
        try:
            with open(path, encoding="utf-8") as fh:
                files[os.path.relpath(path, conf_dir)] = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise SlurmError(f"cannot read {path}: {exc}", FAILED_PRECONDITION) from exc
    return files
