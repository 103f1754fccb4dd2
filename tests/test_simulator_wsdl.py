"""The ?WSDL document, and interop with zeep, an independent SOAP client."""

from __future__ import annotations

import math
from collections.abc import Iterator

import httpx
import pytest
from _sim_helpers import EP, NS
from lxml import etree
from realparts import import_real_part

import verif_client as vc
from verif_client._operations import Record
from verif_client.simulator import Script, Server, Simulator, SimulatorConfig, serve_in_thread
from verif_client.simulator._wsdl import wsdl_document

W = "{http://schemas.xmlsoap.org/wsdl/}"
S = "{http://www.w3.org/2001/XMLSchema}"
SOAP = "{http://schemas.xmlsoap.org/wsdl/soap/}"
SOAP12 = "{http://schemas.xmlsoap.org/wsdl/soap12/}"
HTTP = "{http://schemas.xmlsoap.org/wsdl/http/}"
MIME = "{http://schemas.xmlsoap.org/wsdl/mime/}"
NAMES = [op.name for op in vc.OPERATIONS]


@pytest.fixture(scope="module")
def wsdl() -> etree._Element:
    return etree.fromstring(wsdl_document(NS, f"http://h{EP}"))


def test_one_service_with_four_ports(wsdl: etree._Element) -> None:
    (service,) = wsdl.findall(f"{W}service")
    ports = {port.get("name"): port for port in service.findall(f"{W}port")}
    assert set(ports) == {
        "InquiriesWSSoap",
        "InquiriesWSSoap12",
        "InquiriesWSHttpGet",
        "InquiriesWSHttpPost",
    }
    assert ports["InquiriesWSSoap"].find(f"{SOAP}address") is not None
    assert ports["InquiriesWSSoap12"].find(f"{SOAP12}address") is not None
    assert ports["InquiriesWSHttpGet"].find(f"{HTTP}address") is not None


def test_bindings_describe_every_operation(wsdl: etree._Element) -> None:
    bindings = {b.get("name"): b for b in wsdl.findall(f"{W}binding")}
    assert len(bindings) == 4
    for name, prefix in (("InquiriesWSSoap", SOAP), ("InquiriesWSSoap12", SOAP12)):
        binding = bindings[name]
        assert binding.find(f"{prefix}binding") is not None
        operations = binding.findall(f"{W}operation")
        assert [op.get("name") for op in operations] == NAMES
        for op in operations:
            action = op.find(f"{prefix}operation")
            assert action is not None
            assert action.get("soapAction") == f"{NS}/{op.get('name')}"
            header = op.find(f"{W}input/{prefix}header")
            assert header is not None
            assert header.get("part") == "AuthenticationHeader"
    get = bindings["InquiriesWSHttpGet"]
    assert get.find(f"{HTTP}binding").get("verb") == "GET"  # type: ignore[union-attr]
    assert get.find(f"{W}operation/{W}input/{HTTP}urlEncoded") is not None
    post = bindings["InquiriesWSHttpPost"]
    content = post.find(f"{W}operation/{W}input/{MIME}content")
    assert content is not None
    assert content.get("type") == "application/x-www-form-urlencoded"
    assert post.find(f"{W}operation/{W}output/{MIME}mimeXml").get("part") == "Body"  # type: ignore[union-attr]


def test_messages_and_port_types(wsdl: etree._Element) -> None:
    messages = {m.get("name"): m for m in wsdl.findall(f"{W}message")}
    assert len(messages) == 7 * len(NAMES)
    assert (
        messages["SecureLink_SecurityCode_HasBeenVerifiedHttpGetIn"]
        .find(f"{W}part")
        .get(  # type: ignore[union-attr]
            "type"
        )
        == "s:string"
    )  # GET/POST parameters are text, the long id included
    assert len(messages["GetMobileConsentTextHttpPostIn"]) == 0
    assert (
        messages["RevokeMobileConsentHttpGetOut"].find(f"{W}part").get("element") == "tns:boolean"
    )  # type: ignore[union-attr]
    port_types = [pt.get("name") for pt in wsdl.findall(f"{W}portType")]
    assert port_types == ["InquiriesWSSoap", "InquiriesWSHttpGet", "InquiriesWSHttpPost"]


