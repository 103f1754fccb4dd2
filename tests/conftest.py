from __future__ import annotations

import pytest

# A hang fails its test within the per-test timeout on every backend (see hangs.py).
from hangs import pytest_collection_modifyitems, pytest_pyfunc_call  # noqa: F401


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
