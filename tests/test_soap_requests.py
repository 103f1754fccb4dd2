"""Each SOAP request carries the credentials and namespace it was made with,
however many requests one codec builds (the header is cached between them)."""

from __future__ import annotations

import pytest
from lxml import etree

import verif_client as vc

CONSENT = vc.get_operation("GetMobileConsentText")


def authentication(request: vc.HTTPRequest) -> tuple[str | None, str, str]:
    header = etree.fromstring(request.body)[0][0]
    username, password = (node.text or "" for node in header)
    return etree.QName(header).namespace, username, password


@pytest.mark.parametrize("binding", [vc.Binding.SOAP11, vc.Binding.SOAP12])
def test_every_request_carries_its_own_credentials(binding: vc.Binding) -> None:
    codec = vc.codec_for(binding)
    first, second = vc.Credentials("ann", "pw-1"), vc.Credentials("bob", "pw-2")
    ns = codec.namespace

    sent = [codec.encode(CONSENT, credentials=who) for who in (first, first, second, first)]

    assert [authentication(request) for request in sent] == [
        (ns, "ann", "pw-1"),
        (ns, "ann", "pw-1"),
        (ns, "bob", "pw-2"),
        (ns, "ann", "pw-1"),
    ]
    assert sent[0] == sent[1] == sent[3]


def test_a_namespace_changed_on_the_codec_reaches_the_header_too() -> None:
    codec = vc.codec_for(vc.Binding.SOAP11)
    credentials = vc.Credentials("ann", "pw-1")
    codec.encode(CONSENT, credentials=credentials)

    codec.namespace = "urn:moved"
    request = codec.encode(CONSENT, credentials=credentials)

    assert authentication(request) == ("urn:moved", "ann", "pw-1")
    assert etree.QName(etree.fromstring(request.body)[1][0]).namespace == "urn:moved"
