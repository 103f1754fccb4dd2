"""pytest fixtures for testing code that calls the service (registered via ``pytest11``).

``verif_simulator``: a fresh :class:`Simulator` per test (default config; any
credentials accepted). ``verif_simulator_transport``: an ``httpx.ASGITransport``
over it, to hand to ``httpx.AsyncClient`` or ``VerificationClient(transport=...)``.
``verif_client``: a ready :class:`~verif_client.VerificationClient` (SOAP 1.1)
talking to that simulator; use it from ``@pytest.mark.anyio`` tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from .._client import VerificationClient
from . import Simulator

FIXTURE_USERNAME = "verif-test"
FIXTURE_PASSWORD = "verif-test-password"


@pytest.fixture
def verif_simulator() -> Simulator:
    return Simulator()


@pytest.fixture
def verif_simulator_transport(verif_simulator: Simulator) -> httpx.ASGITransport:
    return httpx.ASGITransport(app=verif_simulator)


@pytest.fixture
async def verif_client(
    verif_simulator_transport: httpx.ASGITransport,
) -> AsyncIterator[VerificationClient]:
    async with VerificationClient(
        "http://simulator",
        username=FIXTURE_USERNAME,
        password=FIXTURE_PASSWORD,
        transport=verif_simulator_transport,
    ) as client:
        yield client
