"""The opt-in build of hatch_build.py: the modules it lists are the ones compiled.

Under `nox -s compiled` (VERIF_CLIENT_COMPILED=1) every module hatch_build.py lists must be
imported from its extension module, or the session would test the pure-Python tree twice;
elsewhere, the list must name existing modules, so that a moved module fails here first.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def compiled_sources() -> list[str]:
    tree = ast.parse((ROOT / "hatch_build.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "COMPILED" for target in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return [str(source) for source in value]
    raise AssertionError("hatch_build.py lists no COMPILED modules")


SOURCES = compiled_sources()


@pytest.mark.parametrize("source", SOURCES)
def test_listed_module_exists(source: str) -> None:
    assert (ROOT / source).is_file()


@pytest.mark.skipif(
    os.environ.get("VERIF_CLIENT_COMPILED") != "1", reason="only under `nox -s compiled`"
)
@pytest.mark.parametrize("source", SOURCES)
def test_module_is_compiled(source: str) -> None:
    module = importlib.import_module(source.removesuffix(".py").replace("/", "."))
    assert module.__file__ is not None
    assert module.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
