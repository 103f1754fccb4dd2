"""Credentials in ``base_url`` (``https://user:pass@host``) are never shown,
and never sent in clear.

Userinfo goes as HTTP Basic on every request, so it is refused over plain
``http://`` (with a message that shows neither the URL nor the password); over
https it is sent, and hidden from ``repr()`` of both clients, ``base_url``,
the ``verify=False`` warning, usage errors and a peer's echo of the
Authorization header.
"""

from __future__ import annotations

import base64
import logging
import ssl
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
from relsupport import run_cli
from test_reliability_tls import certificate, tls_server, trusting
from test_transport_bad_peers import Wire, http_response

import verif_client as vc

pytestmark = pytest.mark.anyio
__all__ = ["certificate", "trusting"]  # fixtures, used by name

SECRET = "Url-Pa55:5e1c-never-show"
URL_USER = "gateway@user"
# As a URL carries them: percent-encoded, decoded before they go as Basic.
USERINFO = f"{quote(URL_USER, safe='')}:{quote(SECRET, safe='')}"
TOKEN = base64.b64encode(f"{URL_USER}:{SECRET}".encode()).decode()


@pytest.mark.parametrize("binding", list(vc.Binding))
def test_userinfo_over_plain_http_is_refused_without_echoing_it(binding: vc.Binding) -> None:
    with pytest.raises(ValueError, match="in clear") as caught:
        vc.VerificationClient(f"http://{USERINFO}@127.0.0.1:9/", binding=binding)
    assert SECRET not in str(caught.value)
    with pytest.raises(ValueError, match="in clear") as caught:
        vc.SyncVerificationClient(f"http://{USERINFO}@127.0.0.1:9/")
    assert SECRET not in str(caught.value)


def test_the_cli_refuses_userinfo_over_http_with_exit_2_and_no_secret() -> None:
    done = run_cli(
        "call",
        "GetMobileConsentText",
        "--binding",
        "http-get",
        base_url=f"http://{USERINFO}@127.0.0.1:9",
    )
    assert done.returncode == 2, done.stderr
    assert "in clear" in done.stderr
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "suffix", ["/", "/x?query=1", "/Other.asmx"], ids=["ok", "query", "other-asmx"]
)
def test_userinfo_over_https_shows_nowhere(suffix: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="verif_client")
    url = f"https://{USERINFO}@127.0.0.1:9{suffix}"
    shown: list[str] = []
    try:
        client = vc.VerificationClient(url, verify=False)
        sync = vc.SyncVerificationClient(url, verify=False)
    except ValueError as exc:  # the usage errors name the URL: without its userinfo
        assert suffix != "/"
        shown.append(str(exc))
        done = run_cli("call", "GetMobileConsentText", base_url=url)
        assert done.returncode == 2
        shown.append(done.stderr)
    else:
        with sync:
            shown += [repr(client), client.base_url, repr(sync)]
        assert client.base_url == "https://127.0.0.1:9"
    shown.append(caplog.text)
    for text in shown:
        assert quote(SECRET, safe="") not in text
        assert quote(URL_USER, safe="") not in text


async def test_over_tls_userinfo_goes_as_basic_and_its_echo_is_masked(
    certificate: tuple[Path, Path], trusting: ssl.SSLContext
) -> None:
    seen: list[bytes] = []

    async def echo(stream: anyio.abc.ByteStream) -> None:
        wire = Wire(stream)
        while (request := await wire.request()) is not None:
            seen.append(request)
            # On one line: the error quotes an ASMX error page's first line.
            head = request.partition(b"\r\n\r\n")[0].replace(b"\r\n", b" | ")
            await stream.send(http_response(head, status=b"500 Internal Server Error"))

    async with tls_server(certificate, echo) as url:
        url = url.replace("https://", f"https://{USERINFO}@")
        async with vc.VerificationClient(url, verify=trusting, retry=vc.NO_RETRY) as client:
            with pytest.raises(vc.VerifClientError) as caught:
                await client.get_mobile_consent_text(binding="http-get")
    assert f"Authorization: Basic {TOKEN}".encode() in seen[0]
    shown = f"{caught.value} {caught.value.server_message}"  # type: ignore[attr-defined]
    assert "Authorization: Basic ***" in shown
    assert TOKEN not in shown
