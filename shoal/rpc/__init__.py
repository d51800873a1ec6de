"""shoal/rpc: gRPC channel and server helpers shared by the daemons (commands never import this)."""

from __future__ import annotations

METADATA_KEY = "shoal-cred-bin"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

__all__ = ["MAX_MESSAGE_BYTES", "METADATA_KEY"]
