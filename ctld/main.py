"""shoal-ctld: the composition root. Reads slurm.conf, opens the state store, serves gRPC, runs the loops."""

from __future__ import annotations

import argparse
import logging
import os
import socket
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
    from ctld.service import ControllerService
    from ctld.store import StateStore
    from shoal.conf.slurm import SlurmConfig

PROG = "shoal-ctld"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = DaemonArgumentParser(prog=PROG, description="shoal controller daemon (slurmctld)")
    p.add_argument("-V", "--version", action="version", version=version_line())
    p.add_argument("-f", "--conf", help="slurm.conf (default: $SLURM_CONF, else /etc/slurm/slurm.conf)")
    p.add_argument(
        "-D", "--foreground", action="store_true", help="foreground, log copied to stderr (never forks)"
    )
    p.add_argument("-c", "--clear", action="store_true", help="start with empty state (discard saved jobs)")
    p.add_argument("-L", "--logfile", help="log file (default: SlurmctldLogFile, else stderr)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument(
        "--ctld-host", help=argparse.SUPPRESS
    )  # which SlurmctldHost line is this one (tests, shoal up --ha)
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
        setup_logging(
            args.logfile or cfg.slurmctld_log_file or None,
            logging.DEBUG if args.verbose else logging.INFO,
            args.foreground,
        )
    except OSError as exc:
        print(f"{PROG}: error: cannot open log file: {exc}", file=sys.stderr)
        return 1
    log = logging.getLogger("shoal.ctld")
    for warning in cfg.warnings:
        log.warning("%s", warning)

    from ctld import configless
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

    name, addr = own_control_host(cfg, args.ctld_host)
    address = f"{addr}:{cfg.slurmctld_port}"
    try:
        server = make_server([address], key, max_workers=32)
    except BindError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    # listening (and answering Ping) from the start: a standby is UP as a backup for `scontrol ping`
    service = ControllerService(None, cfg, host=name)
    files = configless.snapshot(
        cfg
    )  # what the primary serves (ClusterState.config_files; reconfigure renews it)
    if isinstance(files, dict):
        log.info("configless: serving %s", ", ".join(sorted(files)))
    elif configless.enabled(cfg):
        log.error("configless: %s", files.message)
    service.request_handover = lambda: _ask_primary_to_hand_over(cfg, key, name)
    add_to_server(service, server)
    server.start()
    log.info(
        "shoal-ctld listening on %s as %s (cluster %s, %d nodes)",
        address,
        name,
        cfg.cluster_name,
        len(cfg.nodes),
    )
    clear = args.clear
    lost = False
    while not stop.is_set():
        try:
            lease = _take_lease(cfg, stop, notifier)
            if stop.is_set():
                break
            store = open_store(cfg, clear=clear, epoch=None if lease is None else lease.epoch)
        except (StoreError, OSError) as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            server.stop(grace=1).wait()
            return 1
        clear = False  # -c is for the first term only: a later takeover keeps what the others saved
        try:
            end = _lead(cfg, args, key, store, lease, service, stop, hup, notifier)
        except StoreError as exc:  # the rebuild could not read the store
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            server.stop(grace=1).wait()
            return 1
        lost = end == "lost"
        if lost and lease is None:  # SQLite has no lease to wait for: nothing to stand by for
            break
        if end == "handed over" and lease is not None:
            stop.wait(lease.timeout)  # let the backup that asked take the lease before standing by for it
    notifier.stopping()
    log.info("shoal-ctld stopping")
    server.stop(grace=1).wait()
    return 0 if stop.is_set() else 1


def own_control_host(cfg: SlurmConfig, wanted: str | None = None) -> tuple[str, str]:
    """This ctld's SlurmctldHost line (name, address): `wanted` (--ctld-host), else the one naming this
    host (short or full hostname, as slurmctld matches), else the first."""
    hosts = cfg.control_hosts or ((cfg.control_machine, cfg.control_addr),)
    names = {wanted} if wanted else {socket.gethostname(), socket.gethostname().split(".")[0]}
    for name, addr in hosts:
        if name in names:
            return name, addr
    return hosts[0]