def test_schema_types_and_nillability(wsdl: etree._Element) -> None:
    (schema,) = wsdl.findall(f"{W}types/{S}schema")
    assert schema.get("targetNamespace") == NS
    types = {ct.get("name"): ct for ct in schema.findall(f"{S}complexType")}
    assert set(types) == {
        "SecureLinkRequestResult",
        "SecureLinkCodeVerificationResult",
        "SecureLinkLocationResult",
        "LocationResult",
        "AuthenticationHeader",
    }

    def member(type_name: str, name: str) -> dict[str, str]:
        node = types[type_name].find(f"{S}sequence/{S}element[@name='{name}']")
        assert node is not None
        return dict(node.attrib)

    assert member("SecureLinkRequestResult", "SecureLinkRequestId") == {
        "minOccurs": "1",
        "maxOccurs": "1",
        "name": "SecureLinkRequestId",
        "type": "s:long",
    }
    assert member("SecureLinkCodeVerificationResult", "Verified")["nillable"] == "true"
    assert member("LocationResult", "Latitude")["nillable"] == "true"
    assert member("LocationResult", "Distance")["type"] == "s:int"
    assert member("LocationResult", "City")["minOccurs"] == "0"
    assert member("SecureLinkLocationResult", "LocationResult")["type"] == "tns:LocationResult"
    elements = {e.get("name"): e for e in schema.findall(f"{S}element")}
    for name in NAMES:
        assert name in elements
        assert f"{name}Response" in elements
    assert elements["boolean"].get("type") == "s:boolean"
    assert elements["string"].get("nillable") == "true"
    assert elements["AuthenticationHeader"].get("type") == "tns:AuthenticationHeader"
    request_id = elements["SecureLink_SecurityCode_HasBeenVerified"].find(f".//{S}element")
    assert request_id is not None
    assert (request_id.get("minOccurs"), request_id.get("type")) == ("1", "s:long")


# -- zeep --------------------------------------------------------------------

zeep = import_real_part("zeep", "the WSDL is read by zeep, a peer's client")

PORTS = {
    vc.Binding.SOAP11: "InquiriesWSSoap",
    vc.Binding.SOAP12: "InquiriesWSSoap12",
    vc.Binding.HTTP_GET: "InquiriesWSHttpGet",
    vc.Binding.HTTP_POST: "InquiriesWSHttpPost",
}
HEADER = {"AuthenticationHeader": {"ApiUsername": "user", "ApiPassword": "pass"}}
PLACE = vc.Location(
    latitude=math.inf,
    longitude=-97.123456789012337,
    accuracy_radius=1e-05,
    altitude=math.nan,
    altitude_accuracy=3.9999999999999996,
    address="1 <Main> & Co \u00e9",
    country="US",
    distance=None,
)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Simulator, Server]]:
    sim = Simulator(credentials=("user", "pass"), config=SimulatorConfig(script=Script.manual()))
    with serve_in_thread(sim) as server:
        yield sim, server


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _plain(shape: object, value: object) -> object:
    """A zeep answer turned into our result type, generically over the table."""
    if not isinstance(shape, Record):
        return value
    if value is None:
        return None
    values = {}
    for field in shape.fields:
        values[field.attr] = _plain(field.type, value[field.element])
    return shape.cls(**values)


def _equal(ours: object, theirs: object) -> bool:
    if hasattr(ours, "__attrs_attrs__"):
        return type(ours) is type(theirs) and all(
            _equal(getattr(ours, a.name), getattr(theirs, a.name))
            for a in ours.__attrs_attrs__  # type: ignore[attr-defined]
        )
    return _same(ours, theirs)


