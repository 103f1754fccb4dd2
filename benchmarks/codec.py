"""Section 1: encode + decode cost of one call, every operation x binding.

Three contenders on the same inputs and the same answer bytes:
verif_client's sans-IO codec; zeep (WSDL loaded once, outside the timing:
``create_message`` + serialisation, then the binding's ``process_reply``, which
is what zeep runs around a real exchange); and a floor that no real client can
beat (a string template, then one plain ``lxml.etree.fromstring``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, urlencode
from xml.sax.saxutils import escape

from lxml import etree

from verif_client import DEFAULT_NAMESPACE, OPERATIONS, Binding, Credentials, Operation, codec_for

from . import workload
from .common import Report, Settings, median_per_call, ratio, us

ZEEP_PORTS = {
    Binding.SOAP11: "InquiriesWSSoap",
    Binding.SOAP12: "InquiriesWSSoap12",
    Binding.HTTP_GET: "InquiriesWSHttpGet",
    Binding.HTTP_POST: "InquiriesWSHttpPost",
}
_ENVELOPES = {
    Binding.SOAP11: "http://schemas.xmlsoap.org/soap/envelope/",
    Binding.SOAP12: "http://www.w3.org/2003/05/soap-envelope",
}


class _Reply:
    """The parts of an HTTP response zeep's ``process_reply`` reads."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.status_code = 200
        self.content = body
        self.headers = {"Content-Type": content_type}
        self.encoding = "utf-8"


def ours(op: Operation, binding: Binding, body: bytes) -> Callable[[], object]:
    codec = codec_for(binding)
    params = workload.sample_params(op)
    credentials = Credentials(workload.USERNAME, workload.PASSWORD) if binding.is_soap else None
    headers = (("Content-Type", workload.content_type(binding)),)

    def call() -> object:
        codec.encode(op, params, credentials=credentials)
        return codec.decode(op, 200, headers, body)

    return call


def floor(op: Operation, binding: Binding, body: bytes) -> Callable[[], object]:
    """The least work that still produces the request bytes and a parsed tree."""
    params = workload.sample_params(op)
    if binding.is_soap:
        fields = "".join(f"<{p.name}>{{}}</{p.name}>" for p in op.params)
        template = (
            '<?xml version="1.0" encoding="utf-8"?>'
            f'<soap:Envelope xmlns:soap="{_ENVELOPES[binding]}"><soap:Header>'
            f'<AuthenticationHeader xmlns="{DEFAULT_NAMESPACE}"><ApiUsername>{{}}</ApiUsername>'
            "<ApiPassword>{}</ApiPassword></AuthenticationHeader></soap:Header><soap:Body>"
            f'<{op.name} xmlns="{DEFAULT_NAMESPACE}">{fields}</{op.name}></soap:Body>'
            "</soap:Envelope>"
        )
        credentials = (workload.USERNAME, workload.PASSWORD)

        def encode() -> bytes:
            values = (*credentials, *params.values())
            return template.format(*[escape(str(v)) for v in values]).encode()
    else:
        quoter = quote if binding is Binding.HTTP_GET else quote_plus

        def encode() -> bytes:
            return urlencode(params, quote_via=quoter).encode()

    def call() -> object:
        encode()
        return etree.fromstring(body)

    return call


class Zeep:
    """zeep's sync client over the simulator's WSDL, one binding per port."""

    def __init__(self, wsdl: Path) -> None:
        import zeep

        self.client = zeep.Client(str(wsdl))
        self.services = {b: self.client.bind("InquiriesWS", port) for b, port in ZEEP_PORTS.items()}

    def call(self, op: Operation, binding: Binding, body: bytes) -> Callable[[], object]:
        from zeep.wsdl.utils import etree_to_string

        client = self.client
        service = self.services[binding]
        zbinding: Any = service._binding
        operation = zbinding.get(op.name)
        params = workload.sample_params(op)
        reply = _Reply(body, workload.content_type(binding))
        if binding.is_soap:
            header = {
                "AuthenticationHeader": {
                    "ApiUsername": workload.USERNAME,
                    "ApiPassword": workload.PASSWORD,
                }
            }

            def encode() -> object:
                envelope = client.create_message(service, op.name, _soapheaders=header, **params)
                return etree_to_string(envelope)
        else:

            def encode() -> object:
                message = zbinding.create_message(op.name, **params)
                # GET parameters leave zeep as a dict; httpx would urlencode them.
                content = message.content
                return urlencode(content) if isinstance(content, dict) else content

        def call() -> object:
            encode()
            return zbinding.process_reply(client, operation, reply)

        return call


def check_agreement(zeep_result: object, our_result: object, op: Operation) -> None:
    """Guard against timing a contender that silently reads something else."""
    if isinstance(our_result, bool | str):
        assert zeep_result == our_result, (op.name, zeep_result, our_result)


def run(report: Report, settings: Settings) -> None:
    number = settings.scaled(400, 30)
    repeats = settings.scaled(settings.repeats, 2)
    answers = workload.sample_answers()
    with tempfile.TemporaryDirectory() as tmp:
        zeep = Zeep(workload.write_wsdl(Path(tmp)))
    rows = []
    figures: dict[str, dict[str, float]] = {}
    all_cheaper = True
    for binding in Binding:
        for op in OPERATIONS:
            body = workload.response_body(op, binding, answers[op.name])
            contenders = {
                "verif_client": ours(op, binding, body),
                "zeep": zeep.call(op, binding, body),
                "floor": floor(op, binding, body),
            }
            check_agreement(contenders["zeep"](), contenders["verif_client"](), op)
            cost = {name: median_per_call(fn, number, repeats) for name, fn in contenders.items()}
            figures[f"{op.name}/{binding.value}"] = cost
            all_cheaper &= cost["verif_client"] < cost["zeep"]
            rows.append(
                [
                    op.name,
                    binding.value,
                    us(cost["verif_client"]),
                    us(cost["zeep"]),
                    us(cost["floor"]),
                    ratio(cost["zeep"], cost["verif_client"]),
                    ratio(cost["verif_client"], cost["floor"]),
                ]
            )
    report.figures["codec_seconds_per_call"] = figures
    report.table(
        "1. Codec: encode + decode, µs per call (median)",
        ["operation", "binding", "verif_client", "zeep", "floor", "zeep / ours", "ours / floor"],
        rows,
        f"{number} calls x {repeats} repeats per cell; floor = string template + one "
        "`lxml.etree.fromstring`, no checks, no typed result.",
    )
    key = f"{workload.VERIFIED_OP.name}/{Binding.SOAP11.value}"
    hbv = figures[key]
    speedup = hbv["zeep"] / hbv["verif_client"]
    over_floor = hbv["verif_client"] / hbv["floor"]
    report.target(
        "codec SOAP 1.1 HasBeenVerified >= 8x cheaper than zeep",
        speedup >= 8,
        f"{speedup:.1f}x ({us(hbv['verif_client'])} vs {us(hbv['zeep'])} µs)",
    )
    report.target(
        "codec SOAP 1.1 HasBeenVerified within 1.5x of the floor",
        over_floor <= 1.5,
        f"{over_floor:.2f}x ({us(hbv['verif_client'])} vs {us(hbv['floor'])} µs)",
    )
    slowest = min(figures.items(), key=lambda kv: kv[1]["zeep"] / kv[1]["verif_client"])
    report.target(
        "codec: every operation x binding cheaper than zeep",
        all_cheaper,
        f"smallest lead {slowest[1]['zeep'] / slowest[1]['verif_client']:.1f}x ({slowest[0]})",
    )
