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


def test_a_change_to_the_package_without_a_fragment_fails(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "tests/test_x.py", "a test")
    commit(repo, "verif_client/_client.py", "a change")
    result = check(repo)
    assert result.returncode == 1
    assert "a change" in result.stderr
    assert "a test" not in result.stderr


def test_a_fragment_makes_it_pass(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "verif_client/_client.py", "a change")
    commit(repo, "changelog.d/27.fixed.md", "its fragment")
    assert check(repo).returncode == 0


def test_a_fragment_towncrier_would_not_gather_fails(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "verif_client/_client.py", "a change")
    commit(repo, "changelog.d/27.feature.md", "a type towncrier does not know")
    result = check(repo)
    assert result.returncode == 1
    assert "27.feature.md" in result.stderr
    commit(repo, "changelog.d/+orphan.added.2.md", "an orphan, counted")
    git(repo, "rm", "-q", "changelog.d/27.feature.md")
    git(repo, "commit", "-q", "-m", "drop it")
    assert check(repo).returncode == 0


def test_the_readme_of_the_fragments_is_no_fragment(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "verif_client/_client.py", "a change")
    commit(repo, "changelog.d/README.md", "how to write one")
    assert check(repo).returncode == 1


def test_every_package_commit_marked_not_user_visible_passes(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "verif_client/_client.py", "a refactoring\n\nChangelog: none")
    assert check(repo).returncode == 0
    commit(repo, "verif_client/_client.py", "a change after it")
    result = check(repo)
    assert result.returncode == 1
    assert "a change after it" in result.stderr
    assert "a refactoring" not in result.stderr
