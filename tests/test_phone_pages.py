"""The simulator's phone pages over plain HTTP (no browser): escaping, form
actions and what the operations answer afterwards, 404s, the --manual switch."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
from _sim_helpers import raw_exchange

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve
from verif_client.simulator._asmx import Request

pytestmark = pytest.mark.anyio

NUMBER = "5551234567"
LOGIN = {"username": "tester", "password": "tester-password"}
HOSTILE = "Pay <script>window.__pwned=1</script> \"ACME\" & 'co' \N{CREDIT CARD}?"


@pytest.fixture
async def setup() -> AsyncIterator[tuple[vc.VerificationClient, httpx.AsyncClient, Simulator]]:
    simulator = Simulator(manual=True)
    transport = httpx.ASGITransport(app=simulator)
    async with (
        vc.VerificationClient("http://simulator", transport=transport, **LOGIN) as client,
        httpx.AsyncClient(transport=transport, base_url="http://simulator") as browser,
    ):
        yield client, browser, simulator


async def _send(client: vc.VerificationClient, question: str = "Pay $25 to ACME?") -> int:
    sent = await client.send_confirmation_sms(NUMBER, question)
    assert sent.ok, sent
    return sent.request_id


async def test_the_question_is_escaped_everywhere(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    client, browser, _ = setup
    request_id = await _send(client, HOSTILE)
    escaped = (
        "Pay &lt;script&gt;window.__pwned=1&lt;/script&gt; &quot;ACME&quot; "
        "&amp; &#x27;co&#x27; \N{CREDIT CARD}?"
    )
    for path in ("/phone/", f"/phone/{NUMBER}/", f"/phone/link/{request_id}"):
        page = await browser.get(path)
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert escaped in page.text
        assert "<script>window" not in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert '<meta name="viewport"' in page.text
    feed = (await browser.get("/phone/inbox.json")).json()
    assert feed["messages"][0]["question"] == HOSTILE


async def test_the_consent_text_is_escaped(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    _, browser, simulator = setup
    simulator.consent_text = "Agree <b onmouseover=x>now</b> & later"
    page = await browser.get(f"/phone/{NUMBER}/consent")
    assert "Agree &lt;b onmouseover=x&gt;now&lt;/b&gt; &amp; later" in page.text


async def test_inbox_lists_newest_first_with_states(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    client, browser, simulator = setup
    first = await _send(client, "First?")
    second = await _send(client, "Second?")
    simulator.decline(first)
    feed = (await browser.get(f"/phone/inbox.json?number={NUMBER}")).json()
    assert [m["request_id"] for m in feed["messages"]] == [second, first]
    assert [m["state"] for m in feed["messages"]] == ["pending", "declined"]
    page = (await browser.get("/phone/")).text
    assert page.index("Second?") < page.index("First?")
    assert str(second) in page


async def test_answering_yes_and_sharing_a_place_reaches_the_client(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    client, browser, _ = setup
    request_id = await _send(client)
    assert (await client.has_been_verified(request_id)).verified is None
    answered = await browser.post(f"/phone/link/{request_id}/answer", data={"answer": "yes"})
    assert answered.status_code == 303
    assert answered.headers["location"] == f"/phone/link/{request_id}?done=yes"
    assert (await client.has_been_verified(request_id)).verified is True
    page = await browser.get(answered.headers["location"])
    assert "You answered Yes." in page.text
    assert 'id="answer-yes"' not in page.text

    shared = await browser.post(
        f"/phone/link/{request_id}/location", data={"place": "paris", "share": "yes"}
    )
    assert shared.status_code == 303
    location = (await client.get_mobile_location(request_id)).location
    assert location is not None
    assert (location.latitude, location.city) == (48.8584, "Paris")


async def test_answering_no_and_typing_coordinates(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    client, browser, _ = setup
    request_id = await _send(client)
    await browser.post(f"/phone/link/{request_id}/answer", data={"answer": "no"})
    assert (await client.has_been_verified(request_id)).verified is False
    again = await browser.post(f"/phone/link/{request_id}/answer", data={"answer": "yes"})
    assert again.status_code == 409
    assert (await client.has_been_verified(request_id)).verified is False

    form = {"place": "", "latitude": " -33.5 ", "longitude": "151.25", "share": "yes"}
    await browser.post(f"/phone/link/{request_id}/location", data=form)
    location = (await client.get_mobile_location(request_id)).location
    assert location is not None
    assert (location.latitude, location.longitude) == (-33.5, 151.25)


@pytest.mark.parametrize(
    "form",
    [
        {"latitude": "91", "longitude": "0"},
        {"latitude": "nan", "longitude": "0"},
        {"latitude": "abc", "longitude": "0"},
        {"place": "atlantis"},
    ],
)
async def test_bad_locations_are_refused(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator], form: dict[str, str]
) -> None:
    client, browser, _ = setup
    request_id = await _send(client)
    refused = await browser.post(f"/phone/link/{request_id}/location", data=form)
    assert refused.status_code == 400
    assert (await client.get_mobile_location(request_id)).location is None


async def test_denying_the_location(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    client, browser, simulator = setup
    request_id = await _send(client)
    await browser.post(f"/phone/link/{request_id}/location", data={"share": "no"})
    assert simulator.secure_link(request_id).location_state == "denied"
    result = await client.get_mobile_location(request_id)
    assert result.location is None
    assert result.pending  # the service says "not available", as before an answer


async def test_consent_page_records_and_revokes(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    client, browser, simulator = setup
    page = await browser.get(f"/phone/{NUMBER}/consent")
    assert "recorded" in page.text
    revoked = await browser.post(f"/phone/{NUMBER}/consent", data={"consent": "revoke"})
    assert revoked.status_code == 303
    assert not simulator.has_consent(NUMBER)
    assert await client.revoke_mobile_consent(NUMBER) is False
    assert "not recorded" in (await browser.get(revoked.headers["location"])).text
    await browser.post(f"/phone/{NUMBER}/consent", data={"consent": "record"})
    assert await client.revoke_mobile_consent(NUMBER) is True


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/phone/link/4294967999"),
        ("POST", "/phone/link/4294967999/answer"),
        ("GET", "/phone/link/abc"),
        ("GET", "/phone/link/99999999999999999999999"),
        ("GET", "/phone/12/"),
        ("GET", "/phone/12/consent"),
        ("GET", "/phone/nowhere"),
        ("GET", "/phone/inbox.json?number=abc"),
    ],
)
async def test_unknown_pages_are_404(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator], method: str, path: str
) -> None:
    _, browser, _ = setup
    response = await browser.request(method, path, data={"answer": "yes"})
    assert response.status_code == 404


async def test_posts_need_a_form(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator],
) -> None:
    client, browser, _ = setup
    request_id = await _send(client)
    response = await browser.post(f"/phone/link/{request_id}/answer", json={"answer": "yes"})
    assert response.status_code == 400
    assert (await client.has_been_verified(request_id)).verified is None


async def test_an_expired_link_cannot_be_answered() -> None:
    now = [0.0]
    simulator = Simulator(config=SimulatorConfig(manual=True, clock=lambda: now[0]))
    transport = httpx.ASGITransport(app=simulator)
    async with (
        vc.VerificationClient("http://simulator", transport=transport, **LOGIN) as client,
        httpx.AsyncClient(transport=transport, base_url="http://simulator") as browser,
    ):
        request_id = await _send(client)
        now[0] = 901.0
        page = await browser.get(f"/phone/link/{request_id}")
        assert "expired" in page.text
        answer = await browser.post(f"/phone/link/{request_id}/answer", data={"answer": "yes"})
        assert answer.status_code == 410
        assert (await client.has_been_verified(request_id)).verified is None


async def test_scripted_behaviour_stays_the_default() -> None:
    simulator = Simulator()
    assert simulator.config.default_script == Script()
    assert Simulator(manual=True).config.default_script == Script.manual()
    async with vc.VerificationClient(
        "http://simulator", transport=httpx.ASGITransport(app=simulator), **LOGIN
    ) as client:
        request_id = await _send(client)
        answers = [(await client.has_been_verified(request_id)).verified for _ in range(3)]
    assert answers == [None, None, True]


async def test_the_pages_work_while_the_service_is_blocked() -> None:
    simulator = Simulator(config=SimulatorConfig(blocked=True))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=simulator), base_url="http://simulator"
    ) as browser:
        assert (await browser.get("/phone/")).status_code == 200
        assert (await browser.get("/phone")).headers["location"] == "/phone/"


def test_both_commands_accept_manual() -> None:
    from verif_client._cli import build_parser
    from verif_client.simulator import _main

    assert build_parser().parse_args(["simulate", "--manual"]).manual
    assert not build_parser().parse_args(["simulate"]).manual
    manual = _main.simulator_from_args(_main.build_parser().parse_args(["--manual"]))
    assert manual.config.default_script == Script.manual()
    scripted = _main.simulator_from_args(_main.build_parser().parse_args([]))
    assert scripted.config.default_script == Script()


def test_importing_the_client_does_not_import_the_pages() -> None:
    code = (
        "import sys, verif_client, verif_client._cli; "
        "print(any(name.startswith('verif_client.simulator') for name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://simulator.evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "cross-site", "Origin": "http://simulator"},
        {"Referer": "https://evil.example/page.html"},
    ],
)
async def test_a_cross_site_post_is_refused(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator], headers: dict[str, str]
) -> None:
    client, browser, _ = setup
    request_id = await _send(client)
    for path, form in (
        (f"/phone/link/{request_id}/answer", {"answer": "yes"}),
        (f"/phone/link/{request_id}/location", {"share": "no"}),
        (f"/phone/{NUMBER}/consent", {"consent": "revoke"}),
    ):
        response = await browser.post(path, data=form, headers=headers)
        assert response.status_code == 403, path
        assert "another site" in response.text
    assert (await client.has_been_verified(request_id)).verified is None


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://simulator"},
        {"Sec-Fetch-Site": "same-origin"},
        # What Chromium sends for a form on these pages (they send no referrer).
        {"Sec-Fetch-Site": "same-origin", "Origin": "null"},
        {"Referer": "http://simulator/phone/"},
    ],
)
async def test_a_same_site_post_is_taken(
    setup: tuple[vc.VerificationClient, httpx.AsyncClient, Simulator], headers: dict[str, str]
) -> None:
    client, browser, _ = setup
    request_id = await _send(client)
    response = await browser.post(
        f"/phone/link/{request_id}/answer", data={"answer": "yes"}, headers=headers
    )
    assert response.status_code == 303
    assert (await client.has_been_verified(request_id)).verified is True


async def _raw_get_or_post(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """One request written by hand on the socket: (status, body)."""
    status, _, answer = await raw_exchange(port, head.encode("latin-1") + body)
    return status, answer


@pytest.mark.parametrize("host", ["attacker.test", "attacker.test:{port}", "127.0.0.1.nip.io"])
async def test_a_rebound_name_can_neither_read_nor_answer(host: str) -> None:
    # DNS rebinding: the attacker's name now points at 127.0.0.1, so the browser
    # sends it as Host (and, the page being "its own", same-origin headers).
    simulator = Simulator(manual=True, accept_any_credentials=True)
    async with serve(simulator) as server:
        host = host.format(port=server.port)
        async with vc.VerificationClient(server.base_url) as client:
            request_id = await _send(client)
        reads = [
            await _raw_get_or_post(
                server.port, f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )
            for path in (
                "/phone/",
                f"/phone/{NUMBER}/",
                "/phone/inbox.json",
                f"/phone/link/{request_id}",
            )
        ]
        form = b"answer=yes"
        answer = await _raw_get_or_post(
            server.port,
            f"POST /phone/link/{request_id}/answer HTTP/1.1\r\nHost: {host}\r\n"
            f"Sec-Fetch-Site: same-origin\r\nOrigin: http://{host}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(form)}\r\nConnection: close\r\n\r\n",
            form,
        )
    for status, body in [*reads, answer]:
        assert status == 403
        assert NUMBER.encode() not in body
        assert b"Pay $25" not in body
        assert b"own address" in body
    assert simulator.secure_link(request_id).verification != "verified"


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "phone.localhost:{port}", "127.0.0.1"],
)
async def test_the_pages_answer_at_the_simulators_own_address(host: str) -> None:
    simulator = Simulator(manual=True, accept_any_credentials=True)
    async with serve(simulator) as server:
        async with vc.VerificationClient(server.base_url) as client:
            await _send(client)
        status, body = await _raw_get_or_post(
            server.port,
            f"GET /phone/ HTTP/1.1\r\nHost: {host.format(port=server.port)}\r\n"
            "Connection: close\r\n\r\n",
        )
    assert status == 200
    assert NUMBER.encode() in body


async def test_a_simulator_bound_to_every_address_answers_at_an_ip() -> None:
    # Bound to 0.0.0.0 it serves every address, and no DNS answer can fake an IP
    # literal; a name stays refused. (In process: tests never bind beyond loopback.)
    simulator = Simulator(manual=True)
    for host, expected in (("192.0.2.7:8765", 200), ("lan-box.example:8765", 403)):
        page = await simulator.handle(
            Request("GET", "/phone/", b"", {"host": host}, b"", host, server_host="0.0.0.0")
        )
        assert page.status == expected, host
