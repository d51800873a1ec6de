"""Settings for the whole test session: every worker and everything the tests start inherit them."""

from __future__ import annotations

import os
import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Bytecode is cached, as an installed package's is. Some machines export PYTHONDONTWRITEBYTECODE
    # (this project's CI machines do); then every daemon, command and job step the e2e tests start
    # would compile shoal's modules from source again: about a tenth of an e2e module's CPU.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
