"""The one exception every authentication failure raises, with a message fit for a user."""

from __future__ import annotations


class AuthError(Exception):
    """A key or credential problem; `str(exc)` is the user-facing message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
