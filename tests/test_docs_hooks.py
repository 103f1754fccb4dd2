"""The site's generated pages (docs/_hooks.py) cover every command and every public name."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

import verif_client
from verif_client import bulk, simulator

HOOKS = Path(__file__).resolve().parent.parent / "docs" / "_hooks.py"


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", HOOKS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_has_every_commands_help(hooks: ModuleType) -> None:
    page = hooks.cli_reference()
    titles = re.findall(r"^## `(verif-client[^`]*)`$", page, re.MULTILINE)
    assert titles == [
        "verif-client",
        "verif-client call",
        "verif-client simulate",
        "verif-client bulk",
        "verif-client bulk run",
        "verif-client bulk status",
        "verif-client bulk export",
        "verif-client worker",
        "verif-client demo",
    ]
    assert "usage: verif-client bulk run " in page
    assert "SecureLink_MobileLocation_GetResult RequestId=<long>" in page


@pytest.mark.parametrize("module", [verif_client, bulk, simulator], ids=lambda m: m.__name__)
def test_the_api_reference_has_every_public_name(hooks: ModuleType, module: ModuleType) -> None:
    page = hooks.on_page_markdown(f"<!-- api-reference: {module.__name__} -->")
    entries = [line.split() for line in page.splitlines() if line.startswith(":::")]
    names = [name for name in module.__all__ if not name.startswith("__")]
    assert entries == [[":::", f"{module.__name__}.{name}"] for name in names]


def test_the_client_shows_the_members_of_its_private_parts(hooks: ModuleType) -> None:
    # Its typed operations and its polls are mixins of its own (_typed_calls,
    # _poll_methods): the reference shows them as the client's.
    page = hooks.on_page_markdown("<!-- api-reference: verif_client -->")

    def entry(name: str) -> str:
        return page.split(f"::: verif_client.{name}\n", 1)[1].split(":::", 1)[0]

    assert "inherited_members: true" in entry("VerificationClient")
    assert "inherited_members" not in entry("SoapFault")


ROOT = HOOKS.parent.parent


def test_the_changelog_page_shows_the_unreleased_fragments(
    hooks: ModuleType, tmp_path: Path
) -> None:
    # A project of its own: the real towncrier configuration and CHANGELOG.md, one fragment.
    for name in ("pyproject.toml", "CHANGELOG.md"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "changelog.d").mkdir()
    (tmp_path / "changelog.d" / "README.md").write_text("Not a fragment.\n")
    (tmp_path / "changelog.d" / "999.added.md").write_text("A change only this test makes.\n")

    page = hooks.on_page_markdown(
        '--8<-- "CHANGELOG.md"\n', config={"config_file_path": str(tmp_path / "mkdocs.yml")}
    )

    assert page.startswith("# Changelog\n")
    unreleased = page.index("\n## Unreleased\n")
    assert page.index("<!-- towncrier release notes start -->") < unreleased
    assert unreleased < page.index("\n### Added\n") < page.index("\n## 0.1.0 ")
    assert "- A change only this test makes. (#999)\n" in page
    assert "Not a fragment" not in page
    assert list((tmp_path / "changelog.d").iterdir()), "a draft deletes no fragment"


def test_the_sites_changelog_page_has_every_fragment(hooks: ModuleType) -> None:
    page = hooks.changelog_page(ROOT)
    unreleased = page[page.index("\n## Unreleased\n") : page.index("\n## 0.1.0 ")]
    for fragment in sorted((ROOT / "changelog.d").glob("*.*.md")):
        first_line = fragment.read_text(encoding="utf-8").splitlines()[0].strip()
        assert first_line in unreleased, fragment.name
