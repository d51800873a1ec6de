"""shoal-noded: the node agent."""

import shoal  # noqa: F401  (quiets gRPC's C core before grpc is imported)
