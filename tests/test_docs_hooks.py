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
    entries = hooks.on_page_markdown(f"<!-- api-reference: {module.__name__} -->").split()
    names = [name for name in module.__all__ if not name.startswith("__")]
    assert entries == [part for name in names for part in (":::", f"{module.__name__}.{name}")]
