"""The cluster key file: created once, 0600, readable with clear errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from shoal.auth import AuthError, generate_key, load_key


def test_generate_creates_private_hex_key_in_new_directory(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "shoal" / "cluster.key"
    key = generate_key(str(path))
    assert len(key) == 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.read_text().strip() == key.hex()
    assert load_key(str(path)) == key


def test_generate_never_overwrites_an_existing_key(tmp_path: Path) -> None:
    path = str(tmp_path / "cluster.key")
    first = generate_key(path)
    assert generate_key(path) == first
    assert load_key(path) == first


def test_generate_chowns_to_uid(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    path = tmp_path / "cluster.key"
    generate_key(str(path), uid=65534)
    assert os.stat(path).st_uid == 65534


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "No such file or directory"),
        ("not hex at all\n", "not a hex key"),
        ("abcd\n", "key too short"),
    ],
    ids=["missing", "garbage", "short"],
)
def test_load_key_refuses_with_the_path_and_reason(tmp_path: Path, content: str | None, reason: str) -> None:
    path = tmp_path / "cluster.key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(AuthError) as info:
        load_key(str(path))
    assert str(info.value).startswith(f"cannot read cluster key {path}: ")
    assert reason in str(info.value)
