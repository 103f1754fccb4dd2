"""MkDocs hooks: the pages that are generated from the code, so they cannot drift from it.

``<!-- cli-reference -->`` in a page becomes the ``--help`` of every ``verif-client`` command,
rendered from the argparse parser itself; ``<!-- api-reference: module -->`` becomes one
mkdocstrings entry per name in that module's ``__all__``; the changelog page (``--8<--
"CHANGELOG.md"``) gets the fragments not yet released (``changelog.d/``), as towncrier would
gather them, as its first section, "Unreleased".
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_API = re.compile(r"<!-- api-reference: ([\w.]+) -->")
_CHANGELOG = '--8<-- "CHANGELOG.md"'
# towncrier's start_string (pyproject.toml): releases are written below it, newest first.
_RELEASES_START = "<!-- towncrier release notes start -->\n"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:  # argparse keeps its subcommands here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def cli_reference() -> str:
    from verif_client._cli import build_parser

    # The help is wrapped to the terminal's width: pin it, so the page is the same everywhere.
    os.environ["COLUMNS"] = "100"
    parts = []
    for path, parser in _commands(build_parser()):
        title = " ".join(("verif-client", *path))
        parts.append(f"## `{title}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


def api_reference(module_name: str) -> str:
    module = importlib.import_module(module_name)
    names = [name for name in module.__all__ if not name.startswith("__")]
    return "\n".join(_reference(module_name, name, getattr(module, name)) for name in names)


def _reference(module_name: str, name: str, value: object) -> str:
    """One name's entry; a class made of private parts (``VerificationClient``'s
    mixins) shows the members it takes from them as its own: they are, to a reader."""
    entry = f"::: {module_name}.{name}\n"
    bases = value.__mro__[1:] if isinstance(value, type) else ()
    if any(base.__name__.startswith("_") for base in bases):
        entry += "    options:\n      inherited_members: true\n      show_bases: false\n"
    return entry


def unreleased_changes(root: Path) -> str:
    """The fragments in ``root/changelog.d`` as the next release would gather them, as Markdown.

    ``towncrier build --draft`` renders them with the project's own configuration and template,
    writes nothing and needs no network; its own messages go to stderr.
    """
    try:
        draft = subprocess.run(
            [sys.executable, "-m", "towncrier", "build", "--draft", "--version", "Unreleased"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as error:
        raise RuntimeError(
            f"towncrier build --draft failed (the docs extra installs towncrier):\n{error.stderr}"
        ) from error
    # Its title is "## Unreleased (<today>)": the date would be the build's, not a release's.
    _title, _, body = draft.strip().partition("\n")
    return (
        "## Unreleased\n\n"
        "Changes since the history below, not yet released: the fragments in `changelog.d/`,"
        " as the next release will gather them.\n\n"
        f"{body.strip()}\n\n"
    )


def changelog_page(root: Path) -> str:
    """``root/CHANGELOG.md`` with the unreleased changes above its newest release."""
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    head, marker, releases = changelog.partition(_RELEASES_START)
    if not marker:
        raise RuntimeError(f"CHANGELOG.md has no {_RELEASES_START.strip()!r} line")
    return f"{head}{marker}\n{unreleased_changes(root)}{releases.lstrip()}"


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if markdown.strip() == _CHANGELOG:
        return changelog_page(Path(kwargs["config"]["config_file_path"]).resolve().parent)
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    return _API.sub(lambda match: api_reference(match.group(1)), markdown)
