"""shoal-restd: the composition root. `shoal-restd [-f slurm.conf] [host]:port`, as slurmrestd is run.

It needs the cluster key (to mint each user's credential: run it as SlurmUser) and the jwt key of
AuthAltParameters=jwt_key= (to check tokens), and talks to ctld and, with accounting, to dbd.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from shoal import version_line
from shoal.daemon import DaemonArgumentParser, Notifier, reopen_log_files, setup_logging

if TYPE_CHECKING:
    from restd.app import RestContext
    from shoal.conf.slurm import SlurmConfig

PROG = "shoal-restd"
DEFAULT_LISTEN = "127.0.0.1:6820"
DEFAULT_CONF = "/etc/slurm/slurm.conf"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = DaemonArgumentParser(prog=PROG, description="shoal REST API daemon (slurmrestd, OpenAPI v0.0.44)")
    p.add_argument("-V", "--version", action="version", version=version_line())
    p.add_argument("-f", "--conf", help="slurm.conf (default: $SLURM_CONF, else /etc/slurm/slurm.conf)")
    p.add_argument(
        "-D", "--foreground", action="store_true", help="foreground, log copied to stderr (never forks)"
    )
    p.add_argument("-L", "--logfile", help="log file (default: stderr)")
    p.add_argument("--pidfile", metavar="PATH", help="write the process id to PATH")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument(
        "listen", nargs="?", default=DEFAULT_LISTEN, help=f"[host]:port to serve (default {DEFAULT_LISTEN})"
    )
    return p.parse_args(argv)


def split_listen(text: str) -> tuple[str, int]:
    """ "host:port", ":port" (every address) or "[::1]:port"; ValueError when it is not one."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"invalid listen address {text!r} (expected [host]:port)")
    return host.strip("[]") or "0.0.0.0", int(port)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    notifier = Notifier()
    try:
        host, port = split_listen(args.listen)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    from shoal.agent.server import targets_from_config
    from shoal.auth.errors import AuthError
    from shoal.auth.key import load_key
    from shoal.auth.token import NOT_CONFIGURED, jwt_settings, load_jwt_key
    from shoal.conf import ConfigError, load_slurm_conf

    try:
        cfg = load_slurm_conf(args.conf or os.environ.get("SLURM_CONF") or DEFAULT_CONF)
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    settings = jwt_settings(cfg.auth_alt_types, cfg.auth_alt_parameters)
    try:
        if not settings.enabled:
            raise AuthError(NOT_CONFIGURED)
        key = load_key(cfg.auth_key_file)
        jwt_key = load_jwt_key(settings.key_file)
    except AuthError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return 1
    try:
        from restd.app import RestContext
        from restd.backend import Backend
    except ImportError as exc:
        print(
            f"{PROG}: error: {exc.name or exc} is not installed (pip install 'shoal[restd]')", file=sys.stderr
        )
        return 1
    try:
        setup_logging(args.logfile, logging.DEBUG if args.verbose else logging.INFO, args.foreground)
    except OSError as exc:
        print(f"{PROG}: error: cannot open log file: {exc}", file=sys.stderr)
        return 1

    targets = targets_from_config(cfg)
    accounting = cfg.accounting_storage_type == "accounting_storage/slurmdbd"
    backend = Backend(key, targets["ctld"], targets["dbd"] if accounting else None)
    ctx = RestContext(backend=backend, jwt_key=jwt_key, cluster=cfg.cluster_name)
    conf = str(Path(args.conf or os.environ.get("SLURM_CONF") or DEFAULT_CONF).resolve())
    try:
        return asyncio.run(_serve(ctx, cfg, conf, host, port, args.pidfile, notifier))
    finally:
        backend.close()


async def _serve(
    ctx: RestContext,
    cfg: SlurmConfig,
    conf: str,
    host: str,
    port: int,
    pidfile: str | None,
    notifier: Notifier,
) -> int:
    from aiohttp import web

    from restd import web as webview
    from restd.app import make_app
    from restd.metrics_http import add_routes

    log = logging.getLogger("shoal.restd")
    app = make_app(ctx)
    add_routes(app, cfg, ctx.backend, ctx.jwt_key)  # /metrics/* (MetricsType=metrics/openmetrics)
    webview.add_routes(app, ctx, cfg, conf)  # /web/: the read-only web view, last (it looks for the others)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        print(f"{PROG}: error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        await runner.cleanup()
        return 1
    if pidfile:
        Path(pidfile).write_text(f"{os.getpid()}\n")
    log.info("shoal-restd listening on http://%s:%d (cluster %s)", host, port, ctx.cluster)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    for signum in (signal.SIGHUP, signal.SIGUSR2):  # logrotate: reopen the log file, keep serving
        loop.add_signal_handler(signum, reopen_log_files)
    notifier.ready()
    await stop.wait()
    notifier.stopping()
    log.info("shoal-restd stopping")
    await runner.cleanup()
    if pidfile:
        Path(pidfile).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
