"""The Performance page's charts, drawn from a benchmark results file as plain SVG.

    python -m benchmarks.charts [benchmarks/results/bench-....json]

With a results file (as `nox -s bench` saves them), its latency figures are first copied to
docs/performance/latency.json, the figures the page is drawn from; with none, the charts are
redrawn from that file. Two charts: requests/s and CPU per request against connections, every
contender beside the floor. SVG written by hand: two line charts do not earn matplotlib.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

PAGE_DATA = Path(__file__).resolve().parent.parent / "docs" / "performance"
FIGURES = PAGE_DATA / "latency.json"
WIDTH, HEIGHT = 720, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 240, 40, 50
COLOURS = ("#1f77b4", "#2ca02c", "#000000", "#d62728", "#ff7f0e", "#9467bd")


def _log_scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    span = math.log10(high) - math.log10(low)
    return lambda value: start + (math.log10(value) - math.log10(low)) / span * (end - start)


def _decades(low: float, high: float) -> list[float]:
    return [
        10.0**power for power in range(math.floor(math.log10(low)), 1 + math.ceil(math.log10(high)))
    ]


def line_chart(
    title: str, y_label: str, pools: Sequence[int], series: dict[str, list[float]]
) -> str:
    """A log-log chart: x the connections, one line per contender."""
    values = [value for line in series.values() for value in line]
    ticks = _decades(min(values), max(values))
    x = _log_scale(pools[0], pools[-1], LEFT, WIDTH - RIGHT)
    y = _log_scale(ticks[0], ticks[-1], HEIGHT - BOTTOM, TOP)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
        f'<text x="16" y="{HEIGHT / 2}" transform="rotate(-90 16 {HEIGHT / 2})" '
        f'text-anchor="middle">{escape(y_label)}</text>',
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle">'
        "connections (log scale)</text>",
    ]
    for tick in ticks:
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            'stroke="#ddd"/>'
            f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:,.0f}</text>'
        )
    for pool in pools:
        parts.append(
            f'<text x="{x(pool):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
            f"{pool:,}</text>"
        )
    for index, (name, line) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        dash = ' stroke-dasharray="6 4"' if "floor" in name else ""
        points = " ".join(f"{x(p):.1f},{y(v):.1f}" for p, v in zip(pools, line, strict=True))
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        legend_y = TOP + 18 * index
        parts.append(
            f'<line x1="{WIDTH - RIGHT + 10}" x2="{WIDTH - RIGHT + 30}" y1="{legend_y}" '
            f'y2="{legend_y}" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{WIDTH - RIGHT + 34}" y="{legend_y + 4}">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def draw(figures: dict[str, Any], directory: Path) -> list[Path]:
    latency: dict[str, dict[str, dict[str, float]]] = figures["latency_polling"]
    pools = sorted(int(pool) for pool in latency)
    names = list(latency[str(pools[0])])
    charts = {
        "latency-requests.svg": (
            "Requests/s against connections (server answers after 50 ms)",
            "requests/s (log scale)",
            "requests_per_s",
        ),
        "latency-cpu.svg": (
            "CPU per request against connections",
            "CPU µs/request (log scale)",
            "cpu_us_per_request",
        ),
    }
    written = []
    for file_name, (title, label, key) in charts.items():
        series = {name: [latency[str(pool)][name][key] for pool in pools] for name in names}
        path = directory / file_name
        path.write_text(line_chart(title, label, pools, series))
        written.append(path)
    return written


def main(argv: Sequence[str]) -> int:
    if argv:
        results = json.loads(Path(argv[0]).read_text())
        kept = {
            "source": argv[0],
            "figures": {"latency_polling": results["figures"]["latency_polling"]},
        }
        FIGURES.write_text(json.dumps(kept, indent=2) + "\n")
    figures = json.loads(FIGURES.read_text())["figures"]
    for path in draw(figures, PAGE_DATA):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
