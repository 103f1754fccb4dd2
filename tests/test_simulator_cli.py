"""The simulator's command line: which credentials it demands (issue 28 item 11,
issue 29 item 2), run as a user runs it, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from verif_client.simulator import _main

CLI = (sys.executable, "-m", "verif_client._cli")
GET_TEXT = "GetMobileConsentText"


def _environment(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIF_")}
    return {**env, **variables}


@pytest.fixture
def simulate_from_shell() -> Iterator[str]:
    """``verif-client simulate`` started with the README's exported variables; its URL."""
    env = _environment(VERIF_API_USERNAME="me", VERIF_API_PASSWORD="s3cret")
    with subprocess.Popen(
        [*CLI, "simulate", "--port", "0"], stdout=subprocess.PIPE, env=env, text=True
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # returns "" at once if the process died
            assert line.startswith("Simulator listening: "), line
            yield line.split()[2].rsplit("/verificationservices", 1)[0]
        finally:
            process.kill()  # how it stops is not what this file tests


def _call(base_url: str, password: str) -> subprocess.CompletedProcess[str]:
    env = _environment(
        VERIF_BASE_URL=base_url, VERIF_API_USERNAME="me", VERIF_API_PASSWORD=password
    )
    return subprocess.run(
        [*CLI, "call", GET_TEXT], capture_output=True, text=True, env=env, timeout=60
    )


def test_simulate_takes_the_password_from_the_environment_too(simulate_from_shell: str) -> None:
    same_shell = _call(simulate_from_shell, "s3cret")
    assert same_shell.returncode == 0, same_shell.stderr
    assert "ACME" in same_shell.stdout  # the consent text came back
    wrong = _call(simulate_from_shell, "other")
    assert wrong.returncode == 1
    assert "Invalid API Credentials" in wrong.stderr


def _simulator_args(*argv: str) -> _main.argparse.Namespace:
    return _main.build_parser().parse_args(list(argv))


def test_the_credentials_the_options_ask_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIF_API_PASSWORD", raising=False)
    simulator = _main.simulator_from_args(_simulator_args())
    assert simulator._endpoint.credentials is None
    assert not simulator._endpoint.accept_any_credentials
    both = _main.simulator_from_args(_simulator_args("--username", "u", "--password", "p"))
    assert both._endpoint.credentials == ("u", "p")
    anything = _main.simulator_from_args(_simulator_args("--accept-any-credentials"))
    assert anything._endpoint.accept_any_credentials
    monkeypatch.setenv("VERIF_API_PASSWORD", "from-env")
    from_env = _main.simulator_from_args(_simulator_args("--username", "u"))
    assert from_env._endpoint.credentials == ("u", "from-env")
    # Without a username the variable is not a pin: any non-empty pair still passes.
    assert _main.simulator_from_args(_simulator_args())._endpoint.credentials is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--username", "u"], "--username 'u' needs a password: --password or VERIF_API_PASSWORD"),
        (["--password", "p"], "--password needs --username"),
        (
            ["--username", "u", "--password", "p", "--accept-any-credentials"],
            "--accept-any-credentials: not with --username/--password",
        ),
    ],
)
def test_credentials_that_would_refuse_every_call_are_a_usage_error(
    argv: list[str], message: str
) -> None:
    env = _environment()
    for command in ([*CLI, "simulate"], [sys.executable, "-m", "verif_client.simulator"]):
        done = subprocess.run(
            [*command, "--port", "0", *argv], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
        assert "Traceback" not in done.stderr
