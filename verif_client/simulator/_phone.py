"""The simulator's phone: pages under ``/phone/`` where a person answers the SMS.

They stand in for the phone that received the SecureLink SMS: an inbox (all
numbers, or one), the page behind the SMS link (Yes / No, share a location),
and a consent page per number. Every action goes through the same state the
operations read, so HasBeenVerified, MobileLocation_GetResult and
RevokeMobileConsent answer differently at once. Forms post back and redirect
(POST-redirect-GET), so a reload never answers twice; only the inbox's live
update needs JavaScript.

A post from another site is refused (403): any web page the tester visits
while the simulator runs could otherwise answer "Yes" by a hidden form. A
browser names where a post comes from (``Origin``, or ``Sec-Fetch-Site``, or
at least ``Referer``); the post must come from the pages' own host. A request
naming none of them is not a browser's, so there is no visitor to forge for.

A page of another site can also reach them by DNS rebinding: its own name,
re-pointed to 127.0.0.1, makes the browser treat the inbox as that site's own
and read it. The browser still sends that name as ``Host``, so every page is
refused unless ``Host`` names the address the simulator serves: a loopback
name or address, or the host it was bound to (bound to a wildcard address, any
IP address literal too, which no DNS answer can fake).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, urlsplit

from .._results import Location
from .._service import FORM_CONTENT_TYPE, PHONE_NUMBER
from . import _phone_pages as pages
from ._asmx import Request
from ._config import DEFAULT_LOCATION
from ._responses import HTML_UTF8, Response
from ._state import SecureLinkRequest

if TYPE_CHECKING:
    from ._simulator import Simulator

PREFIX: Final = "/phone/"

PLACES: Final = (
    pages.Place("austin", "Austin, TX (1 Congress Ave)", DEFAULT_LOCATION),
    pages.Place(
        "new-york",
        "New York, NY (Times Square)",
        Location(
            latitude=40.758,
            longitude=-73.9855,
            accuracy_radius=15.0,
            address="1560 Broadway",
            zip_postal_code="10036",
            city="New York",
            state_region="NY",
            county_district="New York",
            country="US",
        ),
    ),
    pages.Place(
        "paris",
        "Paris, France (Tour Eiffel)",
        Location(
            latitude=48.8584,
            longitude=2.2945,
            accuracy_radius=25.0,
            address="Champ de Mars, 5 Av. Anatole France",
            zip_postal_code="75007",
            city="Paris",
            state_region="Île-de-France",
            country="FR",
        ),
    ),
)
_PLACES_BY_KEY: Final = {place.key: place for place in PLACES}

# Fixed texts chosen by a key in the redirect's query: the page never echoes
# anything a form sent.
_NOTICES: Final = {
    "yes": "You answered Yes.",
    "no": "You answered No.",
    "shared": "Location shared.",
    "denied": "Location not shared.",
    "recorded": "Consent recorded.",
    "revoked": "Consent revoked.",
    "not-revoked": "There was no consent to revoke.",
}

_ID: Final = re.compile(r"[0-9]{1,19}")
_HEADERS: Final = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)


def handles(path: str) -> bool:
    return path == PREFIX.rstrip("/") or path.startswith(PREFIX)


class _NotFound(Exception):
    pass


class _BadRequest(Exception):
    pass


class _CrossSite(Exception):
    pass


def _from_elsewhere(request: Request) -> bool:
    """Whether a browser says this request comes from another site."""
    headers = request.headers
    host = request.host.lower()
    # Sec-Fetch-Site first: a browser sets it and no page can, and it stays
    # exact where Origin is "null" (these pages send no referrer, so Chromium
    # posts their forms with Origin: null).
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is not None:
        return origin == "null" or urlsplit(origin).netloc.lower() != host
    referer = headers.get("referer")
    return referer is not None and urlsplit(referer).netloc.lower() != host


_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})
_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::"})


def _host_name(host: str) -> str:
    """The name in a Host header, without its port or IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _served_here(request: Request) -> bool:
    """Whether the Host header names this simulator rather than another site."""
    name = _host_name(request.host)
    bound = _host_name(request.server_host or "")
    if name in _LOOPBACK_NAMES or name.endswith(".localhost") or name == bound:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or bound in _WILDCARDS


class _OtherHost(Exception):
    pass


