"""shoal-dbd: the composition root. Reads slurmdbd.conf, migrates the database, serves Accounting."""

from __future__ import annotations

import argparse
import logging
import os
import pwd
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from shoal import version_line
from shoal.daemon import DaemonArgumentParser, Notifier, install_signals, setup_logging

if TYPE_CHECKING:
    from dbd.service import AccountingService

PROG = "shoal-dbd"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = DaemonArgumentParser(prog=PROG, description="shoal accounting daemon (slurmdbd)")
    p.add_argument("-V", "--version", action="version", version=version_line())
    p.add_argument("-f", "--conf", help="slurmdbd.conf (default: $SLURMDBD_CONF, else beside slurm.conf)")
    p.add_argument(
        "-D", "--foreground", action="store_true", help="foreground, log copied to stderr (never forks)"
    )
    p.add_argument("-L", "--logfile", help="log file (default: LogFile, else stderr)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    return p.parse_args(argv)


def _uid_of(user: str) -> int:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    notifier = Notifier()
    from shoal.conf.errors import ConfigError
    from shoal.conf.slurmdbd import load_slurmdbd_conf

    try:
        cfg = load_slurmdbd_conf(args.conf)
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    try:
        setup_logging(
            args.logfile or cfg.log_file or None,
            logging.DEBUG if args.verbose else logging.INFO,
            args.foreground,
        )
    except OSError as exc:
        print(f"{PROG}: error: cannot open log file: {exc}", file=sys.stderr)
        return 1
    log = logging.getLogger("shoal.dbd")
    for warning in cfg.warnings:
        log.warning("%s", warning)

    from sqlalchemy.exc import SQLAlchemyError

    from dbd.db import open_database
    from dbd.purge import purge_loop
    from dbd.service import AccountingService
    from shoal.auth.errors import AuthError
    from shoal.auth.key import load_key
    from shoal.rpc.server import BindError, make_server
    from shoal.v1 import accounting_pb2_grpc

    try:
        key = load_key(cfg.auth_key_file)
    except AuthError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    try:
        sessions = open_database(cfg.database_url())
    except SQLAlchemyError as exc:
        message = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        print(
            f"{PROG}: error: cannot open the accounting database ({cfg.storage_type}): {message}",
            file=sys.stderr,
        )
        return 1
    address = f"{cfg.listen_addr}:{cfg.dbd_port}"
    try:
        server = make_server([address], key, max_workers=16)
    except BindError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    service = AccountingService(sessions, _uid_of(cfg.slurm_user), key, frozenset(cfg.private_data))
    accounting_pb2_grpc.add_AccountingServicer_to_server(service, server)
    server.start()
    if cfg.pid_file:
        try:
            Path(cfg.pid_file).parent.mkdir(parents=True, exist_ok=True)
            Path(cfg.pid_file).write_text(f"{os.getpid()}\n")
        except OSError as exc:
            log.warning("cannot write pid file %s: %s", cfg.pid_file, exc)
    log.info("shoal-dbd listening on %s (%s)", address, cfg.storage_type)
    stop = threading.Event()
    reread = threading.Event()
    install_signals(stop, PROG, reread.set)
    threading.Thread(
        target=_reread_loop, args=(cfg.path, service, reread, stop), daemon=True, name="reconfig"
    ).start()
    if cfg.purge_job_after_h:
        threading.Thread(
            target=purge_loop,
            args=(sessions, cfg.purge_job_after_h * 3600, stop, time.time),
            daemon=True,
            name="purge",
        ).start()
    notifier.ready()
    stop.wait()
    notifier.stopping()
    log.info("shoal-dbd stopping")
    server.stop(grace=1).wait()
    if cfg.pid_file:
        Path(cfg.pid_file).unlink(missing_ok=True)
    return 0


def _reread_loop(
    path: str, service: AccountingService, reread: threading.Event, stop: threading.Event
) -> None:
    """SIGHUP (as `sacctmgr reconfigure` makes slurmdbd do): take slurmdbd.conf's PrivateData again;
    the other settings take effect on restart."""
    from shoal.conf.errors import ConfigError
    from shoal.conf.slurmdbd import load_slurmdbd_conf

    while not stop.is_set():
        if not reread.wait(timeout=1.0):
            continue
        reread.clear()
        try:
            words = load_slurmdbd_conf(path).private_data
        except ConfigError as exc:
            logging.getLogger("shoal.dbd").warning("SIGHUP: %s not re-read: %s", path, exc)
            continue
        service.set_private_data(frozenset(words))
        logging.getLogger("shoal.dbd").info("SIGHUP: PrivateData=%s", ",".join(words) or "(none)")


if __name__ == "__main__":
    raise SystemExit(main())
