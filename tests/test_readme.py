"""The README is a first visit: the two commands at its top as CI and users run them, a short page,
and links that lead to every page of the documentation. Its Python examples run as tests through
Sybil with the documentation's (conftest.py at the top)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
LINKS = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)


def test_the_two_commands_at_the_top_are_the_ones_ci_and_users_run() -> None:
    lines = README.splitlines()
    assert lines[2] == "```sh"
    assert lines[3].startswith("python3 -m pip install -e '.[cli]' && verif-client demo ")
    assert lines[4].startswith("python3 -m pip install nox && python3 -m nox -s tests ")


def test_the_readme_stays_a_first_visit() -> None:
    assert len(README.splitlines()) <= 120
    assert len(re.findall(r"^```python$", README, re.MULTILINE)) <= 2


def test_every_link_leads_to_a_file() -> None:
    local = [link for link in LINKS if "://" not in link]
    assert local
    for link in local:
        assert (ROOT / link).is_file(), link


def test_every_page_of_the_documentation_is_linked() -> None:
    # index.md is the site's README; security.md and changelog.md include SECURITY.md and
    # CHANGELOG.md, which the README links directly.
    included = {"index.md", "security.md", "changelog.md"}
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - included
    linked = {Path(link).name for link in LINKS if link.startswith("docs/")}
    assert pages <= linked, pages - linked
