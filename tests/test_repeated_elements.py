"""An element the service writes once, sent twice, is refused, never guessed.

First-wins and last-wins readers disagree on ``<Verified>true</Verified>
<Verified>false</Verified>``: one would report a payment confirmed that the
other reports refused. Every binding, the fast path and the tolerant one, and
nested records refuse the answer with a DecodeError naming the element.
"""

from __future__ import annotations

from typing import Any

import anyio
import asmx
import httpx
import pytest

import verif_client as vc

VERIFIED = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
LOCATION = vc.get_operation("SecureLink_MobileLocation_GetResult")
SEND = vc.get_operation("SecureLink_Confirmation_SendRequestViaSms")
REVOKE = vc.get_operation("RevokeMobileConsent")
RESULT = "SecureLink_SecurityCode_HasBeenVerifiedResult"


def refused(binding: vc.Binding, op: vc.Operation, body: bytes) -> vc.DecodeError:
    with pytest.raises(vc.DecodeError) as caught:
        asmx.decode(binding, op, body)
    return caught.value


@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("order", [("true", "false"), ("false", "true"), ("true", "true")])
def test_a_repeated_verified_is_refused_whatever_the_values(
    binding: vc.Binding, order: tuple[str, str]
) -> None:
    content = "".join(f"<Verified>{value}</Verified>" for value in order)

    error = refused(binding, VERIFIED, asmx.response(binding, VERIFIED, content))

    assert error.element == f"{RESULT}/Verified"
    assert str(error) == f"{VERIFIED.name}: {RESULT}/Verified: the element appears more than once"


@pytest.mark.parametrize("binding", list(vc.Binding))
def test_a_repeated_nil_or_text_field_is_refused_too(binding: vc.Binding) -> None:
    nil = '<Verified xsi:nil="true" /><Verified>true</Verified>'
    message = "<ErrorMessage>a</ErrorMessage><ErrorMessage>b</ErrorMessage>"
    request_id = "<SecureLinkRequestId>7</SecureLinkRequestId>" * 2

    assert refused(binding, VERIFIED, asmx.response(binding, VERIFIED, nil)).element.endswith(
        "/Verified"
    )
    assert refused(binding, VERIFIED, asmx.response(binding, VERIFIED, message)).element.endswith(
        "/ErrorMessage"
    )
    assert refused(binding, SEND, asmx.response(binding, SEND, request_id)).element.endswith(
        "/SecureLinkRequestId"
    )


@pytest.mark.parametrize("binding", list(vc.Binding))
def test_a_repeated_field_inside_a_nested_record_is_refused(binding: vc.Binding) -> None:
    location = "<LocationResult><Latitude>1.5</Latitude><Latitude>2.5</Latitude></LocationResult>"

    error = refused(binding, LOCATION, asmx.response(binding, LOCATION, location))

    assert error.element is not None
    assert error.element.endswith("/LocationResult/Latitude")


def test_elements_written_once_and_unknown_ones_repeated_still_read() -> None:
    content = "<Verified>true</Verified><Extra>1</Extra><Extra>2</Extra>"
    for binding in vc.Binding:
        body = asmx.response(binding, VERIFIED, content)
        assert asmx.decode(binding, VERIFIED, body) == vc.VerificationResult(verified=True)


def twice_the_result(binding: vc.Binding, op: vc.Operation, first: str, second: str) -> bytes:
    once = asmx.response(binding, op, first).decode()
    closing = f"</{op.name}Response>"
    extra = f"<{op.name}Result>{second}</{op.name}Result>"
    return once.replace(closing, extra + closing).encode()


@pytest.mark.parametrize("binding", [vc.Binding.SOAP11, vc.Binding.SOAP12])
@pytest.mark.parametrize("namespace", ["configured", "another"])
def test_a_repeated_result_element_is_refused_on_either_path(
    binding: vc.Binding, namespace: str
) -> None:
    body = twice_the_result(binding, REVOKE, "true", "false")
    if namespace == "another":
        # Not the namespace the codec expects: read by the tolerant walk, not the fast path.
        body = body.replace(asmx.NS.encode(), b"urn:another-namespace")

    error = refused(binding, REVOKE, body)

    assert error.element == "RevokeMobileConsentResult"
    assert "the element appears more than once" in str(error)


@pytest.mark.anyio
async def test_a_client_polling_a_peer_that_repeats_verified_never_reports_it_verified() -> None:
    body = asmx.response(
        vc.Binding.SOAP11, VERIFIED, "<Verified>true</Verified><Verified>false</Verified>"
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/xml; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    transport = httpx.ASGITransport(app=app)
    policy = vc.PollPolicy(initial_delay=0, max_delay=0, timeout=5, retry=vc.NO_RETRY)
    async with vc.VerificationClient("http://peer", transport=transport) as client:
        with pytest.raises(vc.DecodeError, match="Verified: the element appears more than once"):
            await client.has_been_verified(4294967297)
        with anyio.fail_after(30):
            outcome = await client.wait_until_verified(4294967297, policy=policy)
    assert outcome.status is vc.PollStatus.FAILED
    assert isinstance(outcome.error, vc.DecodeError)
