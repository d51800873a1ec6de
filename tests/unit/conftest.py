"""Fixtures the unit tests share."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest


@pytest.fixture
def utc() -> Iterator[None]:
    """Local time is UTC for the test: output compared with captures of real Slurm prints UTC times."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()
