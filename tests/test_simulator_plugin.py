"""The pytest11 fixtures, and the simulator staying out of the client's imports."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

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
    verif_simulator: Simulator, verif_client: vc.VerificationClient
) -> None:
    sent = await verif_client.send_confirmation_sms("5551234567", "Did you ask to pay?")
    verif_simulator.verify(sent.request_id)
    assert (await verif_client.has_been_verified(sent.request_id)).verified is True
    assert len(verif_simulator.calls("SecureLink_Confirmation_SendRequestViaSms")) == 1


def test_importing_the_client_does_not_import_the_simulator() -> None:
    code = (
        "import sys, verif_client\n"
        "print(any(name.startswith('verif_client.simulator') for name in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
