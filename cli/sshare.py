"""sshare: each association's shares, usage and fair-share factor, as the controller computes them.

`sshare [-a] [-l] [-n] [-P|-p] [-U] [-u users] [-A accounts]`. Without -a only the caller's own user rows
are listed (with every account), as Slurm does; -U lists the user rows alone, unindented.
"""

from __future__ import annotations

import getopt
import os
import pwd
import sys
from collections.abc import Mapping, Sequence

from cli.common import CommandError, ctld, run_main
from cli.options import OptionError, read_getopt
from shoal import version_line
from shoal.sharefmt import share_cell
from shoal.v1 import controller_pb2 as pb

PROG = "sshare"
USAGE = "Usage: sshare [-A accounts] [-a] [-l] [-n] [-o format] [-p] [-P] [-U] [-u users] [--help]"
# (header, width, right-aligned)
COLUMNS = {
    "account": ("Account", 20, False),
    "user": ("User", 10, True),
    "raw_shares": ("RawShares", 10, True),
    "norm_shares": ("NormShares", 11, True),
    "raw_usage": ("RawUsage", 11, True),
    "norm_usage": ("NormUsage", 11, True),
    "effective_usage": ("EffectvUsage", 13, True),
    "fairshare": ("FairShare", 10, True),
    "level_fs": ("LevelFS", 10, True),
    "grp_tres_mins": ("GrpTRESMins", 30, True),
    "tres_run_mins": ("TRESRunMins", 30, True),
}
# TRES lists: a value longer than its column ends in "+" at the column's last place (22.05)
MARKED_WHEN_CUT = frozenset({"grp_tres_mins", "tres_run_mins"})
DEFAULT = ("account", "user", "raw_shares", "norm_shares", "raw_usage", "effective_usage", "fairshare")
LONG = (
    "account",
    "user",
    "raw_shares",
    "norm_shares",
    "raw_usage",
    "norm_usage",
    "effective_usage",
    "fairshare",
    "level_fs",
    "grp_tres_mins",
    "tres_run_mins",
)


def parse_format(text: str) -> tuple[list[str], dict[str, int]]:
    """`-o Account%8,user`: the columns (a name may be a prefix, any case) and the widths typed with
    them (such a column is right-aligned, as 22.05 does); an unknown name is 22.05's error."""
    columns: list[str] = []
    widths: dict[str, int] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        typed, _, width = item.partition("%")
        key = next((k for k, c in COLUMNS.items() if typed and c[0].lower().startswith(typed.lower())), None)
        if key is None:
            raise CommandError(f'Invalid field requested: "{typed.lower()}"')
        columns.append(key)
        if width.isdigit():
            widths[key] = int(width)
    return columns, widths


def render(
    rows: Sequence[pb.ShareRow],
    columns: Sequence[str],
    header: bool = True,
    parsable: str = "",
    indent: bool = True,
    widths: Mapping[str, int] | None = None,
) -> list[str]:
    """The lines for `rows`; `parsable` "|" (-p, trailing delimiter) or "P" (-P, none) or "" (aligned);
    `widths`: columns given a width by -o (right-aligned)."""
    lines: list[str] = []
    given = widths or {}

    def shape(c: str) -> tuple[int, bool]:
        _, width, right = COLUMNS[c]
        return (given[c], True) if c in given else (width, right)

    if parsable:
        sep = "|"
        end = sep if parsable == "|" else ""
        if header:
            lines.append(sep.join(COLUMNS[c][0] for c in columns) + end)
        lines += [sep.join(share_cell(r, c, False, indent) for c in columns) + end for r in rows]
        return lines

    def line(cells: list[str], head: bool = False) -> str:
        out = []
        for c, text in zip(columns, cells, strict=True):
            width, right = shape(c)
            if len(text) > width and c in MARKED_WHEN_CUT and not head:
                text = text[: width - 1] + "+"
            text = text[:width]
            out.append((text.rjust(width) if right else text.ljust(width)) + " ")
        return "".join(out)

    if header:
        lines.append(line([COLUMNS[c][0] for c in columns], head=True))
        lines.append("".join("-" * shape(c)[0] + " " for c in columns))
    lines += [line([share_cell(r, c, False, indent) for c in columns]) for r in rows]
    return lines


def select(
    rows: Sequence[pb.ShareRow], all_users: bool, users: set[str], accounts: set[str]
) -> list[pb.ShareRow]:
    """The rows to print: accounts (restricted to -A) and the wanted users' rows."""
    out = []
    for row in rows:
        if accounts and row.account not in accounts and not (row.depth == 0 and not row.user):
            continue
        if row.user and not all_users and row.user not in users:
            continue
        out.append(row)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(PROG, lambda: _run(list(sys.argv[1:] if argv is None else argv)))


SHORTS = "aA:lno:pPUu:V"
LONGS = [
    "all",
    "accounts=",
    "format=",
    "long",
    "noheader",
    "parsable",
    "parsable2",
    "Users",
    "users=",
    "help",
    "usage",
    "version",
]


def _run(args: list[str]) -> int:
    try:  # 22.05 refuses an option in getopt_long's words, then its hint; exit 1 (captured 2026-12-01)
        opts = read_getopt(PROG, args, SHORTS, LONGS)
    except OptionError as exc:
        sys.stderr.write("".join(line + "\n" for line in exc.lines))
        return exc.exit_code
    except getopt.GetoptError as exc:
        raise CommandError(f"{exc.msg}\n{USAGE}") from exc
    all_users, long, header, parsable, users_only = False, False, True, "", False
    users: set[str] = set()
    accounts: set[str] = set()
    columns: list[str] | None = None
    widths: dict[str, int] = {}
    for opt, val in opts:
        if opt in ("-a", "--all"):
            all_users = True
        elif opt in ("-A", "--accounts"):
            accounts.update(v for v in val.split(",") if v)
        elif opt in ("-l", "--long"):
            long = True
        elif opt in ("-o", "--format"):
            columns, widths = parse_format(val)
        elif opt in ("-n", "--noheader"):
            header = False
        elif opt in ("-U", "--Users"):
            users_only = True
        elif opt in ("-p", "--parsable"):
            parsable = "|"
        elif opt in ("-P", "--parsable2"):
            parsable = "P"
        elif opt in ("-u", "--users"):
            if val.lower() == "all":
                all_users = True
            users.update(v for v in val.split(",") if v)
        elif opt in ("--help", "--usage"):
            print(USAGE)
            return 0
        elif opt in ("-V", "--version"):
            print(version_line())
            return 0
    if not all_users and not users:
        try:
            users = {pwd.getpwuid(os.getuid()).pw_name}
        except KeyError:
            users = {str(os.getuid())}
    resp = ctld("GetShares", pb.GetSharesRequest(), pb.GetSharesResponse)
    rows = select(resp.rows, all_users, users, accounts)
    if users_only:
        rows = [r for r in rows if r.user]
    shown = columns if columns is not None else (LONG if long else DEFAULT)
    for text in render(rows, shown, header, parsable, indent=not users_only, widths=widths):
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
