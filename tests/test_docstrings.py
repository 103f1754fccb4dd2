"""Every public name, and every public method and property of a public class, has a docstring:
the API reference (docs/api.md) is built from them, so a missing one is a hole in it."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator

import pytest

MODULES = ("verif_client", "verif_client.bulk", "verif_client.simulator")


def public_names() -> Iterator[tuple[str, object]]:
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name.startswith("__"):
                continue
            value = getattr(module, name)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue  # constants: documented on the pages, typed in the reference
            yield f"{module_name}.{name}", value
            if inspect.isclass(value):
                # A class's own members and those of its private parts (mixins).
                parts = [value, *(base for base in value.__mro__ if base.__name__.startswith("_"))]
                members = {
                    name: attr for part in reversed(parts) for name, attr in vars(part).items()
                }
                for member, attribute in members.items():
                    function = attribute.fget if isinstance(attribute, property) else attribute
                    if not member.startswith("_") and inspect.isfunction(function):
                        yield f"{module_name}.{name}.{member}", function


NAMES = dict(public_names())


def own_docstring(value: object) -> str:
    if inspect.isclass(value):
        # attrs and enums give a class a generated docstring (its signature): not one of ours.
        doc = value.__dict__.get("__doc__") or ""
        return "" if doc.startswith(f"{value.__name__}(") else doc
    return inspect.getdoc(value) or ""


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_public_name_has_a_docstring(name: str) -> None:
    assert own_docstring(NAMES[name]).strip()


@pytest.mark.parametrize(
    "name",
    [
        "aclose",
        "get_mobile_consent_text",
        "revoke_mobile_consent",
        "update_bad_check_reject_reason",
        "send_confirmation_sms",
    ],
)
def test_the_operations_say_what_they_return_and_raise(name: str) -> None:
    doc = own_docstring(NAMES[f"verif_client.VerificationClient.{name}"])
    assert len(doc.splitlines()) > 3
    if name != "aclose":
        assert "Returns:" in doc
        assert "Raises:" in doc
