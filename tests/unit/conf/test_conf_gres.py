"""GRES specs ("gpu:h100:8") and gres.conf: which devices back a node's generic resources."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.conf import ConfigError, GresSpec, format_gres, load_gres_conf, parse_gres, parse_gres_conf


@pytest.mark.parametrize(
    ("text", "specs"),
    [
        ("gpu:h100:8", (GresSpec("gpu", "h100", 8),)),
        ("gpu:2", (GresSpec("gpu", None, 2),)),
        ("gpu", (GresSpec("gpu", None, 1),)),
        ("gpu:h100", (GresSpec("gpu", "h100", 1),)),
        ("gpu:h100:8,nic:1", (GresSpec("gpu", "h100", 8), GresSpec("nic", None, 1))),
        ("gpu:0", (GresSpec("gpu", None, 0),)),
        ("mps:1K", (GresSpec("mps", None, 1024),)),
        ("bandwidth:lustre:no_consume:4G", (GresSpec("bandwidth", "lustre", 4 << 30),)),
        ("gpu:a100:2(S:0,1),nic:1", (GresSpec("gpu", "a100", 2), GresSpec("nic", None, 1))),
        ("gres:gpu:8", (GresSpec("gpu", None, 8),)),
        ("gres/gpu:h100:1", (GresSpec("gpu", "h100", 1),)),
        ("", ()),
        ("(null)", ()),
    ],
    ids=repr,
)
def test_parse_gres(text: str, specs: tuple[GresSpec, ...]) -> None:
    assert parse_gres(text) == specs


@pytest.mark.parametrize(
    "text", ["gpu:a:b:c", ":2", "gpu:h100:8,", "gp u:2", "gpu:h100:-1", "gpu::2"], ids=repr
)
def test_parse_gres_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_gres(text)


@pytest.mark.parametrize(
    ("specs", "text"),
    [
        ((GresSpec("gpu", "h100", 8),), "gpu:h100:8"),
        ((GresSpec("gpu", None, 2), GresSpec("nic", None, 1)), "gpu:2,nic:1"),
        ((), ""),
    ],
    ids=repr,
)
def test_format_gres(specs: tuple[GresSpec, ...], text: str) -> None:
    assert format_gres(specs) == text
    assert parse_gres(text) == specs


def test_gres_conf_lines_per_node() -> None:
    conf = parse_gres_conf(
        "AutoDetect=NVML\n"
        "NodeName=n[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-15 Links=-1,2,2,2\n"
        "NodeName=n3 AutoDetect=off\n"
        "NodeName=n3 Name=gpu Type=a100 File=/dev/nvidia0,/dev/nvidia1\n"
        "Name=nic Count=2\n"
        "Name=mps Count=1K\n"
        "NodeName=n2 Name=gpu MultipleFiles=/dev/dri/card0,/dev/dri/renderD128\n"
    )
    assert conf.warnings == ()
    assert conf.autodetect == "nvml"
    assert conf.autodetect_for("n3") == "off" and conf.autodetect_for("n1") == "nvml"
    n1 = conf.for_node("n1")
    assert [(line.name, line.type, line.count) for line in n1] == [
        ("gpu", "h100", 4),
        ("nic", None, 2),
        ("mps", None, 1024),
    ]
    assert n1[0].files == ("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3")
    assert (n1[0].cores, n1[0].links) == ("0-15", "-1,2,2,2")
    assert [(line.type, line.count) for line in conf.for_node("n3") if line.name == "gpu"] == [("a100", 2)]
    assert [line.count for line in conf.for_node("n2") if line.name == "gpu"] == [4, 1]
    assert conf.for_node("n1")[0].source == "gres.conf:2"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Name=gpu File=/dev/nvidia[0-1] Count=4\n", "gres.conf:1: Count=4 does not match 2 File entries"),
        ("Name=gpu Count=many\n", "gres.conf:1: invalid value for Count: 'many'"),
        ("NodeName=n1 Type=h100\n", "gres.conf:1: gres.conf line has no Name="),
        ("AutoDetect=magic\n", "gres.conf:1: invalid value for AutoDetect: 'magic'"),
        ("NodeName=n[1- Name=gpu\n", "gres.conf:1: invalid value for NodeName"),
    ],
    ids=lambda v: v.strip()[:30],
)
def test_gres_conf_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_gres_conf(text)
    assert message in str(caught.value)


def test_gres_conf_unknown_key_warns_and_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "gres.conf"
    path.write_text("# GPUs\nname=gpu file=/dev/nvidia0 Colour=green\n")
    conf = load_gres_conf(path)
    assert conf.warnings == (f"{path}:2: unknown key 'Colour' ignored",)
    assert conf.for_node("anything")[0].count == 1
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        load_gres_conf(tmp_path / "missing.conf")


def test_gres_conf_beside_slurm_conf_is_optional(tmp_path: Path) -> None:
    from shoal.conf import load_slurm_conf

    (tmp_path / "slurm.conf").write_text("SlurmctldHost=h\nGresTypes=gpu\nNodeName=n1 Gres=gpu:1\n")
    assert load_slurm_conf(tmp_path / "slurm.conf").gres_conf.lines == ()
    (tmp_path / "gres.conf").write_text("Name=gpu File=/dev/nvidia0 Bogus=1\n")
    config = load_slurm_conf(tmp_path / "slurm.conf")
    assert config.gres_conf.for_node("n1")[0].files == ("/dev/nvidia0",)
    assert config.warnings == (f"{tmp_path / 'gres.conf'}:1: unknown key 'Bogus' ignored",)
