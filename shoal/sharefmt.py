"""One sshare cell: the fair-share figures as sshare prints them (sshare and restd's web view)."""

from __future__ import annotations

import math

from shoal.v1 import controller_pb2 as pb


def share_cell(row: pb.ShareRow, column: str, parsable: bool, indent: bool = True) -> str:
    """One cell as sshare prints it: accounts indented one space per level (-p/-P too, as 22.05's) unless
    -U (`indent` False); `parsable` gives the bare name, for the web view, which indents on its own."""
    if column == "account":
        return row.account if parsable or not indent else " " * row.depth + row.account
    if column == "user":
        return row.user
    if column == "raw_shares":
        return "" if row.depth == 0 else str(row.raw_shares)
    if column == "raw_usage":
        return str(int(row.raw_usage))
    if column in ("grp_tres_mins", "tres_run_mins"):
        return str(getattr(row, column))
    number = getattr(row, column)
    if math.isnan(number):
        return ""
    if math.isinf(number):
        return "inf"
    return f"{number:.6f}"
