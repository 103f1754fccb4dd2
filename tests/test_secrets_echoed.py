"""A server that echoes the whole request back never gets our password shown.

The peer copies everything it received (request line, headers, body: the SOAP
header holds the password) into a fault text, a text/plain 500, a garbled 200
or a valid answer's ErrorMessage. Wherever the password would land — the
error's text, the DEBUG log, the CLI's stderr, the bulk output file, the
journal — it must not be there, nor a piece of it cut off at a length limit.
"""

from __future__ import annotations

import logging
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from relsupport import ARGS, run_cli

import verif_client as vc
from verif_client import _xml
from verif_client.simulator import serve, serve_in_thread

USER = "acme-echo-user"
PASSWORDS = ["Echo-Pa55-8d2e1f-never-show", "Pa&55<x>\"q'-never-show-9c1"]
SOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
NS = "http://api.giact.com/verificationservices/v5"
MODES = [
    "fault",
    "text-500",
    "garbled-200",
    "error-message",
    "cut-at-120",
    "cut-at-500",
]


async def _raw_request(scope: dict[str, Any], receive: Any) -> str:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    query = scope.get("query_string", b"").decode("latin-1")
    line = f"{scope['method']} {scope['path']}{'?' + query if query else ''} HTTP/1.1"
    headers = "\r\n".join(f"{k.decode()}: {v.decode()}" for k, v in scope["headers"])
    # The body first: the SOAP envelope is one line, so the password is on the first line.
    return b"".join(chunks).decode("utf-8", "replace") + "\r\n" + line + "\r\n" + headers


def _pad_to(text: str, secret: str, where: int) -> str:
    """Pad or cut ``text`` so the sent form of ``secret`` straddles index
    ``where``, 13 characters of it before."""
    sent = _xml.escape(secret)
    at = text.find(sent)
    if at < 0:
        return text  # GET/POST: nothing secret was sent
    start = at - (where - 13)
    return text[start:] if start > 0 else "x" * -start + text


