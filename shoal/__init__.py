"""The library every shoal process shares: config, formats, states, auth, agent, rpc."""

__version__ = "0.1.0"
