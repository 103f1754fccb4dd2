"""The benchmark code must keep running: its quick codec section, no timings asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("codec", "codec: every operation x binding cheaper than zeep"),
        ("overhead", "a full call via transport="),
    ],
)
def test_quick_benchmark_sections_run(section: str, expected: str) -> None:
    pytest.importorskip("zeep")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", section, "--no-save"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stdout
