"""Every Python example of the README runs as pasted, so none can drift.

Each block is a complete script (or, for the fixtures example, a test file)
and runs in a fresh interpreter. The one change made to the text: the
sandbox's URL becomes a loopback simulator's, since the tests never leave
this machine.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL)


def block_id(block: str) -> str:
    line = README.read_text()[: README.read_text().index(block)].count("\n") + 1
    return f"README.md:{line}"


@pytest.fixture(scope="module")
def simulator_url() -> Iterator[str]:
    # Owners answer at once: the examples poll with their default policies.
    script = Script(pending_polls=0, location_pending_polls=0)
    with serve_in_thread(Simulator(config=SimulatorConfig(script=script))) as server:
        yield server.base_url


def test_the_readme_has_its_examples() -> None:
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("block", BLOCKS, ids=[block_id(block) for block in BLOCKS])
def test_readme_example_runs_as_pasted(block: str, simulator_url: str, tmp_path: Path) -> None:
    # Every use of the sandbox's URL (not its import) now names the simulator.
    source = "\n".join(
        line if line.startswith("from ") else line.replace("SANDBOX_BASE_URL", repr(simulator_url))
        for line in block.splitlines()
    )
    path = tmp_path / ("test_example.py" if "def test_" in source else "example.py")
    path.write_text(source)
    if "def test_" in source:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)]
    else:
        command = [sys.executable, str(path)]
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
