"""Public names show under the module users import them from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import FunctionType


def show_as_public(module: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Make the classes and functions ``names`` of ``module`` say ``module.Name``.

    Reprs and tracebacks then print ``verif_client.SoapFault``, the name users
    import, not the private module it happens to be defined in; pickles name it
    there too, so they load whatever the private layout becomes.
    """
    package = module.partition(".")[0] + "."
    for name in names:
        value = namespace[name]
        if isinstance(value, type | FunctionType) and _is_private(value.__module__, package):
            value.__module__ = module


def _is_private(defined_in: str, package: str) -> bool:
    return defined_in.startswith(package) and defined_in.rpartition(".")[2].startswith("_")
