"""Opt-in: a wheel whose polling hot path is compiled with mypyc (issue 40, sixth round).

Off by default: ``pip install .`` builds the pure-Python wheel, with no compiler and no mypy.
``HATCH_BUILD_HOOK_ENABLE_CUSTOM=true pip install .`` (or ``python -m build --wheel`` with that
variable set) compiles the same ``.py`` files listed in ``COMPILED`` with mypyc into extension
modules beside them in the wheel (a C compiler and Python's headers are needed then); Python
imports an extension module before the ``.py`` of the same name. An editable install stays pure:
compiled modules would hide edits to their sources.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# The modules a poll runs through on asyncio and uvloop (benchmarks/perpoll.py's client):
# the answer's receiver, the pool and its attempt, the deadlines, the chain, the intake and
# the outcome's hand-over. `nox -s compiled` runs their tests against the compiled build.
COMPILED = (
    "verif_client/_transport/_receiver.py",
    "verif_client/_transport/_pool.py",
    "verif_client/_transport/_deadlines.py",
    "verif_client/_transport/_connection.py",
    "verif_client/_transport/_parse.py",
    "verif_client/_transport/_spliced.py",
    "verif_client/_polling.py",
    "verif_client/_pollchain.py",
    "verif_client/_pollwatch.py",
    "verif_client/_settled.py",
    "verif_client/_atonce.py",
    "verif_client/_slots.py",
    "verif_client/_clock.py",
)


class CompiledHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        from mypyc.build import mypycify
        from setuptools import Distribution

        work = Path(tempfile.mkdtemp(prefix="verif-client-mypyc-"))
        lib = work / "lib"
        here = os.getcwd()
        os.chdir(self.root)  # mypyc names the modules by their paths from the project's root
        try:
            extensions = mypycify(
                list(COMPILED), opt_level="3", group_name="verif_client", target_dir=str(work / "c")
            )
            distribution = Distribution({"name": "verif-client", "ext_modules": extensions})
            command: Any = distribution.get_command_obj("build_ext")
            command.build_lib = str(lib)
            command.build_temp = str(work / "temp")
            distribution.run_command("build_ext")
        finally:
            os.chdir(here)
        for built in sorted(lib.rglob("*.so")) + sorted(lib.rglob("*.pyd")):
            build_data["force_include"][str(built)] = built.relative_to(lib).as_posix()
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