class PhonePages:
    """Routes ``/phone/...`` requests against one simulator."""

    def __init__(self, simulator: Simulator) -> None:
        self._sim = simulator

    def route(self, request: Request) -> Response:
        try:
            return self._route(request)
        except _NotFound as exc:
            return _html(404, pages.error_page(404, str(exc) or "Not found."))
        except _BadRequest as exc:
            return _html(400, pages.error_page(400, str(exc)))
        except _CrossSite:
            message = "Refused: this form was posted from another site."
            return _html(403, pages.error_page(403, message))
        except _OtherHost:
            message = "Refused: open the phone pages at the simulator's own address."
            return _html(403, pages.error_page(403, message))

    def _route(self, request: Request) -> Response:
        if not _served_here(request):
            raise _OtherHost
        if request.path == PREFIX.rstrip("/"):
            return _redirect(PREFIX)
        parts = request.path[len(PREFIX) :].split("/")
        method = request.method
        if method == "POST" and _from_elsewhere(request):
            raise _CrossSite
        query = _fields(request.query)
        match parts, method:
            case [""], "GET" | "HEAD":
                return self._inbox(None)
            case ["inbox.json"], "GET" | "HEAD":
                return self._feed(query.get("number"))
            case ["live.js"], "GET" | "HEAD":
                return _static("text/javascript; charset=utf-8", pages.LIVE_JS)
            case ["style.css"], "GET" | "HEAD":
                return _static("text/css; charset=utf-8", pages.STYLE_CSS)
            case ["link", rid], "GET" | "HEAD":
                return self._link(self._request(rid), query.get("done"))
            case ["link", rid, "answer"], "POST":
                return self._answer(self._request(rid), _form(request))
            case ["link", rid, "location"], "POST":
                return self._location(self._request(rid), _form(request))
            case [number, ""], "GET" | "HEAD":
                return self._inbox(_number(number))
            case [number, "consent"], "GET" | "HEAD":
                return self._consent_page(_number(number), query.get("done"))
            case [number, "consent"], "POST":
                return self._consent(_number(number), _form(request))
            case [number], "GET" | "HEAD" if PHONE_NUMBER.fullmatch(number):
                return _redirect(f"{PREFIX}{number}/")
        if method not in ("GET", "HEAD", "POST"):
            return _html(405, pages.error_page(405, "Method not allowed."))
        raise _NotFound("No such page.")

    # -- reading the state ----------------------------------------------------

    def _request(self, text: str) -> SecureLinkRequest:
        if not _ID.fullmatch(text):
            raise _NotFound("No such SecureLink request.")
        try:
            return self._sim.secure_link(int(text))
        except KeyError:
            raise _NotFound("No such SecureLink request.") from None

    def _messages(self, number: str | None) -> list[pages.Message]:
        chosen = [
            self.message(link)
            for link in self._sim.secure_links
            if number is None or link.phone_number == number
        ]
        # Newest first; ids grow with time, so they break ties within one clock tick.
        chosen.sort(key=lambda m: (m.sent_at, m.request_id), reverse=True)
        return chosen

    def message(self, link: SecureLinkRequest) -> pages.Message:
        return pages.Message(
            request_id=link.request_id,
            phone_number=link.phone_number,
            question=link.question,
            sent_at=link.sent_at_wall,
            state=self.state_of(link),
            location_state=link.location_state,
            location=link.location,
        )

    def state_of(self, link: SecureLinkRequest) -> str:
        if link.verification == "verified":
            return "confirmed"
        if link.verification == "declined":
            return "declined"
        lifetime = self._sim.config.link_lifetime
        if lifetime is not None and self._sim.config.clock() - link.sent_at >= lifetime:
            return "expired"
        return "pending"

    # -- pages ------------------------------------------------------------------

    def _inbox(self, number: str | None) -> Response:
        messages = self._messages(number)
        if number is None:
            numbers = sorted({link.phone_number for link in self._sim.secure_links})
            body = pages.inbox(
                "Inbox: all numbers",
                messages,
                _version(messages),
                f"{PREFIX}inbox.json",
                show_number=True,
                intro=pages.numbers_list(numbers),
            )
        else:
            body = pages.inbox(
                f"Inbox of {number}",
                messages,
                _version(messages),
                f"{PREFIX}inbox.json?number={number}",
                show_number=False,
                intro=pages.number_intro(number, self._sim.has_consent(number)),
            )
        return _html(200, body)

    def _feed(self, number: str | None) -> Response:
        if number is not None:
            number = _number(number)
        messages = self._messages(number)
        data = {
            "version": _version(messages),
            "messages": [
                {
                    "request_id": m.request_id,
                    "phone_number": m.phone_number,
                    "question": m.question,
                    "sent_at": m.sent_at,
                    "state": m.state,
                    "location_state": m.location_state,
                    "link": f"{PREFIX}link/{m.request_id}",
                }
                for m in messages
            ],
        }
        body = json.dumps(data, ensure_ascii=True).encode("ascii")
        return Response(200, "application/json", body, (*_HEADERS, ("Cache-Control", "no-store")))

    def _link(self, link: SecureLinkRequest, done: str | None) -> Response:
        notice = _NOTICES.get(done or "", "")
        return _html(200, pages.link_page(self.message(link), PLACES, notice=notice))

    def _consent_page(self, number: str, done: str | None) -> Response:
        notice = _NOTICES.get(done or "", "")
        body = pages.consent_page(
            number, self._sim.has_consent(number), self._sim.consent_text, notice=notice
        )
        return _html(200, body)

    # -- actions ------------------------------------------------------------------

    def _answer(self, link: SecureLinkRequest, form: dict[str, str]) -> Response:
        answer = form.get("answer")
        if answer not in ("yes", "no"):
            raise _BadRequest("Answer Yes or No.")
        state = self.state_of(link)
        if state == "expired":
            return _html(410, pages.error_page(410, "This link has expired."))
        if state != "pending":
            return _html(409, pages.error_page(409, "This SMS has already been answered."))
        if answer == "yes":
            self._sim.verify(link.request_id)
        else:
            self._sim.decline(link.request_id)
        return _redirect(f"{PREFIX}link/{link.request_id}?done={answer}")

    def _location(self, link: SecureLinkRequest, form: dict[str, str]) -> Response:
        if self.state_of(link) == "expired":
            return _html(410, pages.error_page(410, "This link has expired."))
        if link.location_state != "pending":
            return _html(409, pages.error_page(409, "The location has already been answered."))
        if form.get("share") == "no":
            self._sim.deny_location(link.request_id)
            return _redirect(f"{PREFIX}link/{link.request_id}?done=denied")
        self._sim.share_location(link.request_id, _chosen_location(form))
        return _redirect(f"{PREFIX}link/{link.request_id}?done=shared")

    def _consent(self, number: str, form: dict[str, str]) -> Response:
        choice = form.get("consent")
        if choice == "record":
            self._sim.record_consent(number)
            done = "recorded"
        elif choice == "revoke":
            done = "revoked" if self._sim.revoke_consent(number) else "not-revoked"
        else:
            raise _BadRequest("Record or revoke the consent.")
        return _redirect(f"{PREFIX}{number}/consent?done={done}")


