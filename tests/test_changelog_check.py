"""`.ci/check_changelog.py` against a git repository of the test's own: main, and a branch on it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parent.parent / ".ci" / "check_changelog.py"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def commit(repo: Path, path: str, message: str) -> None:
    file = repo / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(file.read_text() + "x\n" if file.exists() else "x\n")
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)


def check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK)], cwd=repo, capture_output=True, text=True, check=False
    )


PYPROJECT = """
[tool.towncrier]
directory = "changelog.d"

[[tool.towncrier.type]]
directory = "added"

[[tool.towncrier.type]]
directory = "fixed"
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.invalid")
    git(tmp_path, "config", "user.name", "t")
    commit(tmp_path, "verif_client/_client.py", "the start")
    return tmp_path


def test_main_itself_has_nothing_to_compare_and_passes(repo: Path) -> None:
    result = check(repo)
    assert result.returncode == 0
    assert "nothing to compare against" in result.stdout


@pytest.fixture
def branch(repo: Path) -> Path:
    git(repo, "checkout", "-q", "-b", "feature")
    return repo


def test_a_change_to_the_package_without_a_fragment_fails(branch: Path) -> None:
    commit(branch, "tests/test_x.py", "a test")
    commit(branch, "verif_client/_client.py", "a change")
    result = check(branch)
    assert result.returncode == 1
    assert "a change" in result.stderr
    assert "a test" not in result.stderr


@pytest.mark.parametrize(
    ("added", "passes"),
    [
        ("changelog.d/27.fixed.md", True),
        ("changelog.d/+orphan.added.2.md", True),  # no issue, towncrier's counter
        ("changelog.d/27.feature.md", False),  # a type towncrier does not gather
        ("changelog.d/README.md", False),  # how to write one is no fragment
    ],
)
def test_a_change_to_the_package_with_this_file_added(
    branch: Path, added: str, passes: bool
) -> None:
    commit(branch, "verif_client/_client.py", "a change")
    commit(branch, added, "the file")
    result = check(branch)
    assert (result.returncode == 0) is passes, result.stderr
    if added.endswith(".feature.md"):
        assert "27.feature.md" in result.stderr


def test_every_package_commit_marked_not_user_visible_passes(branch: Path) -> None:
    commit(branch, "verif_client/_client.py", "a refactoring\n\nChangelog: none")
    assert check(branch).returncode == 0
    commit(branch, "verif_client/_client.py", "a change after it")
    result = check(branch)
    assert result.returncode == 1
    assert "a change after it" in result.stderr
    assert "a refactoring" not in result.stderr
