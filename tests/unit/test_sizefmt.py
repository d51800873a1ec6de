"""Memory sizes as users type them (--mem, DefMemPerCPU) and as Slurm prints TRES memory."""

from __future__ import annotations

import pytest

from shoal.sizefmt import format_size_mb, parse_size_mb


@pytest.mark.parametrize(
    ("text", "default_unit", "mb"),
    [
        ("4000", "M", 4000),
        ("0", "M", 0),
        ("512M", "M", 512),
        ("512m", "M", 512),
        ("4G", "M", 4096),
        ("4g", "M", 4096),
        ("1T", "M", 1048576),
        ("100K", "M", 1),
        ("1024K", "M", 1),
        ("1025K", "M", 2),
        ("0K", "M", 0),
        ("2", "G", 2048),
        ("2048", "K", 2),
        (" 16G ", "M", 16384),
    ],
    ids=repr,
)
def test_parse_size_mb(text: str, default_unit: str, mb: int) -> None:
    assert parse_size_mb(text, default_unit) == mb


@pytest.mark.parametrize("text", ["", "G", "lots", "-1", "-4G", "1.5G", "4GB", "4X", "4 G", "１２"], ids=repr)
def test_parse_size_mb_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size_mb(text)


@pytest.mark.parametrize(
    ("mb", "text"),
    [
        (64000, "62.50G"),  # scontrol show node CfgTRES
        (256000, "250G"),  # scontrol show partition TRES
        (128000, "125G"),
        (3000, "3000M"),  # scontrol show job TRES
        (16000, "16000M"),
        (4000, "4000M"),
        (500, "500M"),
        (1024, "1G"),
        (1536, "1.50G"),
        (1048576, "1T"),
        (0, "0M"),
    ],
    ids=repr,
)
def test_format_size_mb_as_slurm_tres(mb: int, text: str) -> None:
    assert format_size_mb(mb) == text
