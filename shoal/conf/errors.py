"""The one error type of the config loaders; its message already names the file and line."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration file that cannot be used: str() is "<file>:<line>: <what is wrong>"."""