def echo(mode: str, password: str, *, send_ok: bool = False) -> Any:
    """An ASGI peer echoing each request in the shape ``mode`` says; with
    ``send_ok`` it accepts every SMS (a new id each) and echoes the rest."""
    ids = iter(range(4294967297, 4294967297 + 10**6))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = await _raw_request(scope, receive)
        content_type = dict(scope["headers"]).get(b"content-type", b"").decode()
        env = SOAP12 if "soap+xml" in content_type else SOAP11
        operation = next(
            (op for op in vc.OPERATIONS if op.name in request.split("\r\n", 1)[0] + scope["path"]),
            vc.OPERATIONS[0],
        )
        is_soap = "xml" in content_type
        status, kind = 500, "text/plain; charset=utf-8"
        if send_ok and operation.name == "SecureLink_Confirmation_SendRequestViaSms":
            status, kind = 200, "text/xml; charset=utf-8"
            inner = f"<SecureLinkRequestId>{next(ids)}</SecureLinkRequestId>"
            body = _result(operation, inner, env) if is_soap else _bare(operation, inner)
        elif mode == "fault":
            kind = "application/soap+xml; charset=utf-8" if env == SOAP12 else "text/xml"
            text = _xml.escape(request)
            if env == SOAP12:
                fault = (
                    f"<soap:Fault><soap:Code><soap:Value>soap:Receiver</soap:Value></soap:Code>"
                    f'<soap:Reason><soap:Text xml:lang="en">{text}</soap:Text></soap:Reason>'
                    f"<soap:Detail>{text}</soap:Detail></soap:Fault>"
                )
            else:
                fault = (
                    f"<soap:Fault><faultcode>soap:Server</faultcode><faultstring>{text}"
                    f"</faultstring><detail>{text}</detail></soap:Fault>"
                )
            body = _envelope(env, fault)
        elif mode == "text-500":
            body = ("System.Exception: " + request).encode()
        elif mode == "garbled-200":
            status, kind = 200, "text/xml; charset=utf-8"
            body = ("Error: " + request).encode()
        elif mode == "error-message":
            status, kind = 200, "text/xml; charset=utf-8"
            inner = f"<ErrorMessage>{_xml.escape(request)}</ErrorMessage>"
            if operation.name == "SecureLink_Confirmation_SendRequestViaSms":
                inner = "<SecureLinkRequestId>0</SecureLinkRequestId>" + inner
            body = _result(operation, inner, env) if is_soap else _bare(operation, inner)
        elif mode == "cut-at-120":
            status, kind = 200, "text/xml; charset=utf-8"
            body = ("Error: " + _pad_to(request, password, 120 - len("Error: "))).encode()
        else:
            body = _pad_to(request, password, 500).encode()
        headers = [(b"content-type", kind.encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def _envelope(env: str, inner: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="{env}">'
        f"<soap:Body>{inner}</soap:Body></soap:Envelope>"
    ).encode()


def _result(op: vc.Operation, inner: str, env: str) -> bytes:
    return _envelope(
        env,
        f'<{op.response_element} xmlns="{NS}"><{op.result_element}>{inner}'
        f"</{op.result_element}></{op.response_element}>",
    )


def _bare(op: vc.Operation, inner: str) -> bytes:
    root = op.bare_root
    return f'<?xml version="1.0" encoding="utf-8"?><{root} xmlns="{NS}">{inner}</{root}>'.encode()


def _pieces(secret: str) -> list[str]:
    """The secret and every 12-character piece of it (a cut keeps a piece)."""
    forms = {secret, _xml.escape(secret), _xml.escape(_xml.escape(secret))}
    return sorted({form[i : i + 12] for form in forms for i in range(len(form) - 11)} | forms)


def assert_hidden(text: str, secret: str, what: str) -> None:
    for piece in _pieces(secret):
        assert piece not in text, (what, piece)


def shown(value: object) -> str:
    if isinstance(value, BaseException):
        return "".join(traceback.format_exception(value)) + repr(value) + repr(value.args)
    return repr(value)


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["in-process", "loopback"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("password", PASSWORDS, ids=["plain", "specials"])
async def test_an_echoing_server_never_shows_the_password(
    binding: vc.Binding, mode: str, where: str, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="verif_client")
    app = echo(mode, password)
    texts: list[str] = []
    saw_secret_sent = False

    async def run(client: vc.VerificationClient) -> None:
        for op in vc.OPERATIONS:
            try:
                texts.append(shown(await client.call_with(op, ARGS[op.name])))
            except vc.VerifClientError as exc:
                texts.append(shown(exc))
                texts.append(str(exc))

    options: dict[str, Any] = {
        "username": USER,
        "password": password,
        "binding": binding,
        "retry": vc.NO_RETRY,
        "username_is_secret": True,
    }
    with anyio.fail_after(30):
        if where == "in-process":
            transport = httpx.ASGITransport(app=app)
            async with vc.VerificationClient("http://echo", transport=transport, **options) as c:
                await run(c)
                texts.append(repr(c))
        else:
            async with (
                serve(app) as server,
                vc.VerificationClient(server.base_url, **options) as c,
            ):
                await run(c)
                texts.append(repr(c))
    saw_secret_sent = binding.is_soap
    texts.append(caplog.text)
    for text in texts:
        assert_hidden(text, password, mode)
        assert USER not in text
    if saw_secret_sent and mode in ("fault", "text-500", "garbled-200"):
        # The echo really carried the request: the mask shows where it was.
        assert any("***" in text for text in texts)


def test_the_username_shows_unless_it_is_secret() -> None:
    client = vc.VerificationClient("http://x", username=USER, password="p")
    assert USER in repr(client)
    secret = vc.VerificationClient("http://x", username=USER, password="p", username_is_secret=True)
    assert USER not in repr(secret)


@pytest.fixture(params=["fault", "text-500", "garbled-200", "error-message", "cut-at-500"])
def echo_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    password = PASSWORDS[1]
    with serve_in_thread(echo(request.param, password, send_ok=True)) as server:
        yield server.base_url, password


def _cli(
    *args: str, base_url: str, password: str, **environ: str
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, base_url=base_url, username=USER, password=password, **environ)


@pytest.mark.parametrize("binding", ["soap11", "soap12"])
def test_cli_call_and_bulk_run_never_show_the_echoed_password(
    tmp_path: Path, echo_server: tuple[str, str], binding: str
) -> None:
    base_url, password = echo_server
    numbers = tmp_path / "in.csv"
    numbers.write_text("phone_number\n5125550100\n5125550101\n")
    call = _cli(
        "call", "GetMobileConsentText", "--binding", binding, base_url=base_url, password=password
    )
    journal, output = tmp_path / "job.journal", tmp_path / "out.jsonl"
    bulk = _cli(
        *("bulk", "run", "--input", str(numbers), "--question", "Is this you?"),
        *("--journal", str(journal), "--output", str(output), "--deadline", "5s"),
        *("--binding", binding),
        base_url=base_url,
        password=password,
    )
    # 4: the job finished with rows failed or unknown (the echo refuses or garbles them).
    assert bulk.returncode in (0, 4), bulk.stderr
    for text in (call.stdout, call.stderr, bulk.stdout, bulk.stderr):
        assert_hidden(text, password, "cli")
    assert output.read_text().count('"status": ') == 2
    for path in tmp_path.iterdir():
        data = path.read_bytes().decode("utf-8", "replace")
        assert_hidden(data, password, path.name)


@pytest.mark.anyio
@pytest.mark.parametrize("password", ["soap", "e", "Verified", "http"])
@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_a_password_that_is_part_of_every_answer_does_not_change_what_is_read(
    password: str, binding: vc.Binding
) -> None:
    # Masking is for texts the service echoes, never for the answer's structure or data:
    # a password that is a tag name, a namespace piece or a common letter must not break
    # or alter a valid answer.
    from verif_client.simulator import Simulator

    simulator = Simulator(credentials=(USER, password))
    async with vc.VerificationClient(
        "http://simulator",
        username=USER,
        password=password,
        binding=binding,
        transport=httpx.ASGITransport(app=simulator),
    ) as client:
        sent = await client.send_confirmation_sms("5551234567", "Is this you?")
        assert sent.request_id > 0
        assert sent.error_message is None
        verified = await client.has_been_verified(sent.request_id)
        assert verified.error_message is None
        assert await client.revoke_mobile_consent("5551234567") is True


@pytest.mark.parametrize("mode", ["fault", "text-500"])
def test_cli_username_is_secret_masks_the_echoed_username(mode: str) -> None:
    password = PASSWORDS[0]
    with serve_in_thread(echo(mode, password, send_ok=True)) as server:
        call = ("call", "GetMobileConsentText")
        shown = _cli(*call, base_url=server.base_url, password=password)
        by_flag = _cli(*call, "--username-is-secret", base_url=server.base_url, password=password)
        by_variable = _cli(
            *call, base_url=server.base_url, password=password, VERIF_USERNAME_IS_SECRET="yes"
        )
        refused = _cli(
            *call, base_url=server.base_url, password=password, VERIF_USERNAME_IS_SECRET="maybe"
        )
    # Without the flag the echoed username is the service's words, shown as they came.
    assert USER in shown.stdout + shown.stderr
    for run in (by_flag, by_variable):
        assert run.returncode == shown.returncode != 0
        assert USER not in run.stdout + run.stderr
        assert "***" in run.stdout + run.stderr
        assert_hidden(run.stdout + run.stderr, password, "cli")
    assert refused.returncode == 2
    assert "VERIF_USERNAME_IS_SECRET" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_bulk_run_with_a_secret_username_keeps_it_out_of_every_file(tmp_path: Path) -> None:
    password = PASSWORDS[0]
    numbers = tmp_path / "in.csv"
    numbers.write_text("phone_number\n5125550100\n5125550101\n")
    journal, output = tmp_path / "job.journal", tmp_path / "out.jsonl"
    with serve_in_thread(echo("error-message", password, send_ok=True)) as server:
        bulk = _cli(
            *("bulk", "run", "--input", str(numbers), "--question", "Is this you?"),
            *("--journal", str(journal), "--output", str(output), "--deadline", "5s"),
            "--username-is-secret",
            base_url=server.base_url,
            password=password,
        )
    assert bulk.returncode in (0, 4), bulk.stderr
    assert output.read_text().count('"status": ') == 2
    texts = {"cli": bulk.stdout + bulk.stderr}
    texts.update((p.name, p.read_bytes().decode("utf-8", "replace")) for p in tmp_path.iterdir())
    for where, text in texts.items():
        assert USER not in text, where
        assert_hidden(text, password, where)
    # The echo did carry it: the rows hold the masked form.
    assert "***" in output.read_text()
