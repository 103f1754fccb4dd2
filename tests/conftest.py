from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

# A hang fails its test within the per-test timeout on every backend (see hangs.py).
from hangs import pytest_collection_modifyitems, pytest_pyfunc_call  # noqa: F401
from pgserver import ServerUnavailable, temporary_server
from realparts import import_real_part, missing_real_part


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of a PostgreSQL server started for this test session, on loopback."""
    import_real_part("psycopg", "the PostgreSQL journal needs the 'postgres' extra")
    try:
        with temporary_server() as url:
            yield url
    except ServerUnavailable as exc:
        missing_real_part(f"no PostgreSQL server could be started: {exc}")


@pytest.fixture
def postgres_db(postgres_server: str) -> str:
    """URL of a new, empty database on the session's server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"
