"""Memory sizes in Slurm's forms: "--mem=4G" in, "mem=62.50G" out; shoal counts memory in MB."""

from __future__ import annotations

_UNIT_POWER = {"K": -1, "M": 0, "G": 1, "T": 2, "P": 3}
_FORMAT_UNITS = ("M", "G", "T", "P", "E")


def parse_size_mb(text: str, default_unit: str = "M") -> int:
    """Parse "4000", "512M", "4G", "1T" or "100K" into MB (K rounds up); a bare number is in `default_unit`."""
    value = text.strip()
    unit = default_unit.upper()
    if value and value[-1].upper() in _UNIT_POWER:
        unit = value[-1].upper()
        value = value[:-1]
    if not value.isdigit() or not value.isascii() or unit not in _UNIT_POWER:
        raise ValueError(f"Invalid memory specification: {text!r}")
    number = int(value)
    power = _UNIT_POWER[unit]
    if power < 0:
        return -(-number // 1024)
    return number * (1 << (10 * power))


def format_size_mb(mb: int) -> str:
    """MB as Slurm prints TRES memory: 3000 -> "3000M", 1024 -> "1G", 64000 -> "62.50G".

    A size moves up a unit while it is a whole multiple of half that unit, so exact sizes print
    short ("250G") and the rest keep their megabytes ("16000M").
    """
    number = float(mb)
    unit = 0
    while number >= 1024 and int(number) % 512 == 0 and unit < len(_FORMAT_UNITS) - 1:
        number /= 1024
        unit += 1
    if number == int(number):
        return f"{int(number)}{_FORMAT_UNITS[unit]}"
    return f"{number:.2f}{_FORMAT_UNITS[unit]}"
