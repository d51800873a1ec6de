"""The library every shoal process shares: config, formats, states, auth, agent, rpc."""

import os as _os

__version__ = "0.1.0"
# The Slurm release whose interface shoal matches; tools parse `sinfo --version` for it.
SLURM_VERSION = "22.05.8"


def version_line() -> str:
    """What `-V/--version` prints for every command and daemon: Slurm's release first, for the tools."""
    return f"slurm {SLURM_VERSION} (shoal {__version__})"


# gRPC's C core logs its own lines (e.g. a failed bind) to stderr before shoal can report the failure
# in one clear line; keep the core quiet unless an admin asks for it (GRPC_VERBOSITY=debug). This must
# run before grpc is first imported, which is why it lives here and the daemon packages import shoal first.
_os.environ.setdefault("GRPC_VERBOSITY", "NONE")
