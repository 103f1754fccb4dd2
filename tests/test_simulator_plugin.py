"""The pytest11 fixtures, and the simulator staying out of the client's imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from realparts import import_real_part

import verif_client as vc
from verif_client.simulator import Simulator

pytestmark = pytest.mark.anyio


async def test_fixtures_give_a_fresh_simulator_and_its_transport(
    verif_simulator: Simulator, verif_simulator_transport: httpx.ASGITransport
) -> None:
    assert verif_simulator.requests == []
    async with httpx.AsyncClient(
        transport=verif_simulator_transport, base_url="http://sim"
    ) as http:
        response = await http.get(
            "/verificationservices/v5/InquiriesWS-5-8.asmx/GetMobileConsentText"
        )
    assert response.status_code == 200
    assert [req.operation for req in verif_simulator.requests] == ["GetMobileConsentText"]


async def test_the_client_fixture_talks_to_the_simulator_fixture(
    verif_simulator: Simulator, verif_simulator_client: vc.VerificationClient
) -> None:
    sent = await verif_simulator_client.send_confirmation_sms("5551234567", "Did you ask to pay?")
    verif_simulator.verify(sent.request_id)
    assert (await verif_simulator_client.has_been_verified(sent.request_id)).verified is True
    assert len(verif_simulator.calls("SecureLink_Confirmation_SendRequestViaSms")) == 1


async def test_the_simulator_fixture_catches_a_client_without_a_password(
    verif_simulator: Simulator, verif_simulator_transport: httpx.ASGITransport
) -> None:
    # As the service does: the user's code forgot its credentials, the test fails.
    async with vc.VerificationClient("http://sim", transport=verif_simulator_transport) as client:
        with pytest.raises(vc.AuthenticationError, match="Invalid API Credentials"):
            await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
        async with vc.VerificationClient(
            "http://sim", username="me", password="", transport=verif_simulator_transport
        ) as empty:
            with pytest.raises(vc.AuthenticationError):
                await empty.get_mobile_consent_text()
    assert verif_simulator.secure_links == []


def test_the_fixtures_unpublished_old_name_is_gone(pytester_run: PytesterRun) -> None:
    # `verif_client` shadowed the package and was never published (docs/versioning.md).
    result = pytester_run(
        """
        import pytest

        @pytest.mark.anyio
        async def test_old_name(verif_client):
            pass
        """,
        *ANYIO_ONLY,
    )
    assert result.returncode == 1
    assert "fixture 'verif_client' not found" in result.stdout


USER_TEST = """
    import pytest

    @pytest.mark.{marker}
    async def test_my_confirmation_flow(verif_simulator, verif_simulator_client):
        client = verif_simulator_client
        sent = await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
        verif_simulator.verify(sent.request_id)
        assert (await client.has_been_verified(sent.request_id)).verified is True
"""


ANYIO_ONLY = ("-p", "no:asyncio")
ASYNCIO_ONLY = (
    "-p",
    "no:anyio",
    "-p",
    "asyncio",
    "-o",
    "asyncio_default_fixture_loop_scope=function",
)


@pytest.mark.parametrize(("marker", "plugins"), [("anyio", ANYIO_ONLY), ("asyncio", ASYNCIO_ONLY)])
def test_the_fixtures_serve_async_tests_under_either_plugin(
    pytester_run: PytesterRun, marker: str, plugins: tuple[str, ...]
) -> None:
    if marker == "asyncio":
        import_real_part("pytest_asyncio", "the fixtures are shown under pytest-asyncio")
    result = pytester_run(USER_TEST.format(marker=marker), *plugins)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout
    assert "failed" not in result.stdout


def test_importing_the_client_does_not_import_the_simulator() -> None:
    code = (
        "import sys, verif_client\n"
        "print(any(name.startswith('verif_client.simulator') for name in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class PytesterRun:
    """Runs pytest in a subprocess on one test file of a user's, as they would."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __call__(self, source: str, *options: str) -> subprocess.CompletedProcess[str]:
        path = self.directory / "test_user.py"
        path.write_text(textwrap.dedent(source))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options]
        return subprocess.run(
            [*command, str(path)],
            cwd=self.directory,
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture
def pytester_run(tmp_path: Path) -> PytesterRun:
    return PytesterRun(tmp_path)
