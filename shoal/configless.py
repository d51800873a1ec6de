"""Configless hosts: fetch the config files from ctld at start and run from a cached copy.

`shoal-noded --conf-server head[:port]` and `shoal-agentd --conf-server ...` (Slurm's
`slurmd --conf-server`) ask ctld for slurm.conf and the files beside it (Controller.GetConfigFiles,
authenticated with the cluster key like every daemon-to-daemon call), write them into a cache
directory under their spool dir (Slurm's <SlurmdSpoolDir>/conf-cache) and load slurm.conf from there;
their children get SLURM_CONF pointing at the copy, so commands on the host read the same file.
A daemon that starts while ctld is unreachable runs from the copy of its last start (a warning
says so); with no copy it refuses to start with Slurm's words. Restarting the daemon picks up
changes.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import grpc

from shoal.rpc.client import Stub
from shoal.v1 import controller_pb2

METHOD = "/shoal.v1.Controller/GetConfigFiles"
DEFAULT_PORT = 6817
DEFAULT_KEY_FILE = "/etc/slurm/shoal.key"  # AuthKeyFile's default beside the default slurm.conf
SLURM_CONF = "slurm.conf"
CONNECT_FAILURE = "Unable to contact slurm controller (connect failure)"
log = logging.getLogger("shoal.configless")


class ConfiglessError(Exception):
    """No configuration to run from; str() is the whole message after `<prog>: error: `."""


@dataclass(frozen=True)
class Fetched:
    """Where the daemon's slurm.conf is now, and whether it came from ctld just now (else: the cache)."""

    conf: str
    fresh: bool


def parse_servers(spec: str) -> list[str]:
    """`head`, `head:6817`, `head,backup:7000` -> ["head:6817", ...]; ValueError on a bad entry."""
    targets = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":") if ":" in item else (item, "", "")
        if not host or (sep and not port.isdigit()) or (port and not 0 < int(port) < 65536):
            raise ValueError(f"invalid --conf-server {item!r} (expected HOST[:PORT])")
        targets.append(f"{host}:{port or DEFAULT_PORT}")
    if not targets:
        raise ValueError("--conf-server needs a host")
    return targets


def fetch(servers: list[str], key: bytes, cache_dir: Path, timeout: float = 10.0) -> Fetched:
    """Ask each server in turn; write the files into `cache_dir`; fall back to the cached copy only
    when no server answered (a refusal, e.g. configless disabled, is an error even with a cache)."""
    reason = CONNECT_FAILURE
    for target in servers:
        stub = Stub(target, key)
        try:
            reply = stub.call(
                METHOD,
                controller_pb2.GetConfigFilesRequest(host=socket.gethostname()),
                controller_pb2.GetConfigFilesResponse,
                timeout=timeout,
                attempts=3,
            )
        except grpc.RpcError as exc:
            if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ConfiglessError(f"failed to fetch remote configs: {exc.details()}") from None
            log.warning("configless: %s: %s", target, CONNECT_FAILURE)
            continue
        finally:
            stub.close()
        if SLURM_CONF not in reply.files:
            raise ConfiglessError(f"failed to fetch remote configs: {target} sent no {SLURM_CONF}")
        try:
            write_cache(cache_dir, dict(reply.files))
        except OSError as exc:
            raise ConfiglessError(
                f"cannot write the config cache {cache_dir}: {exc.strerror or exc}"
            ) from None
        log.info("configless: fetched %s from %s into %s", ", ".join(sorted(reply.files)), target, cache_dir)
        return Fetched(str(cache_dir / SLURM_CONF), fresh=True)
    cached = cache_dir / SLURM_CONF
    if cached.is_file():
        log.warning(
            "configless: failed to fetch remote configs (%s); running from the cached copy in %s",
            reason,
            cache_dir,
        )
        return Fetched(str(cached), fresh=False)
    raise ConfiglessError(f"failed to fetch remote configs: {reason}")


def write_cache(cache_dir: Path, files: dict[str, str]) -> None:
    """Replace the cache's files by `files` (each written whole, then renamed: a reader never sees half
    a file); files no longer served are removed. Names must stay inside `cache_dir`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    root = cache_dir.resolve()
    os.chmod(cache_dir, 0o755)  # every user's commands read slurm.conf from here
    paths = {name: (cache_dir / name).resolve() for name in files}
    for name, path in paths.items():  # all checked before any is written
        if root not in path.parents:
            raise OSError(0, f"refusing file name {name!r} outside the cache")
    wanted = set()
    for name, text in files.items():
        path = paths[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        wanted.add(path)
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_file() and path not in wanted:
            path.unlink()


def start(spec: str, cache_dir: str, key_file: str) -> Fetched:
    """What a daemon does with `--conf-server spec`: read the key, fetch (or fall back), and point
    SLURM_CONF at the copy for every child (stepds, tasks, the agent's command runner)."""
    from shoal.auth.errors import AuthError
    from shoal.auth.key import load_key

    try:
        servers = parse_servers(spec)
    except ValueError as exc:
        raise ConfiglessError(str(exc)) from None
    try:
        key = load_key(key_file)
    except AuthError as exc:
        raise ConfiglessError(exc.message) from None
    fetched = fetch(servers, key, Path(cache_dir))
    os.environ["SLURM_CONF"] = fetched.conf
    return fetched


def add_arguments(parser: argparse.ArgumentParser, default_cache: str) -> None:
    """--conf-server, --conf-cache and --key-file, the same for shoal-noded and shoal-agentd."""
    parser.add_argument(
        "--conf-server",
        metavar="HOST[:PORT][,...]",
        help="configless: fetch slurm.conf and the files beside it from shoal-ctld at start "
        "(SlurmctldParameters=enable_configless); run from the cached copy",
    )
    parser.add_argument(
        "--conf-cache",
        metavar="DIR",
        default=default_cache,
        help=f"configless: where the fetched files are kept (default: {default_cache})",
    )
    parser.add_argument(
        "--key-file",
        metavar="PATH",
        default=DEFAULT_KEY_FILE,
        help=f"configless: the cluster key (default: {DEFAULT_KEY_FILE})",
    )
