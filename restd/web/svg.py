"""Line charts as SVG text, drawn by restd itself (pure): the what-if page needs no matplotlib."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 28, 40
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]  # (x, y), x ascending


def _ticks(top: float, count: int = 4) -> list[float]:
    return [top * i / count for i in range(count + 1)]


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2g}"


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    *,
    step: bool,
    y_max: float | None = None,
) -> str:
    """One chart: a polyline per series (`step`: held until the next point, as utilization is)."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    x_top = max(xs, default=1.0) or 1.0
    y_top = y_max if y_max is not None else (max(ys, default=1.0) or 1.0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + plot_w * x / x_top

    def py(y: float) -> float:
        return TOP + plot_h * (1 - min(y, y_top) / y_top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="16" class="title">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    for value in _ticks(y_top):
        y = py(value)
        parts.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#999"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_number(value)}</text>')
    for value in _ticks(x_top):
        x = px(value)
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP + plot_h}" x2="{x:.1f}" y2="{TOP + plot_h + 4}" stroke="#999"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_number(value)}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2})">{escape(y_label)}</text>'
    )
    for i, s in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        coords: list[str] = []
        for j, (x, y) in enumerate(s.points):
            if step and j:
                coords.append(f"{px(x):.1f},{py(s.points[j - 1][1]):.1f}")
            coords.append(f"{px(x):.1f},{py(y):.1f}")
        if coords:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(coords)}">'
                f"<title>{escape(s.label)}</title></polyline>"
            )
        ly = TOP + 14 + 14 * i
        parts.append(f'<rect x="{LEFT + plot_w - 120}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{LEFT + plot_w - 106}" y="{ly}">{escape(s.label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


UNITS = (("seconds", 1), ("minutes", 60), ("hours", 3600), ("days", 86400))


def time_unit(seconds: float) -> tuple[str, int]:
    """The unit a span of this many seconds reads best in (under 120 of it, or days)."""
    for name, size in UNITS:
        if seconds < 120 * size:
            return name, size
    return UNITS[-1]


def scaled(points: Sequence[tuple[float, float]], size: int) -> list[tuple[float, float]]:
    return [(x / size, y) for x, y in points]


def utilization_points(runs: Sequence[tuple[int, int, int]], capacity: int) -> list[tuple[float, float]]:
    """(seconds, busy fraction) after each change, from (start s, end s, cpus) of every job."""
    changes: dict[int, int] = {}
    for start, end, cpus in runs:
        changes[start] = changes.get(start, 0) + cpus
        changes[end] = changes.get(end, 0) - cpus
    points, busy = [], 0
    for t in sorted(changes):
        busy += changes[t]
        points.append((float(t), busy / max(1, capacity)))
    return points


def cdf_points(values: Sequence[float]) -> list[tuple[float, float]]:
    """(value, fraction of jobs at or under it), one point per job."""
    ordered = sorted(values)
    n = len(ordered)
    return [(v, (i + 1) / n) for i, v in enumerate(ordered)]
