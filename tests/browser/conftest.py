"""Fixtures of the browser tests: the simulator on loopback, a client on an
event loop of its own thread, and the system's headless Chromium.

No browser is ever downloaded: Playwright drives ``/usr/bin/chromium`` (the
Debian package). Without it these tests are skipped on a developer's machine,
but fail under CI, where ``.ci/run`` installs Chromium: a broken install must
not pass as a skip (tests/realparts.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from realparts import import_real_part, missing_real_part

import verif_client as vc
from verif_client.simulator import Server, Simulator, serve_in_thread

CHROMIUM = os.environ.get("VERIF_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

import_real_part("playwright.sync_api", "Playwright is not installed")

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402


@pytest.fixture
def simulator() -> Simulator:
    return Simulator(manual=True)


@pytest.fixture
def server(simulator: Simulator) -> Iterator[Server]:
    with serve_in_thread(simulator) as server:
        yield server


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as portal:
        yield portal


@pytest.fixture
def client(portal: BlockingPortal, server: Server) -> Iterator[vc.VerificationClient]:
    """An async client living on ``portal``'s loop: call it through the portal."""
    client = vc.VerificationClient(server.base_url, username="acme", password="pw")
    try:
        yield client
    finally:
        portal.call(client.aclose)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        missing_real_part(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def rebound_browser(browser: Browser, server: Server) -> Iterator[Browser]:
    """A Chromium whose DNS answers attacker.test with the simulator's address."""
    rules = f"--host-resolver-rules=MAP attacker.test {server.host}"
    rebound = browser.browser_type.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, rules])
    try:
        yield rebound
    finally:
        rebound.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # A phone-sized screen: the pages must read well on the device that got the SMS.
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True
    )
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()
