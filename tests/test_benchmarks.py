"""The benchmark code must keep running: quick sections, no timings asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from realparts import import_real_part

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("section", "needs", "expected"),
    [
        (
            "codec",
            "zeep",
            (
                "SecureLink_SecurityCode_HasBeenVerified",
                "codec: every operation x binding cheaper than zeep",
            ),
        ),
        ("overhead", "httpx", ("a full call via transport=",)),
        (
            "perpoll",
            "httpx",
            (
                "asyncio Protocol, no HTTP library (the limit)",
                "| 64 | asyncio | verif_client poll_verifications |",
                "intake: the first poll leaves within 50 ms",
            ),
        ),
        (
            "hooks",
            "opentelemetry.sdk",
            ("OpenTelemetry SDK, in-memory exporters", "hooks off cost nothing measurable"),
        ),
    ],
)
def test_quick_benchmark_section_runs(section: str, needs: str, expected: tuple[str, ...]) -> None:
    import_real_part(needs, f"the {section} benchmark needs {needs}")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", section, "--no-save"]
        + ["--repeats", "1"] * (section == "hooks"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for text in expected:
        assert text in done.stdout
