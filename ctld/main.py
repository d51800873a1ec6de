"""shoal-ctld: the composition root. Reads slurm.conf, opens the state store, serves gRPC, runs the loops."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from shoal import version_line
from shoal.daemon import DaemonArgumentParser, Notifier, install_signals, setup_logging

if TYPE_CHECKING:
    from ctld.controller import Controller
    from ctld.diag import Diag
    from ctld.leader import Lease
    from shoal.conf.slurm import SlurmConfig

PROG = "shoal-ctld"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = DaemonArgumentParser(prog=PROG, description="shoal controller daemon (slurmctld)")
    p.add_argument("-V", "--version", action="version", version=version_line())
    p.add_argument("-f", "--conf", help="slurm.conf (default: $SLURM_CONF, else /etc/slurm/slurm.conf)")
    p.add_argument("-D", "--foreground", action="store_true", help="foreground, log copied to stderr (never forks)")
    p.add_argument("-c", "--clear", action="store_true", help="start with empty state (discard saved jobs)")
    p.add_argument("-L", "--logfile", help="log file (default: SlurmctldLogFile, else stderr)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("--sched-interval", type=float, default=1.0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    notifier = Notifier()
    from shoal.conf import ConfigError, load_slurm_conf

    try:
        cfg = load_slurm_conf(args.conf)
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    try:
        setup_logging(args.logfile or cfg.slurmctld_log_file or None,
                      logging.DEBUG if args.verbose else logging.INFO, args.foreground)
    except OSError as exc:
        print(f"{PROG}: error: cannot open log file: {exc}", file=sys.stderr)
        return 1
    log = logging.getLogger("shoal.ctld")
    for warning in cfg.warnings:
        log.warning("%s", warning)

    from ctld import configless
    from ctld.controller import Controller
    from ctld.node_client import GrpcNodeActions
    from ctld.service import ControllerService, add_to_server
    from ctld.store import StoreError
    from ctld.store_open import open_store
    from shoal.auth.errors import AuthError
    from shoal.auth.key import load_key
    from shoal.rpc.server import BindError, make_server

    try:
        key = load_key(cfg.auth_key_file)
    except AuthError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1

    stop = threading.Event()
    hup = threading.Event()  # SIGHUP: reconfigure (as scontrol reconfigure), done by _reconfigure_loop
    install_signals(stop, PROG, on_hup=hup.set)  # SIGTERM/SIGINT stop (also while standing by for the lease)

    try:
        lease = _take_lease(cfg, stop, notifier)
        if stop.is_set():
            return 0
        store = open_store(cfg, clear=args.clear, epoch=None if lease is None else lease.epoch)
    except (StoreError, OSError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1

    actions = GrpcNodeActions(key)
    controller = Controller(cfg, store, key, actions)
    address = f"{cfg.control_addr}:{cfg.slurmctld_port}"
    try:
        server = make_server([address], key, max_workers=32)
    except BindError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    service = ControllerService(controller)
    files = controller.state.config_files
    if isinstance(files, dict):
        log.info("configless: serving %s", ", ".join(sorted(files)))
    elif configless.enabled(cfg):
        log.error("configless: %s", files.message)
    add_to_server(service, server)
    server.start()
    if cfg.slurmctld_pid_file:
        try:
            Path(cfg.slurmctld_pid_file).parent.mkdir(parents=True, exist_ok=True)
            Path(cfg.slurmctld_pid_file).write_text(f"{os.getpid()}\n")
        except OSError as exc:
            log.warning("cannot write pid file %s: %s", cfg.slurmctld_pid_file, exc)
    log.info("shoal-ctld listening on %s (cluster %s, %d nodes)", address, cfg.cluster_name, len(cfg.nodes))
    lost = threading.Event()

    def _on_lost() -> None:  # deposed (docs/ha.md): stop serving; the new primary owns the state now
        if not lost.is_set():
            log.error("leadership lease lost to another shoal-ctld: stepping down")
        lost.set()
        stop.set()
        controller.wake.set()

    store.on_fenced = _on_lost  # a write refused for a newer epoch: no need to wait for the renewal

    threads = [
        threading.Thread(target=_scheduler_loop, args=(controller, service.diag, stop, args.sched_interval),
                         daemon=True, name="sched"),
        threading.Thread(target=_housekeeping_loop, args=(controller, stop), daemon=True, name="housekeeping"),
        threading.Thread(target=controller.accounting.run, args=(stop,), daemon=True, name="accounting"),
        threading.Thread(target=_reconfigure_loop, args=(controller, hup, stop), daemon=True, name="reconfigure"),
    ]
    if lease is not None:
        threads.append(threading.Thread(target=lease.keep, args=(stop, _on_lost), daemon=True, name="lease"))
    for t in threads:
        t.start()
    controller.wake.set()
    notifier.ready()
    stop.wait()
    notifier.stopping()
    controller.wake.set()  # the scheduler loop sees `stop` at once
    log.info("shoal-ctld stopping")
    server.stop(grace=1).wait()
    actions.shutdown()
    store.close()
    if lease is not None:
        lease.release()
        lease.close()
    if cfg.slurmctld_pid_file:
        Path(cfg.slurmctld_pid_file).unlink(missing_ok=True)
    return 1 if lost.is_set() else 0


def _take_lease(cfg: SlurmConfig, stop: threading.Event, notifier: Notifier) -> Lease | None:
    """On MariaDB, the leadership lease (docs/ha.md): stand by until no other shoal-ctld holds it.

    A database that cannot be reached at start is an error for the admin (StoreError); later, while
    standing by, it is retried. SQLite has no lease: its store is this host's alone.
    """
    if cfg.state_store.kind != "mysql":
        return None
    from ctld.leader import Lease, wait_for_lease
    from ctld.mariadb import read_password

    lease = Lease(cfg.state_store, read_password(cfg.state_store.pass_file))
    holder = lease.state().holder
    logging.getLogger("shoal.ctld").info(
        "state store %s; leadership lease %s", cfg.state_store.location, f"held by {holder}" if holder else "free"
    )
    if holder:
        # a standby is a started service (systemd's Type=notify would otherwise kill it at its start timeout)
        notifier.status(f"standing by: the leadership lease is held by {holder}")
        notifier.ready()
    wait_for_lease(lease, stop)
    if holder:
        notifier.status("primary")
    return lease


def _scheduler_loop(controller: Controller, diag: Diag, stop: threading.Event, interval: float) -> None:
    log = logging.getLogger("shoal.ctld.sched")
    while not stop.is_set():
        controller.wake.wait(interval)
        controller.wake.clear()
        if stop.is_set():
            return
        try:
            with controller.state.reading():
                diag.observe(controller.jobs.values())  # sdiag's job counts, before the pass starts some
                depth = diag.pending
            start = time.perf_counter_ns()
            controller.schedule()
            diag.sched_pass((time.perf_counter_ns() - start) // 1000, depth)
            with controller.state.reading():
                diag.observe(controller.jobs.values())
        except Exception:  # keep scheduling; a bug must not take the controller down
            log.exception("scheduling cycle failed")


def _reconfigure_loop(controller: Controller, hup: threading.Event, stop: threading.Event) -> None:
    """SIGHUP does what `scontrol reconfigure` does; a refusal is logged and the old configuration runs on."""
    from ctld.errors import SlurmError

    log = logging.getLogger("shoal.ctld")
    while not stop.is_set():
        if not hup.wait(1.0):
            continue
        hup.clear()
        log.info("SIGHUP: log file reopened; reconfiguring")
        try:
            controller.reconfigure()
        except SlurmError as exc:
            log.error("reconfigure refused, the configuration is unchanged: %s", exc.message)
        except Exception:  # a bug must not take the controller down
            log.exception("reconfigure failed")


def _housekeeping_loop(controller: Controller, stop: threading.Event) -> None:
    log = logging.getLogger("shoal.ctld.housekeeping")
    ping_every = max(1.0, min(controller.cfg.slurmd_timeout / 3.0, 30.0)) if controller.cfg.slurmd_timeout else 30.0
    last_ping = 0.0
    while not stop.wait(1.0):
        try:
            controller.housekeeping()
            now = controller.clock()
            if now - last_ping >= ping_every:
                last_ping = now
                controller.ping_nodes()
        except Exception:
            log.exception("housekeeping failed")


if __name__ == "__main__":
    raise SystemExit(main())
