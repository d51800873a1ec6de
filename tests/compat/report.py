"""The table of scenario families for docs/compat.md: matched / differing, with each difference's reason.

    python -m tests.compat.report            # print the table
    python -m tests.compat.report --write    # rewrite it between the markers in docs/compat.md

"Matched" is every scenario that is not in known_differences.toml: the replay fails on any other
difference, so with a green suite the table is what shoal does.
"""

from __future__ import annotations

import sys
import tomllib
from collections import defaultdict

from tests.compat.scenario import HERE, REPO, load_all

DOC = REPO / "docs" / "compat.md"
BEGIN = "<!-- families: written by python -m tests.compat.report --write -->"
END = "<!-- end families -->"


def table() -> str:
    with open(HERE / "known_differences.toml", "rb") as f:
        known = tomllib.load(f)
    families: dict[str, list[str]] = defaultdict(list)
    for sc in load_all():
        families[sc.family_name()].append(sc.id)
    rows = [
        "| family | scenarios | matched | differing | differences (scenario: reason; tracked by) |",
        "|---|---:|---:|---:|---|",
    ]
    for family in sorted(families, key=lambda f: min(families[f])):
        ids = families[family]
        differing = [i for i in ids if i in known]
        why = "<br>".join(f"`{i}`: {known[i]['reason']}; {known[i]['issue']}" for i in differing)
        rows.append(f"| {family} | {len(ids)} | {len(ids) - len(differing)} | {len(differing)} | {why} |")
    total = sum(len(v) for v in families.values())
    rows.append(f"| **all** | {total} | {total - len(known)} | {len(known)} | |")
    return "\n".join(rows) + "\n"


def current_doc_table() -> str:
    text = DOC.read_text()
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--write" in args:
        text = DOC.read_text()
        head, tail = text[: text.index(BEGIN) + len(BEGIN)], text[text.index(END) :]
        DOC.write_text(f"{head}\n{table()}{tail}")
    else:
        sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