def _chosen_location(form: dict[str, str]) -> Location:
    key = form.get("place", "")
    if key:
        place = _PLACES_BY_KEY.get(key)
        if place is None:
            raise _BadRequest("Unknown place.")
        return place.location
    latitude = _coordinate(form.get("latitude", ""), "Latitude", 90.0)
    longitude = _coordinate(form.get("longitude", ""), "Longitude", 180.0)
    # A phone's GPS fix reports its accuracy; 10 m is a typical outdoor one.
    return Location(latitude=latitude, longitude=longitude, accuracy_radius=10.0)


def _coordinate(text: str, name: str, bound: float) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise _BadRequest(f"{name}: choose a place or type a number.") from None
    if not math.isfinite(value) or abs(value) > bound:
        raise _BadRequest(f"{name} must be between -{bound:g} and {bound:g}.")
    return value


def _number(text: str) -> str:
    if not PHONE_NUMBER.fullmatch(text):
        raise _NotFound("Not a phone number (7 to 15 digits).")
    return text


def _fields(raw: bytes) -> dict[str, str]:
    parsed = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in parsed.items()}


def _form(request: Request) -> dict[str, str]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != FORM_CONTENT_TYPE:
        raise _BadRequest("Expected a form.")
    return _fields(request.body)


def _version(messages: Sequence[pages.Message]) -> str:
    state = "|".join(f"{m.request_id}:{m.state}:{m.location_state}" for m in messages)
    return hashlib.sha256(state.encode()).hexdigest()[:16]


def _html(status: int, text: str) -> Response:
    return Response(status, HTML_UTF8, text.encode("utf-8"), _HEADERS)


def _static(content_type: str, text: str) -> Response:
    return Response(200, content_type, text.encode("utf-8"), _HEADERS)


def _redirect(location: str) -> Response:
    # 303: the browser follows a form POST with a GET, so reloading never resubmits.
    return Response(303, None, b"", (*_HEADERS, ("Location", location)))
