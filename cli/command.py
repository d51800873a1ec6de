"""`shoal-command NAME [ARGS]`: run one of the short commands in this interpreter.

The installed `squeue`, `sbatch` ... are the native launcher (cli/native/command.c), which hands the
command to the local agent's warm runner; when no runner answers it execs this instead, so the
command behaves the same, only slower to start.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = (
    "sbatch",
    "squeue",
    "sinfo",
    "scontrol",
    "scancel",
    "sacct",
    "sacctmgr",
    "sprio",
    "sshare",
    "sreport",
    "sdiag",
    "sstat",
)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print(f"usage: shoal-command {{{','.join(COMMANDS)}}} [ARGS ...]", file=sys.stderr)
        return 2
    name = args[0]
    sys.argv = [name, *args[1:]]
    result: int = importlib.import_module(f"cli.{name}").main()
    return result


if __name__ == "__main__":
    sys.exit(main())
