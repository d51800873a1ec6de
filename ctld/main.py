"""shoal-ctld: the composition root. Reads slurm.conf, opens the state store, serves gRPC, runs the loops."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from shoal import version_line

if TYPE_CHECKING:
    from ctld.controller import Controller

PROG = "shoal-ctld"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description="shoal controller daemon (slurmctld)")
    p.add_argument("-V", "--version", action="version", version=version_line())
    p.add_argument("-f", "--conf", help="slurm.conf (default: $SLURM_CONF, else /etc/slurm/slurm.conf)")
    p.add_argument("-D", "--foreground", action="store_true", help="run in the foreground (the default)")
    p.add_argument("-c", "--clear", action="store_true", help="start with empty state (discard saved jobs)")
    p.add_argument("-L", "--logfile", help="log file (default: SlurmctldLogFile, else stderr)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("--sched-interval", type=float, default=1.0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _setup_logging(path: str | None, verbose: int) -> None:
    level = logging.DEBUG if verbose > 0 else logging.INFO
    handler: logging.Handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(name)s %(levelname)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from shoal.conf import ConfigError, load_slurm_conf

    try:
        cfg = load_slurm_conf(args.conf)
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    try:
        _setup_logging(args.logfile or cfg.slurmctld_log_file or None, args.verbose)
    except OSError as exc:
        print(f"{PROG}: error: cannot open log file: {exc}", file=sys.stderr)
        return 1
    log = logging.getLogger("shoal.ctld")
    for warning in cfg.warnings:
        log.warning("%s", warning)

    from ctld.controller import Controller
    from ctld.node_client import GrpcNodeActions
    from ctld.service import ControllerService
    from ctld.store import StateStore, StoreError
    from shoal.auth.errors import AuthError
    from shoal.auth.key import load_key
    from shoal.rpc.server import BindError, make_server
    from shoal.v1 import controller_pb2_grpc

    try:
        key = load_key(cfg.auth_key_file)
    except AuthError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    state_dir = cfg.state_save_location or "/var/spool/shoal/ctld"
    try:
        if args.clear:
            db = Path(state_dir) / "ctld_state.db"
            for suffix in ("", "-wal", "-shm"):
                Path(str(db) + suffix).unlink(missing_ok=True)
        store = StateStore(state_dir)
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
    controller_pb2_grpc.add_ControllerServicer_to_server(ControllerService(controller), server)
    server.start()
    if cfg.slurmctld_pid_file:
        try:
            Path(cfg.slurmctld_pid_file).parent.mkdir(parents=True, exist_ok=True)
            Path(cfg.slurmctld_pid_file).write_text(f"{os.getpid()}\n")
        except OSError as exc:
            log.warning("cannot write pid file %s: %s", cfg.slurmctld_pid_file, exc)
    log.info("shoal-ctld listening on %s (cluster %s, %d nodes)", address, cfg.cluster_name, len(cfg.nodes))

    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        stop.set()
        controller.wake.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    threads = [
        threading.Thread(target=_scheduler_loop, args=(controller, stop, args.sched_interval), daemon=True, name="sched"),
        threading.Thread(target=_housekeeping_loop, args=(controller, stop), daemon=True, name="housekeeping"),
        threading.Thread(target=controller.accounting.run, args=(stop,), daemon=True, name="accounting"),
    ]
    for t in threads:
        t.start()
    controller.wake.set()
    stop.wait()
    log.info("shoal-ctld stopping")
    server.stop(grace=1).wait()
    actions.shutdown()
    store.close()
    if cfg.slurmctld_pid_file:
        Path(cfg.slurmctld_pid_file).unlink(missing_ok=True)
    return 0


def _scheduler_loop(controller: Controller, stop: threading.Event, interval: float) -> None:
    log = logging.getLogger("shoal.ctld.sched")
    while not stop.is_set():
        controller.wake.wait(interval)
        controller.wake.clear()
        if stop.is_set():
            return
        try:
            controller.schedule()
        except Exception:  # keep scheduling; a bug must not take the controller down
            log.exception("scheduling cycle failed")


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
