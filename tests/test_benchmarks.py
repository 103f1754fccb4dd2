"""The benchmark code must keep running: its quick codec section, no timings asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_quick_codec_benchmark_runs() -> None:
    pytest.importorskip("zeep")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "codec", "--no-save"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "SecureLink_SecurityCode_HasBeenVerified" in done.stdout
    assert "codec: every operation x binding cheaper than zeep" in done.stdout


def test_quick_hooks_benchmark_runs() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--quick",
            "--only",
            "hooks",
            "--no-save",
            "--repeats",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OpenTelemetry SDK, in-memory exporters" in done.stdout
    assert "hooks off cost nothing measurable" in done.stdout
