"""Slurm-style column formats shared by squeue and sinfo.

Both commands accept `-o "%.18i %-8j literal %N"` (a specifier letter with an optional width: `.` right
aligns, `-` or nothing left aligns, no width means "as wide as the value") and `-O "JobID,Name:30,State:.8"`
(field names with an optional `:[.]width`). Parsing is separate from rendering so each command only
supplies its own table of specifiers, headers and values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

# Width placeholder for `%#P` / `%#N`: the command fills it in from the values it will print.
AUTO_WIDTH = -1


class FormatError(ValueError):
    """A format string the user gave that cannot be parsed; str() is the message."""


class Field(NamedTuple):
    """One column: a specifier (letter or -O name) or a piece of literal text (key == "")."""

    key: str
    width: int | None = None  # None = print the value as is
    right: bool = False
    literal: str = ""


def parse_format(fmt: str, known: Iterable[str]) -> list[Field]:
    """Parse a `-o` string; `%x` with an unknown letter x is kept as literal text, like Slurm."""
    letters = set(known)
    fields: list[Field] = []
    text: list[str] = []
    i = 0
    n = len(fmt)
    while i < n:
        ch = fmt[i]
        if ch != "%":
            text.append(ch)
            i += 1
            continue
        if i + 1 < n and fmt[i + 1] == "%":
            text.append("%")
            i += 2
            continue
        j = i + 1
        right = False
        auto = False
        if j < n and fmt[j] == ".":
            right = True
            j += 1
        elif j < n and fmt[j] == "-":
            j += 1
        if j < n and fmt[j] == "#":
            auto = True
            j += 1
        start = j
        while j < n and fmt[j].isdigit():
            j += 1
        digits = fmt[start:j]
        if j >= n:
            text.append(fmt[i:])
            break
        letter = fmt[j]
        if letter not in letters:
            text.append(fmt[i : j + 1])
            i = j + 1
            continue
        if text:
            fields.append(Field(key="", literal="".join(text)))
            text = []
        width: int | None
        if auto:
            width = AUTO_WIDTH
        elif digits:
            width = int(digits)
        else:
            width = None
        fields.append(Field(key=letter, width=width, right=right))
        i = j + 1
    if text:
        fields.append(Field(key="", literal="".join(text)))
    return fields


def parse_long_format(spec: str, known: Mapping[str, str], default_width: int = 20) -> list[Field]:
    """Parse a `-O` list ("JobID,Name:30,State:.8"); names match case-insensitively.

    `known` maps lower-case names to the canonical key. Unknown names raise FormatError.
    """
    fields: list[Field] = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, size = item.partition(":")
        key = known.get(name.lower())
        if key is None:
            raise FormatError(f"Invalid job format specification: {name}")
        right = size.startswith(".")
        digits = "".join(c for c in size.lstrip(".") if c.isdigit())
        width = int(digits) if digits else default_width
        fields.append(Field(key=key, width=width, right=right))
    return fields


def pad(value: str, width: int | None, right: bool) -> str:
    """Fit a value into its column: truncated to the width, then padded (Slurm cuts long values)."""
    if width is None or width < 0:
        return value
    value = value[:width]
    return value.rjust(width) if right else value.ljust(width)


def resolve_auto_widths(fields: list[Field], widths: Mapping[str, int]) -> list[Field]:
    """Replace AUTO_WIDTH (`%#X`) by the width the command computed for that specifier."""
    out: list[Field] = []
    for field in fields:
        if field.width == AUTO_WIDTH:
            field = Field(key=field.key, width=widths.get(field.key), right=field.right)
        out.append(field)
    return out


def render(fields: Iterable[Field], value: Callable[[str], str]) -> str:
    """One output line: literals as given, each specifier's value fitted to its column."""
    parts: list[str] = []
    for field in fields:
        if not field.key:
            parts.append(field.literal)
        else:
            parts.append(pad(value(field.key), field.width, field.right))
    return "".join(parts)


def row_template(fields: Iterable[Field]) -> tuple[Callable[..., str], list[str]]:
    """One row like `render`, as a str.format template and the keys whose values it takes, in order.

    For listings of hundreds of rows: `render` looks every value up by key on every row. The caller
    decides each column's getter once and calls `template(*values)` per row (`{0:>18.18}` fits and
    cuts a value as `pad` does).
    """
    parts: list[str] = []
    keys: list[str] = []
    for field in fields:
        if not field.key:
            parts.append(field.literal.replace("{", "{{").replace("}", "}}"))
            continue
        index = len(keys)
        keys.append(field.key)
        width = field.width
        if width is None or width < 0:
            parts.append(f"{{{index}}}")
        else:
            parts.append(f"{{{index}:{'>' if field.right else '<'}{width}.{width}}}" if width else "")
    return "".join(parts).format, keys


def long_date(now: float) -> str:
    """The date line `-l` prints first ("Sun Nov 29 21:40:01 2026", local time)."""
    import time

    return time.asctime(time.localtime(now))


def help_columns(names: Sequence[str]) -> list[str]:
    """A field list as 22.05's --helpformat prints it: four to a line, each in 20 columns (19 last)."""
    return [" ".join(n.ljust(19) for n in names[i : i + 4]) for i in range(0, len(names), 4)]
