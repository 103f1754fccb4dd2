"""A missing real part skips on a developer's machine and fails under CI
(``VERIF_REQUIRE_REAL_PARTS=1``, set by ``.ci/run``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent

NEEDS_MISSING_PARTS = """
    import shutil

    import pytest
    from realparts import import_real_part, missing_real_part

    @pytest.fixture
    def server_binary():
        found = shutil.which("no-such-server-binary-7f3a")
        if found is None:
            missing_real_part("no no-such-server-binary-7f3a")
        return found

    def test_needs_a_binary(server_binary):
        pass

    def test_needs_a_library():
        import_real_part("no_such_library_7f3a", "needs no_such_library_7f3a")

    def test_needs_nothing():
        pass
"""


def run(tmp_path: Path, source: str, switch: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_parts.py").write_text(textwrap.dedent(source))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("VERIF_REQUIRE_REAL_PARTS", None)
    if switch is not None:
        env["VERIF_REQUIRE_REAL_PARTS"] = switch
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", "test_parts.py"],
        cwd=tmp_path,
        env={**env, "COLUMNS": "300"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("switch", [None, "", "0"])
def test_a_missing_part_is_a_skip_on_a_developers_machine(
    tmp_path: Path, switch: str | None
) -> None:
    done = run(tmp_path, NEEDS_MISSING_PARTS, switch)

    assert done.returncode == 0, done.stdout
    assert "1 passed, 2 skipped" in done.stdout
    assert "no no-such-server-binary-7f3a" in done.stdout


def test_a_missing_part_is_a_failure_under_ci(tmp_path: Path) -> None:
    done = run(tmp_path, NEEDS_MISSING_PARTS, "1")

    assert done.returncode == 1, done.stdout
    # The fixture's miss is an error of its test, the library's a failure.
    assert "1 failed, 1 passed, 1 error" in done.stdout
    assert "VERIF_REQUIRE_REAL_PARTS is set: it must be installed" in done.stdout
    assert "no_such_library_7f3a" in done.stdout


def test_a_module_level_miss_fails_its_collection_under_ci(tmp_path: Path) -> None:
    source = """
        from realparts import import_real_part

        import_real_part("no_such_library_7f3a", "needs no_such_library_7f3a")

        def test_never_collected():
            pass
    """
    assert "1 skipped" in run(tmp_path, source, None).stdout
    under_ci = run(tmp_path, source, "1")
    assert under_ci.returncode == 2, under_ci.stdout
    assert "1 error" in under_ci.stdout


def test_ci_sets_the_switch_before_running_the_tests() -> None:
    script = (ROOT / ".ci" / "run").read_text()

    switch = script.index("export VERIF_REQUIRE_REAL_PARTS=1")
    assert switch < script.index("nox -s tests")
    assert switch < script.index("nox -s browser")
