"""A hang fails its test within the per-test timeout (tests/hangs.py), on every
backend, instead of holding the run until CI's limit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

HANGING = """
    import threading

    import anyio
    import pytest

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(request):
        return request.param

    def test_sync_wait_that_never_ends():
        threading.Event().wait()

    @pytest.mark.anyio
    async def test_async_wait_that_never_ends():
        await anyio.Event().wait()

    @pytest.mark.timeout(1)
    def test_marker_sets_a_shorter_timeout():
        threading.Event().wait()

    def test_a_test_that_ends_passes():
        pass
"""


def run_pytest(tmp_path: Path, source: str, *options: str) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess with the suite's hang plugin, on one file of hanging tests."""
    (tmp_path / "test_hanging.py").write_text(textwrap.dedent(source))
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    # Wide enough that the summary lines keep the failure's reason.
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "300"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "hangs", "-p", "no:cacheprovider", "-rA", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        # Without a working timeout the hanging tests would run into this and fail here.
        timeout=120,
        check=False,
    )


def test_the_suite_has_a_per_test_timeout(pytestconfig: pytest.Config) -> None:
    assert float(pytestconfig.getini("timeout")) > 0


def test_each_hanging_test_fails_and_the_run_goes_on(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, HANGING, "-o", "timeout=2")

    summary = done.stdout.splitlines()[-1]
    assert "4 failed, 1 passed" in summary, done.stdout[-3000:]
    for name in (
        "test_sync_wait_that_never_ends",
        "test_async_wait_that_never_ends[asyncio]",
        "test_async_wait_that_never_ends[trio]",
    ):
        assert f"FAILED test_hanging.py::{name} - Failed: " in done.stdout
    assert "test_marker_sets_a_shorter_timeout - Failed: Timeout (>1.0s)" in done.stdout


def test_a_trio_hang_out_of_the_tests_reach_ends_the_run(tmp_path: Path) -> None:
    # Shielded from the cancel scope, and the alarm may not reach the main thread:
    # the thread backstop dumps the stacks and ends the run.
    source = """
        import anyio
        import pytest

        @pytest.mark.anyio
        @pytest.mark.parametrize("anyio_backend", ["trio"])
        async def test_shielded_wait(anyio_backend):
            with anyio.CancelScope(shield=True):
                await anyio.Event().wait()
    """
    done = run_pytest(tmp_path, source, "-o", "timeout=2")

    assert done.returncode != 0
    assert "+ Timeout +" in done.stdout
    assert " passed" not in done.stdout
