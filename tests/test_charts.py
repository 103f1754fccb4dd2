"""The Performance page's charts are what `python -m benchmarks.charts` draws from the results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import charts


def test_the_committed_charts_are_drawn_from_the_committed_figures(tmp_path: Path) -> None:
    figures = json.loads(charts.FIGURES.read_text())["figures"]
    for drawn in charts.draw(figures, tmp_path):
        assert drawn.read_text() == (charts.PAGE_DATA / drawn.name).read_text(), (
            f"{drawn.name} is stale: run python -m benchmarks.charts"
        )


def test_a_results_file_becomes_the_pages_figures_and_charts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charts, "PAGE_DATA", tmp_path)
    monkeypatch.setattr(charts, "FIGURES", tmp_path / "latency.json")
    latency = {
        str(pool): {
            name: {"requests_per_s": rate * pool, "cpu_us_per_request": 200.0, "errors": 0}
            for name, rate in (("ours", 18.0), ("h11 over anyio (floor)", 19.0))
        }
        for pool in (16, 256)
    }
    results = tmp_path / "bench-1.json"
    results.write_text(json.dumps({"machine": {}, "figures": {"latency_polling": latency}}))
    assert charts.main([str(results)]) == 0
    kept = json.loads((tmp_path / "latency.json").read_text())
    assert kept["figures"]["latency_polling"] == latency
    svg = (tmp_path / "latency-requests.svg").read_text()
    assert "ours" in svg
    assert 'stroke-dasharray="6 4"' in svg  # the floor, dashed
    assert svg.count("<polyline") == 2
