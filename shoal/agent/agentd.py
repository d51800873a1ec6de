"""shoal-agentd: the local agent of a login node (like Slurm's sackd or munge's munged).

Reads slurm.conf for the controller's address, the cluster key and the socket path, then serves
the commands' unix socket until SIGTERM/SIGINT, when it removes the socket and exits 0.
It always runs in the foreground (`-D` also copies the log to stderr, as for the other daemons); run it
under systemd (etc/systemd/shoal-agentd.service) or `shoal up`.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import threading

from shoal import configless, version_line
from shoal.agent.server import AgentServer, AgentServerError, targets_from_config
from shoal.auth.errors import AuthError
from shoal.auth.key import load_key
from shoal.daemon import LOG_FORMAT, DaemonArgumentParser, Notifier, install_signals, setup_logging

PROG = "shoal-agentd"
DEFAULT_CONF = "/etc/slurm/slurm.conf"
DEFAULT_CONF_CACHE = "/var/spool/shoal/agentd/conf-cache"


class _StartError(Exception):
    """A reason not to start, printed as `shoal-agentd: error: <message>`."""


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = DaemonArgumentParser(
        prog=PROG, description="Local shoal agent: forwards commands to the daemons."
    )
    parser.add_argument("-V", "--version", action="version", version=version_line())
    parser.add_argument("-f", "--conf", metavar="PATH", help="slurm.conf to read (default: $SLURM_CONF)")
    parser.add_argument("--socket", metavar="PATH", help="unix socket to serve (default: AgentSocket)")
    parser.add_argument(
        "-D", dest="foreground", action="store_true", help="foreground, log copied to stderr (never forks)"
    )
    parser.add_argument("-L", "--logfile", metavar="PATH", help="log to PATH (default: stderr)")
    parser.add_argument(
        "--no-command-runner",
        action="store_true",
        help="do not start the warm command runner (commands then start Python each time)",
    )
    parser.add_argument("--pidfile", metavar="PATH", help="write the process id to PATH")
    configless.add_arguments(parser, DEFAULT_CONF_CACHE)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    return parser.parse_args(argv)


def _build_server(args: argparse.Namespace) -> AgentServer:
    from shoal.conf import load_slurm_conf  # the full parser: only daemons pay for it
    from shoal.conf.errors import ConfigError

    conf_path = args.conf or os.environ.get("SLURM_CONF") or DEFAULT_CONF
    key_file = ""
    if args.conf_server:
        try:
            conf_path = configless.start(args.conf_server, args.conf_cache, args.key_file).conf
        except configless.ConfiglessError as exc:
            raise _StartError(str(exc)) from exc
        key_file = args.key_file  # the key that fetched the files is the cluster's
    try:
        cfg = load_slurm_conf(conf_path)
    except ConfigError as exc:
        raise _StartError(str(exc)) from exc
    except OSError as exc:
        raise _StartError(f"cannot read {conf_path}: {exc.strerror or exc}") from exc
    try:
        key = load_key(key_file or cfg.auth_key_file)
    except AuthError as exc:
        raise _StartError(exc.message) from exc
    socket_path = args.socket or cfg.agent_socket
    return AgentServer(
        socket_path,
        key,
        targets_from_config(cfg),
        host=socket.gethostname(),
        command_runner=not args.no_command_runner,
        connect_grace=float(cfg.msg_timeout),
    )


def _write_pidfile(path: str) -> None:
    try:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(f"{os.getpid()}\n")
    except OSError as exc:
        raise _StartError(f"cannot write pid file {path}: {exc.strerror or exc}") from exc


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    notifier = Notifier()
    level = logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING
    try:
        setup_logging(
            args.logfile,
            level,
            args.foreground,
            LOG_FORMAT if args.logfile else f"{PROG}: %(levelname)s: %(message)s",
        )
    except OSError as exc:
        print(f"{PROG}: error: cannot open log file {args.logfile}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    install_signals(stop, PROG)
    # the pid file first: whoever sees the socket served may read it at once
    wrote_pid = False
    server = None
    try:
        if args.pidfile:
            _write_pidfile(args.pidfile)
            wrote_pid = True
        server = _build_server(args)
        server.start()
        notifier.ready()
        while not stop.wait(1.0):
            pass
        notifier.stopping()
    except (_StartError, AgentServerError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
        if wrote_pid:
            try:
                os.unlink(args.pidfile)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
