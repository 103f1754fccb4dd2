"""MkDocs hooks: the pages that are generated from the code, so they cannot drift from it.

``<!-- cli-reference -->`` in a page becomes the ``--help`` of every ``verif-client`` command,
rendered from the argparse parser itself; ``<!-- api-reference: module -->`` becomes one
mkdocstrings entry per name in that module's ``__all__``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
from collections.abc import Iterator
from typing import Any

_API = re.compile(r"<!-- api-reference: ([\w.]+) -->")


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
    return "\n".join(f"::: {module_name}.{name}\n" for name in names)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    return _API.sub(lambda match: api_reference(match.group(1)), markdown)
