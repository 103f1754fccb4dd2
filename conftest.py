"""Every example in the documentation runs as a test, so none can drift (Sybil).

What is collected, from docs/*.md and README.md:

- ```python blocks run in one namespace per page, in a directory of their own, against a simulator
  on loopback: the one change made to the text is that ``SANDBOX_BASE_URL`` names that simulator,
  since the tests never leave this machine. A block that defines ``test_`` functions is a test file
  and runs under pytest in a fresh interpreter (the fixtures example).
- a ```text block right after a python block is the output that block prints, compared as is.
- ```sh blocks run in bash (``-e``, ``pipefail``) in the page's directory, with the sandbox's and
  the phone page's addresses replaced by the simulator's. A block that cannot run offline (an
  install, a server left running, a real service) is marked ``<!-- skip: next "why" -->``.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

import verif_client
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

# Addresses the examples name that stand for a service: the sandbox, and the phone page's
# `verif-client simulate --port 8765`.
SERVICE_URLS = ("https://sandbox.api.giact.com", "http://127.0.0.1:8765")
OUTPUT = "__printed__"


def run_python(example: Example) -> None:
    source: str = example.parsed
    namespace = example.namespace
    if "def test_" in source:
        path = Path(namespace["__directory__"]) / "test_example.py"
        path.write_text(source)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)]
        result = subprocess.run(
            command, cwd=path.parent, capture_output=True, text=True, timeout=120, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return
    printed = io.StringIO()
    code = compile(source, f"{example.path}:{example.line}", "exec")
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    namespace[OUTPUT] = printed.getvalue()


def check_output(example: Example) -> None:
    printed = example.namespace.pop(OUTPUT, None)
    assert printed is not None, "a text block shows what the python block just before it prints"
    assert printed.strip() == example.parsed.strip()


def run_shell(example: Example) -> None:
    source: str = example.parsed
    for url in SERVICE_URLS:
        source = source.replace(url, example.namespace["__simulator__"])
    # The examples set what they need: nothing of the machine's own VERIF_* settings leaks in.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("VERIF_")}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", source],
        cwd=example.namespace["__directory__"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"


def setup(namespace: dict[str, Any]) -> None:
    stack = contextlib.ExitStack()
    # Owners answer at once: the examples poll with their default policies.
    script = Script(pending_polls=0, location_pending_polls=0)
    server = stack.enter_context(serve_in_thread(Simulator(config=SimulatorConfig(script=script))))
    directory = stack.enter_context(tempfile.TemporaryDirectory())
    sandbox = verif_client.SANDBOX_BASE_URL
    verif_client.SANDBOX_BASE_URL = server.base_url  # what `from verif_client import ...` gets
    stack.callback(setattr, verif_client, "SANDBOX_BASE_URL", sandbox)
    stack.enter_context(contextlib.chdir(directory))
    namespace.update(__stack__=stack, __simulator__=server.base_url, __directory__=directory)


def teardown(namespace: dict[str, Any]) -> None:
    namespace["__stack__"].close()


PARSERS = [
    CodeBlockParser(language="python", evaluator=run_python),
    CodeBlockParser(language="text", evaluator=check_output),
    CodeBlockParser(language="sh", evaluator=run_shell),
    SkipParser(),
]

DOCS = Sybil(parsers=PARSERS, patterns=["docs/*.md"], setup=setup, teardown=teardown)
# The README's shell blocks install things (the demo it starts runs in tests/test_cli_help.py).
README = Sybil(parsers=PARSERS[:2], filenames=["README.md"], setup=setup, teardown=teardown)
pytest_collect_file = (DOCS + README).pytest()
