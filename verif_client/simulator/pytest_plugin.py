"""pytest fixtures for testing code that calls the service (registered via ``pytest11``).

``verif_simulator``: a fresh :class:`Simulator` per test (default config; any
credentials accepted). ``verif_simulator_transport``: an ``httpx.ASGITransport``
over it, to hand to ``httpx.AsyncClient`` or ``VerificationClient(transport=...)``.
"""

from __future__ import annotations

import httpx
import pytest

from . import Simulator


@pytest.fixture
def verif_simulator() -> Simulator:
    return Simulator()


@pytest.fixture
def verif_simulator_transport(verif_simulator: Simulator) -> httpx.ASGITransport:
    return httpx.ASGITransport(app=verif_simulator)
