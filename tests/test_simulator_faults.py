"""Fault injection: latency, 503s, dropped connections and malformed answers."""

from __future__ import annotations

import httpx
import pytest
from _sim_helpers import EP, SEND, VERIFIED, soap

import verif_client as vc
from verif_client.simulator import ConnectionDropped, Simulator, SimulatorConfig, serve
from verif_client.simulator import _simulator as simulator_module

pytestmark = pytest.mark.anyio
SMS = {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"}


def client_for(sim: Simulator) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=sim), base_url="http://s")


async def test_fail_503_answers_the_http_sys_page_without_running_the_call() -> None:
    sim = Simulator(config=SimulatorConfig(fail_503=1.0))
    async with client_for(sim) as http:
        response = await soap(http, SEND, SMS)
        get = await http.get(f"{EP}/{VERIFIED}", params={"RequestId": "1"})
        wsdl = await http.get(f"{EP}?wsdl")
    for answer in (response, get):
        assert answer.status_code == 503
        assert answer.headers["content-type"] == "text/html; charset=us-ascii"
        assert answer.headers["connection"] == "close"
        assert "<TITLE>Service Unavailable</TITLE>" in answer.text
    assert wsdl.status_code == 200  # faults never touch ?WSDL
    assert sim.secure_links == []
    assert [(req.operation, req.status) for req in sim.requests] == [(SEND, 503), (VERIFIED, 503)]


async def test_fractions_are_reproducible_with_a_seed() -> None:
    async def statuses(seed: int) -> list[int]:
        sim = Simulator(config=SimulatorConfig(fail_503=0.5, seed=seed))
        async with client_for(sim) as http:
            return [(await http.get(f"{EP}/GetMobileConsentText")).status_code for _ in range(40)]

    first = await statuses(7)
    assert first == await statuses(7)
    assert {200, 503} == set(first)
    assert first != await statuses(8)


async def test_drop_in_process_raises_a_remote_protocol_error_after_running_the_call() -> None:
    sim = Simulator(config=SimulatorConfig(drop=1.0))
    async with client_for(sim) as http:
        with pytest.raises(httpx.RemoteProtocolError) as caught:
            await soap(http, SEND, SMS)
    assert isinstance(caught.value, ConnectionDropped)
    # The SMS went out; only the answer was lost. That is what makes a blind retry harmful.
    assert len(sim.secure_links) == 1
    (logged,) = sim.requests
    assert (logged.operation, logged.status, logged.dropped) == (SEND, None, True)


async def test_drop_on_a_real_socket_closes_without_an_answer() -> None:
    sim = Simulator(config=SimulatorConfig(drop=1.0))
    async with serve(sim) as server, httpx.AsyncClient(base_url=server.base_url) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(f"{EP}/GetMobileConsentText")
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(f"{EP}/GetMobileConsentText")
    assert [req.dropped for req in sim.requests] == [True, True]


async def test_malformed_answers_are_cut_xml_with_status_200() -> None:
    sim = Simulator(config=SimulatorConfig(malformed=1.0))
    async with client_for(sim) as http:
        for binding in vc.Binding:
            codec = vc.codec_for(binding)
            request = codec.encode(SEND, SMS, credentials=vc.Credentials("u", "p"))
            response = await http.request(
                request.method, request.path, headers=request.headers, content=request.body
            )
            assert response.status_code == 200
            with pytest.raises(vc.DecodeError):
                codec.decode(SEND, 200, response.headers.items(), response.content)
        # Error answers are left as they are.
        assert (await http.get(f"{EP}/Nope")).status_code == 500


async def test_latency_and_jitter_sleep_through_anyio(monkeypatch: pytest.MonkeyPatch) -> None:
    delays: list[float] = []

    async def fake_sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(simulator_module.anyio, "sleep", fake_sleep)
    sim = Simulator(config=SimulatorConfig(latency=0.25, jitter=0.5, seed=3))
    async with client_for(sim) as http:
        for _ in range(20):
            assert (await http.get(f"{EP}/GetMobileConsentText")).status_code == 200
    assert len(delays) == 20
    assert all(0.25 <= delay <= 0.75 for delay in delays)
    assert len(set(delays)) > 1


def test_fractions_and_delays_are_validated() -> None:
    with pytest.raises(ValueError, match="drop"):
        SimulatorConfig(drop=1.5)
    with pytest.raises(ValueError, match="latency"):
        SimulatorConfig(latency=-1)
