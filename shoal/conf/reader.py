"""Turn a Slurm-syntax config file into logical lines of key=value pairs.

Handles what every Slurm config file shares: `#` comments (not inside quotes, `\\#` is a literal),
blank lines, a trailing `\\` continuing a line, quoted values, several pairs on one line, and
`Include path` (relative to the including file's directory, glob allowed). Meaning is left to
the callers; `%` escapes are left to consumers.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from shoal.conf.errors import ConfigError

_MAX_INCLUDE_DEPTH = 16
_KEY = re.compile(r"\s*([A-Za-z][A-Za-z0-9_]*)\s*=[ \t]*")
_VALUE = re.compile(r"\"([^\"]*)\"|'([^']*)'|([^\s\"']*)(?=\s|$)")
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class ConfLine:
    """One logical line: where it starts ("file:line") and its pairs in order, values unquoted."""

    source: str
    pairs: tuple[tuple[str, str], ...]


def read_config_file(path: str) -> Iterator[ConfLine]:
    """Logical lines of `path` with includes followed; a missing file is a ConfigError."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot read configuration file: {reason}") from None
    yield from _read_text(path, text, 0)


def parse_config_text(path: str, text: str) -> Iterator[ConfLine]:
    """Logical lines of `text` as if read from `path` (includes are relative to its directory)."""
    yield from _read_text(path, text, 0)


def _read_text(path: str, text: str, depth: int) -> Iterator[ConfLine]:
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).rstrip()
        if pending:
            line = line.lstrip()
        else:
            start = number
        # A trailing backslash joins the next line as written, less its indentation:
        # "A=1 \" + "  B=2" -> "A=1 B=2", "List=a,\" + "  b" -> "List=a,b".
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        if not line.strip():
            continue
        source = f"{path}:{start}"
        include = _include_target(line)
        if include is not None:
            yield from _include(path, source, include, depth)
            continue
        yield ConfLine(source, _split_pairs(line, source))
    if pending.strip():
        source = f"{path}:{start}"
        yield ConfLine(source, _split_pairs(pending, source))


def _strip_comment(line: str) -> str:
    """Drop a `#` comment unless the `#` is quoted or escaped as `\\#`."""
    if "#" not in line:
        return line
    if '"' not in line and "'" not in line and "\\#" not in line:
        return line[: line.index("#")]
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(line):
        char = line[index]
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "\\" and line.startswith("#", index + 1):
            out.append("#")
            index += 2
            continue
        elif char == "#":
            break
        out.append(char)
        index += 1
    return "".join(out)


def _include_target(line: str) -> str | None:
    stripped = line.strip()
    head, _, rest = stripped.partition(" ")
    if head.lower() != "include" or "=" in head:
        head, _, rest = stripped.partition("\t")
        if head.lower() != "include":
            return None
    return rest.strip().strip("\"'")


def _include(path: str, source: str, target: str, depth: int) -> Iterator[ConfLine]:
    if not target:
        raise ConfigError(f"{source}: Include needs a file name")
    if depth >= _MAX_INCLUDE_DEPTH:
        raise ConfigError(f"{source}: Include nested too deeply (a file includes itself?)")
    if not os.path.isabs(target):
        target = os.path.join(os.path.dirname(path), target)
    if _GLOB_CHARS.intersection(target):
        files = sorted(glob.glob(target))
        if not files:
            raise ConfigError(f"{source}: Include {target}: no file matches")
    else:
        files = [target]
    for name in files:
        try:
            with open(name, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"{source}: cannot read included file {name}: {reason}") from None
        yield from _read_text(name, text, depth + 1)


def _split_pairs(line: str, source: str) -> tuple[tuple[str, str], ...]:
    """'A=1 B="x y"' -> (("A", "1"), ("B", "x y")); anything that is not a pair is an error."""
    pairs: list[tuple[str, str]] = []
    index = 0
    end = len(line)
    while index < end:
        if line[index].isspace():
            index += 1
            continue
        key = _KEY.match(line, index)
        if key is None:
            word = line[index:].split(None, 1)[0]
            raise ConfigError(f"{source}: cannot parse '{word}' (expected Key=Value)")
        index = key.end()
        spaced = line[index - 1] in " \t"
        value = _VALUE.match(line, index)
        if value is None:
            raise ConfigError(f"{source}: unterminated quote in the value of {key.group(1)}")
        if value.group(3) is None:
            text = value.group(1) if value.group(1) is not None else value.group(2)
        elif spaced and "=" in value.group(3):
            # "Key= Other=1": Key is empty; Other=1 is the next pair.
            pairs.append((key.group(1), ""))
            continue
        else:
            text = value.group(3)
        index = value.end()
        pairs.append((key.group(1), text))
    return tuple(pairs)
