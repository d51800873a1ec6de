"""sacctmgr's table rendering against what 22.05 prints (scenarios 163, 164 and the running one)."""

from __future__ import annotations

import pytest

from cli.sacctmgr import main, parse_format, render


@pytest.mark.parametrize(
    "fmt,header",
    [
        ("name,priority,maxwall,maxtrespu", "Name|Priority|MaxWall|MaxTRESPU"),
        ("user,defaultaccount,account", "User|Def Acct|Account"),
        ("USER,adminlevel,fairshare,defaultqos,parentname,id", "User|Admin|Share|Def QOS|ParentName|ID"),
        ("maxtresperjob,maxwalldurationperjob,description", "MaxTRES|MaxWall|Descr"),
        ("account,description,organization", "Account|Descr|Org"),
    ],
    ids=["qos lower case", "user withassoc", "upper case and aliases", "long aliases", "account"],
)
def test_format_headers_are_slurms_names_in_any_case(fmt: str, header: str) -> None:
    assert render([], parse_format(fmt), parsable="P", header=True) == [header]


def test_fixed_width_header_is_slurms_name_too() -> None:
    lines = render(
        [{"user": "alice", "defaultaccount": "research", "adminlevel": "None"}],
        parse_format("user%5,defaultaccount,adminlevel"),
        parsable="",
        header=True,
    )
    assert lines == [
        " User   Def Acct     Admin ",
        "----- ---------- --------- ",
        "alice   research      None ",
    ]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--bogus"], "sacctmgr: unrecognized option '--bogus'"),
        (["-Z"], "sacctmgr: invalid option -- 'Z'"),
        (["-iZ", "show", "qos"], "sacctmgr: invalid option -- 'Z'"),
        (["--parsable2", "--bogus", "show", "qos"], "sacctmgr: unrecognized option '--bogus'"),
    ],
    ids=["long", "short", "joined", "after a good one"],
)
def test_option_refusals_in_getopts_words(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """22.05 (captured 2026-12-01): getopt's words and the hint, exit 1; `-Pn` is two options."""
    assert main(argv) == 1
    assert capsys.readouterr() == ("", f'{line}\nTry "sacctmgr --help" for more information\n')


def test_short_options_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-Pn", "-V"]) == 0
    assert capsys.readouterr().out.startswith("slurm 22.05")