def _lead(
    cfg: SlurmConfig,
    args: argparse.Namespace,
    key: bytes,
    store: StateStore,
    lease: Lease | None,
    service: ControllerService,
    stop: threading.Event,
    hup: threading.Event,
    notifier: Notifier,
) -> str:
    """One term as the primary: rebuild memory from the store, serve until stopped, deposed or asked to
    hand over (scontrol takeover); then stop the loops and answer UNAVAILABLE again. How it ended:
    "stopped", "lost" (deposed) or "handed over"."""
    from ctld.controller import Controller
    from ctld.node_client import GrpcNodeActions

    log = logging.getLogger("shoal.ctld")
    actions = GrpcNodeActions(key)
    # recovery: nodes get a fresh SlurmdTimeout from now; the housekeeping loop pings them all at its first
    # tick, and a noded pinged by a new ctld registers again
    controller = Controller(cfg, store, key, actions)
    term = threading.Event()  # the end of this term: stop, or the lease lost
    lost = threading.Event()

    def _on_lost() -> None:  # deposed (docs/ha.md): stop serving; the new primary owns the state now
        if not lost.is_set():
            log.error("leadership lease lost to another shoal-ctld: stepping down")
        lost.set()
        service.serve(None)  # answer UNAVAILABLE at once
        term.set()
        controller.wake.set()

    store.on_fenced = _on_lost  # a write refused for a newer epoch: no need to wait for the renewal
    handed = threading.Event()

    def _hand_over() -> None:
        handed.set()
        service.serve(None)
        term.set()
        controller.wake.set()

    service.hand_over = _hand_over
    threads = [
        threading.Thread(
            target=_scheduler_loop,
            args=(controller, service.diag, term, args.sched_interval),
            daemon=True,
            name="sched",
        ),
        threading.Thread(
            target=_housekeeping_loop, args=(controller, term), daemon=True, name="housekeeping"
        ),
        threading.Thread(target=controller.accounting.run, args=(term,), daemon=True, name="accounting"),
        threading.Thread(
            target=_reconfigure_loop, args=(controller, hup, term), daemon=True, name="reconfigure"
        ),
    ]
    if lease is not None:
        threads.append(threading.Thread(target=lease.keep, args=(term, _on_lost), daemon=True, name="lease"))
    service.serve(controller)
    for t in threads:
        t.start()
    _write_pid_file(cfg)
    controller.wake.set()
    notifier.ready()  # READY=1 first: systemd (and the units' test) wait for that one
    if lease is not None:  # with backups, `systemctl status` tells the primary from a standby
        notifier.status("primary")
    while not term.wait(0.5):
        if stop.is_set():
            term.set()
    controller.wake.set()  # the scheduler loop sees `term` at once
    service.serve(None)
    for t in threads:
        t.join(timeout=5)
    actions.shutdown()
    store.close()
    if lease is not None:
        if not lost.is_set():
            lease.release()  # a clean stop or a handover: the backup takes at once
        lease.close()
    _remove_pid_file(cfg)
    service.hand_over = None
    if (lost.is_set() or handed.is_set()) and not stop.is_set():
        log.info("standing by: another shoal-ctld is the primary")
        notifier.status("standing by")
    return "lost" if lost.is_set() else "handed over" if handed.is_set() else "stopped"


def _ask_primary_to_hand_over(cfg: SlurmConfig, key: bytes, me: str) -> None:
    """scontrol takeover reached this standby: ask the other SlurmctldHosts (the lease's holder among
    them) to release the lease; this ctld's standby loop then takes it within a poll."""
    from shoal.rpc.client import Stub
    from shoal.v1 import controller_pb2

    def ask() -> None:
        for name, addr in cfg.control_hosts:
            if name == me:
                continue
            stub = Stub(f"{addr}:{cfg.slurmctld_port}", key)
            try:
                stub.call(
                    "/shoal.v1.Controller/Takeover",
                    controller_pb2.TakeoverRequest(relinquish=True),
                    controller_pb2.TakeoverResponse,
                    timeout=5.0,
                )
            except Exception as exc:  # grpc.RpcError: that one is down; the others may hold the lease
                logging.getLogger("shoal.ctld").info("takeover: %s did not answer: %s", name, exc)
            finally:
                stub.close()

    threading.Thread(target=ask, daemon=True, name="takeover").start()


def _write_pid_file(cfg: SlurmConfig) -> None:
    """The primary's pid (a standby does not write it: tools read it as "the controller")."""
    if not cfg.slurmctld_pid_file:
        return
    try:
        Path(cfg.slurmctld_pid_file).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.slurmctld_pid_file).write_text(f"{os.getpid()}\n")
    except OSError as exc:
        logging.getLogger("shoal.ctld").warning("cannot write pid file %s: %s", cfg.slurmctld_pid_file, exc)


def _remove_pid_file(cfg: SlurmConfig) -> None:
    if not cfg.slurmctld_pid_file:
        return
    path = Path(cfg.slurmctld_pid_file)
    try:
        if path.read_text().split()[:1] == [str(os.getpid())]:
            path.unlink()
    except (OSError, IndexError):
        pass


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
        "state store %s; leadership lease %s",
        cfg.state_store.location,
        f"held by {holder}" if holder else "free",
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
    """A cycle on each wake (events arriving during a cycle are served by the next one), at least
    SchedulerParameters sched_min_interval after the previous cycle ended; a cycle's backfill pass
    runs only every bf_interval (ctld/applier.py), and the loop wakes when one is owed, or when a
    deferred submission (batch_sched_delay) or batch job end (ctld/state.py batch_ended: its window
    grows with the last cycle's CPU) is due."""
    from ctld.applier import backfill_wait_s
    from ctld.sched_config import sched_min_interval_s

    log = logging.getLogger("shoal.ctld.sched")
    ended = 0.0
    while not stop.is_set():
        # bf_interval, batch_sched_delay: wake for the pass or the submissions that wait for one
        owed = [
            w
            for w in (
                backfill_wait_s(controller.state),
                controller.state.submit_wait_s(),
                controller.state.end_wait_s(),
            )
            if w is not None
        ]
        controller.wake.wait(min([interval, *owed]))
        pause = ended + sched_min_interval_s(controller.cfg) - time.monotonic()
        if pause > 0 and stop.wait(pause):
            return
        controller.wake.clear()
        controller.state.cycle_starts()
        if stop.is_set():
            return
        try:
            with controller.state.reading():
                diag.observe(controller.jobs.values())  # sdiag's job counts, before the pass starts some
                depth = diag.pending
            start, cpu = time.perf_counter_ns(), time.thread_time()
            passes = controller.state.backfill_passes
            controller.schedule()
            backfilled = controller.state.backfill_passes != passes
            controller.state.cycle_ended(time.thread_time() - cpu, backfilled)
            diag.sched_pass((time.perf_counter_ns() - start) // 1000, depth, backfilled)
            with controller.state.reading():
                diag.observe(controller.jobs.values())
        except Exception:  # keep scheduling; a bug must not take the controller down
            log.exception("scheduling cycle failed")
        ended = time.monotonic()


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
    ping_every = (
        max(1.0, min(controller.cfg.slurmd_timeout / 3.0, 30.0)) if controller.cfg.slurmd_timeout else 30.0
    )
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
