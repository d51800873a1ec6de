"""sshare: each association's shares, usage and fair-share factor, as the controller computes them.

`sshare [-a] [-l] [-n] [-P|-p] [-U] [-u users] [-A accounts]`. Without -a only the caller's own user rows
are listed (with every account), as Slurm does; -U lists the user rows alone, unindented.
"""

from __future__ import annotations

import getopt
import os
import pwd
import sys
from collections.abc import Sequence

from cli.common import CommandError, ctld, run_main
from shoal import version_line
from shoal.sharefmt import share_cell
from shoal.v1 import controller_pb2 as pb

PROG = "sshare"
USAGE = "Usage: sshare [-A accounts] [-a] [-l] [-n] [-p] [-P] [-U] [-u users] [--help]"
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
}
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
)


def render(
    rows: Sequence[pb.ShareRow],
    columns: Sequence[str],
    header: bool = True,
    parsable: str = "",
    indent: bool = True,
) -> list[str]:
    """The lines for `rows`; `parsable` "|" (-p, trailing delimiter) or "P" (-P, none) or "" (aligned)."""
    lines: list[str] = []
    if parsable:
        sep = "|"
        end = sep if parsable == "|" else ""
        if header:
            lines.append(sep.join(COLUMNS[c][0] for c in columns) + end)
        lines += [sep.join(share_cell(r, c, False, indent) for c in columns) + end for r in rows]
        return lines

    def line(cells: list[str]) -> str:
        out = []
        for c, text in zip(columns, cells, strict=True):
            _, width, right = COLUMNS[c]
            text = text[:width]
            out.append((text.rjust(width) if right else text.ljust(width)) + " ")
        return "".join(out)

    if header:
        lines.append(line([COLUMNS[c][0] for c in columns]))
        lines.append("".join("-" * COLUMNS[c][1] + " " for c in columns))
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


def _run(args: list[str]) -> int:
    try:
        opts, _ = getopt.gnu_getopt(
            args,
            "aA:lnpPUu:V",
            [
                "all",
                "accounts=",
                "long",
                "noheader",
                "parsable",
                "parsable2",
                "Users",
                "users=",
                "help",
                "usage",
                "version",
            ],
        )
    except getopt.GetoptError as exc:
        raise CommandError(f"{exc.msg}\n{USAGE}") from exc
    all_users, long, header, parsable, users_only = False, False, True, "", False
    users: set[str] = set()
    accounts: set[str] = set()
    for opt, val in opts:
        if opt in ("-a", "--all"):
            all_users = True
        elif opt in ("-A", "--accounts"):
            accounts.update(v for v in val.split(",") if v)
        elif opt in ("-l", "--long"):
            long = True
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
    for text in render(rows, LONG if long else DEFAULT, header, parsable, indent=not users_only):
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
