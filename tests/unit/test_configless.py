"""The configless client's pure parts: --conf-server's syntax and the cache it rewrites."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.configless import parse_servers, write_cache


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("head", ["head:6817"]),
        ("head:7000", ["head:7000"]),
        ("head,backup:7000", ["head:6817", "backup:7000"]),
        ("10.253.0.1", ["10.253.0.1:6817"]),
    ],
    ids=["host", "port", "backup", "address"],
)
def test_conf_server(spec: str, want: list[str]) -> None:
    assert parse_servers(spec) == want


@pytest.mark.parametrize("spec", ["", ",", "head:", "head:x", ":6817", "head:70000"])
def test_bad_conf_server(spec: str) -> None:
    with pytest.raises(ValueError, match="--conf-server"):
        parse_servers(spec)


def test_the_cache_holds_exactly_what_was_served_last(tmp_path: Path) -> None:
    cache = tmp_path / "conf-cache"
    write_cache(cache, {"slurm.conf": "A=1\n", "topology.conf": "t\n", "conf.d/x.conf": "x\n"})
    write_cache(cache, {"slurm.conf": "A=2\n", "gres.conf": "g\n"})
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()) == [
        "gres.conf",
        "slurm.conf",
    ]
    assert (cache / "slurm.conf").read_text() == "A=2\n"
    assert oct((cache / "slurm.conf").stat().st_mode & 0o777) == "0o644"


def test_a_served_name_cannot_leave_the_cache(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="outside the cache"):
        write_cache(tmp_path / "c", {"slurm.conf": "", "../evil": "x"})
    assert not (tmp_path / "evil").exists()
    assert not (tmp_path / "c" / "slurm.conf").exists()  # nothing written: the copy stays whole
