"""The simulator on real loopback sockets: the h11 server, the thread helper, the CLI."""

from __future__ import annotations

import subprocess
import sys

import anyio
import h11
import httpx
import pytest
from _sim_helpers import EP, NS, SEND, VERIFIED, envelope, soap

import verif_client as vc
from verif_client.simulator import Simulator, SimulatorConfig, serve, serve_in_thread
from verif_client.simulator._main import build_parser, simulator_from_args

SMS = {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"}


async def exchange(port: int, requests: list[h11.Request]) -> tuple[list[h11.Response], bool]:
    """Send requests on ONE connection; the answers and whether the server closed it."""
    conn = h11.Connection(h11.CLIENT)
    responses: list[h11.Response] = []
    closed = False
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        for request in requests:
            await stream.send(conn.send(request) + conn.send(h11.EndOfMessage()))
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    try:
                        conn.receive_data(await stream.receive())
                    except anyio.EndOfStream:
                        conn.receive_data(b"")
                    continue
                if isinstance(event, h11.Response):
                    responses.append(event)
                if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    break
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                closed = True
                break
            conn.start_next_cycle()
    return responses, closed


def get(target: str) -> h11.Request:
    return h11.Request(method="GET", target=target, headers=[("Host", "127.0.0.1")])


@pytest.mark.anyio
async def test_every_binding_over_a_real_socket() -> None:
    sim = Simulator()
    async with serve(sim) as server, httpx.AsyncClient(base_url=server.base_url) as http:
        assert server.endpoint_url == f"http://127.0.0.1:{server.port}{EP}"
        for binding in vc.Binding:
            codec = vc.codec_for(binding)
            request = codec.encode(SEND, SMS, credentials=vc.Credentials("u", "p"))
            response = await http.request(
                request.method, request.path, headers=request.headers, content=request.body
            )
            result = codec.decode(
                SEND, response.status_code, response.headers.items(), response.content
            )
            assert isinstance(result, vc.RequestResult)
            assert result.request_id > 2**32
        wsdl = await http.get(server.wsdl_url)
        assert f'location="{server.endpoint_url}"' in wsdl.text
    assert [req.binding for req in sim.requests] == ["soap11", "soap12", "http-get", "http-post"]


@pytest.mark.anyio
async def test_keep_alive_and_close_after_a_500() -> None:
    async with serve(Simulator()) as server:
        ok = get(f"{EP}/GetMobileConsentText")
        responses, closed = await exchange(server.port, [ok, ok, ok])
        assert [r.status_code for r in responses] == [200, 200, 200]
        assert not closed
        responses, closed = await exchange(server.port, [get(f"{EP}/Nope"), ok])
        assert [r.status_code for r in responses] == [500]
        assert (b"connection", b"close") in responses[0].headers
        assert closed


@pytest.mark.anyio
async def test_socket_drop_sends_nothing() -> None:
    sim = Simulator(config=SimulatorConfig(drop=1.0))
    async with serve(sim) as server, await anyio.connect_tcp("127.0.0.1", server.port) as stream:
        await stream.send(f"GET {EP}/GetMobileConsentText HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
            await stream.receive()


@pytest.mark.anyio
async def test_soap_faults_and_head_over_a_socket() -> None:
    sim = Simulator(credentials=("user", "pass"))
    async with serve(sim) as server, httpx.AsyncClient(base_url=server.base_url) as http:
        fault = await soap(http, SEND, SMS, action='"x"')
        assert fault.status_code == 500
        assert fault.headers["connection"] == "close"
        assert b"soap:Client" in fault.content
        creds = await soap(http, SEND, SMS, version="1.2", credentials=("user", "nope"))
        assert creds.content == b"Error Message: Invalid API Credentials"
        head = await http.head(f"{EP}?WSDL")
        assert head.status_code == 200
        assert head.content == b""
        # ASMX's HTTP GET protocol takes GET only.
        assert (await http.head(f"{EP}/GetMobileConsentText")).status_code == 500
        malformed = await http.post(
            EP,
            headers={"Content-Type": "text/xml", "SOAPAction": f'"{NS}/{VERIFIED}"'},
            content=envelope(VERIFIED, {"RequestId": "1"})[:-20],
        )
        assert (malformed.status_code, malformed.content) == (400, b"")


def test_serve_in_thread_for_synchronous_callers() -> None:
    sim = Simulator()
    with serve_in_thread(sim) as server, httpx.Client(base_url=server.base_url) as http:
        response = http.get(f"{EP}/{VERIFIED}", params={"RequestId": "4294967297"})
        assert response.status_code == 200
        assert b"Invalid SecureLink RequestID" in response.content
    assert len(sim.requests) == 1


def test_cli_options_build_the_simulator() -> None:
    args = build_parser().parse_args(
        [
            "--port",
            "0",
            "--username",
            "u",
            "--password",
            "p",
            "--drop",
            "0.25",
            "--manual",
            "--seed",
            "4",
        ]
    )
    sim = simulator_from_args(args)
    assert sim.config.drop == 0.25
    assert sim.config.seed == 4
    assert sim.config.manual is True


def test_python_dash_m_serves_until_stopped() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "verif_client.simulator", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("Simulator listening: http://127.0.0.1:")
        url = line.split()[2]
        response = httpx.get(url + "/GetMobileConsentText", timeout=10)
        assert response.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.anyio
async def test_an_error_in_the_served_block_comes_out_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with serve(Simulator()):
            raise KeyError("not an ExceptionGroup")