@pytest.mark.parametrize("binding", list(vc.Binding))
def test_zeep_and_our_codecs_read_the_same_values(
    served: tuple[Simulator, Server], binding: vc.Binding
) -> None:
    sim, server = served
    client = zeep.Client(server.wsdl_url)
    service = client.bind("InquiriesWS", PORTS[binding])
    extra = {"_soapheaders": HEADER} if binding.is_soap else {}
    codec = vc.codec_for(binding)

    def ours(operation: str, **params: object) -> object:
        request = codec.encode(operation, params, credentials=vc.Credentials("user", "pass"))
        with httpx.Client(base_url=server.base_url) as http:
            response = http.request(
                request.method, request.path, headers=request.headers, content=request.body
            )
        return codec.decode(
            operation, response.status_code, response.headers.items(), response.content
        )

    def theirs(operation: str, **params: object) -> object:
        op = vc.get_operation(operation)
        return _plain(op.result, getattr(service, operation)(**params, **extra))

    sent = theirs(
        "SecureLink_Confirmation_SendRequestViaSms",
        PhoneNumber="5551234567",
        ConfirmationQuestion="Ok?",
    )
    assert isinstance(sent, vc.RequestResult)
    assert sent.request_id > 2**32
    assert sent.error_message is None
    refused = dict(PhoneNumber="12", ConfirmationQuestion="Ok?")
    codec.validate = False
    assert _equal(
        ours("SecureLink_Confirmation_SendRequestViaSms", **refused),
        theirs("SecureLink_Confirmation_SendRequestViaSms", **refused),
    )
    codec.validate = True
    request_id = sent.request_id
    for operation in (
        "SecureLink_SecurityCode_HasBeenVerified",
        "SecureLink_MobileLocation_GetResult",
    ):
        assert _equal(
            ours(operation, RequestId=request_id), theirs(operation, RequestId=request_id)
        )
    sim.verify(request_id)
    sim.share_location(request_id, PLACE)
    for operation in (
        "SecureLink_SecurityCode_HasBeenVerified",
        "SecureLink_MobileLocation_GetResult",
    ):
        mine = ours(operation, RequestId=request_id)
        assert _equal(mine, theirs(operation, RequestId=request_id))
    assert _equal(mine, vc.LocationResult(PLACE))
    assert theirs("GetMobileConsentText") == ours("GetMobileConsentText") == sim.consent_text
    number = f"55512{list(vc.Binding).index(binding)}0000"
    assert theirs("RevokeMobileConsent", MobileNumber=number) is True
    assert (
        theirs("RevokeMobileConsent", MobileNumber=number)
        is ours("RevokeMobileConsent", MobileNumber=number)
        is False
    )
    assert (
        theirs("UpdatePrivateBadCheckRejectReason", BadCheckId=1001, CheckRejectReason="NSF")
        is True
    )
    assert ours("UpdatePrivateBadCheckRejectReason", BadCheckId=3, CheckRejectReason="NSF") is False
    assert (
        theirs("UpdatePrivateBadCheckRejectReason", BadCheckId=3, CheckRejectReason="NSF") is False
    )
    logged = [req for req in sim.requests if req.binding == binding.value]
    assert {req.credentials_present for req in logged} == {binding.is_soap}


@pytest.mark.parametrize("binding", [vc.Binding.SOAP11, vc.Binding.SOAP12])
def test_zeep_reads_our_faults_and_trips_on_the_credential_message(
    served: tuple[Simulator, Server], binding: vc.Binding
) -> None:
    """zeep turns our SOAP faults into ``zeep.exceptions.Fault`` with the faultstring/Reason.

    Its gap, shown rather than hidden: the service's credential failure (HTTP 200,
    ``text/xml``, plain text) reaches a zeep user as a TransportError about invalid
    XML, where verif_client raises AuthenticationError.
    """
    _, server = served
    client = zeep.Client(server.wsdl_url)
    other = Simulator(namespace="urn:another-version")
    with serve_in_thread(other) as elsewhere:
        # Our WSDL's actions sent to a service of another namespace: ASMX's routing fault.
        binding_name = f"{{{NS}}}{PORTS[binding]}"
        stranger = client.create_service(binding_name, elsewhere.endpoint_url)
        with pytest.raises(zeep.exceptions.Fault) as fault:
            stranger.GetMobileConsentText()
    if binding is vc.Binding.SOAP11:
        assert fault.value.message.startswith("Server did not recognize the value of HTTP Header")
        assert fault.value.code == "soap:Client"
    else:
        # SOAP 1.2 ignores an action it does not know and routes on the body,
        # whose element is in a namespace this service does not serve.
        assert "valid action parameter" in fault.value.message
    service = client.bind("InquiriesWS", PORTS[binding])
    with pytest.raises(zeep.exceptions.TransportError, match="invalid XML"):
        service.GetMobileConsentText()  # no AuthenticationHeader
