from __future__ import annotations

from pathlib import Path

import pytest

from ctld.controller import Controller
from tests.unit.ctld.builders import make_controller


@pytest.fixture
def controller(tmp_path: Path) -> Controller:
    return make_controller(tmp_path)
