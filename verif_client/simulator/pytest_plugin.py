"""pytest fixtures for testing code that calls the service (registered via ``pytest11``).

``verif_simulator``: a fresh :class:`Simulator` per test (default config). As
on the service, a SOAP call needs a non-empty username and password (any), so
a test catches a client built without them; the client fixture has some.
``verif_simulator_transport``: an ``httpx.ASGITransport`` over it, to hand to
``httpx.AsyncClient`` or ``VerificationClient(transport=...)``.
``verif_simulator_client``: a :class:`~verif_client.VerificationClient` (SOAP
1.1) talking to that simulator in process through ``Simulator.transport()``,
which builds no httpx objects (half the cost of a call through the ASGI
transport; docs/performance.md).

The fixtures are plain (not async) fixtures, so they serve async tests run by
any plugin: anyio's (``@pytest.mark.anyio``), pytest-asyncio's
(``@pytest.mark.asyncio``) or trio's. The client opens its connection pool on
first use, inside the test's own event loop, and in process it holds nothing
that needs closing.
"""

from __future__ import annotations

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
def verif_simulator_client(verif_simulator: Simulator) -> VerificationClient:
    return VerificationClient(
        "http://simulator",
        username=FIXTURE_USERNAME,
        password=FIXTURE_PASSWORD,
        transport=verif_simulator.transport("http://simulator"),
    )
