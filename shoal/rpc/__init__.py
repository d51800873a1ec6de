"""shoal/rpc: gRPC channel and server helpers shared by the daemons (commands never import this)."""

from __future__ import annotations

METADATA_KEY = "shoal-cred-bin"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# The details of a standby (or deposed) ctld's UNAVAILABLE: it did nothing, so a client may send the
# request to the next SlurmctldHost (docs/ha.md)
NOT_PRIMARY = "not the primary"

__all__ = ["MAX_MESSAGE_BYTES", "METADATA_KEY", "NOT_PRIMARY"]
