"""shoal-noded: the node agent."""
