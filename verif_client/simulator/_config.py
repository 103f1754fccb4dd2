"""The simulator's knobs: per-request scripts and the frozen configuration."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final, Literal

import attrs

from .._operations import OPERATIONS
from .._results import Location
from .._service import ENDPOINT_PATH

Answer = Literal["verified", "declined", "never"]
LocationAnswer = Literal["shared", "denied", "never"]
CredentialFailure = Literal["message", "http-401"]
VerifiedDialect = Literal["nil", "bool"]

DEFAULT_LOCATION: Final = Location(
    latitude=30.2672,
    longitude=-97.123456789012337,
    accuracy_radius=1e-05,
    altitude=149.5,
    altitude_accuracy=3.9999999999999996,
    address="1 Congress Ave & 2nd St",
    zip_postal_code="78701",
    city="Austin",
    state_region="TX",
    county_district="Travis",
    country="US",
    distance=12,
)

# Specials and non-ASCII on purpose: a codec that forgets to escape or to
# decode UTF-8 fails on the very first call.
DEFAULT_CONSENT_TEXT: Final = (
    "By answering \u201cYes\u201d you agree that ACME & Co. <Verification Services> may "
    "confirm your identity with your mobile carrier\u2019s records (name, address & "
    "location) \u2014 r\u00e9ponse \u00ab oui \u00bb = accord. \U0001f4f1 Reply STOP to opt out."
)

DEFAULT_BAD_CHECKS: Final[Mapping[int, str]] = {
    1001: "",
    1002: "NSF",
    2**40 + 3: "Account Closed",
}


@attrs.frozen(slots=True)
class Script:
    """How one SecureLink request answers its polls.

    Verification: the first ``pending_polls`` calls of HasBeenVerified answer
    ``Verified`` nil; the next one settles the request as ``answer`` (``"never"``
    keeps it pending for ever). With ``pending_seconds`` set, the request stays
    pending for that long after the SMS instead, measured with the configured
    clock. Location works the same with ``location_pending_polls`` /
    ``location_pending_seconds`` and ``location`` (``"shared"`` answers
    ``shared_location``; ``"denied"`` and ``"never"`` answer "not available" as
    the service does). A settled state never changes again on its own, though
    ``Simulator.verify()`` and friends may still override it.
    """

    answer: Answer = "verified"
    pending_polls: int = 2
    pending_seconds: float | None = None
    location: LocationAnswer = "shared"
    location_pending_polls: int = 2
    location_pending_seconds: float | None = None
    shared_location: Location = DEFAULT_LOCATION

    @classmethod
    def manual(cls) -> Script:
        """Nothing happens until someone calls ``verify()``/``share_location()``."""
        return cls(answer="never", location="never")


def _fraction(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be between 0 and 1, got {value!r}")


def _operation_names(
    _instance: object, attribute: attrs.Attribute[frozenset[str]], value: frozenset[str]
) -> None:
    unknown = sorted(value - {op.name for op in OPERATIONS})
    if unknown:
        raise ValueError(f"{attribute.name}: {unknown[0]!r} is not an operation of the service")


def _non_negative(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value!r}")


@attrs.frozen(slots=True)
class SimulatorConfig:
    """Everything about a simulator that is fixed when it is created.

    Fault knobs apply to operation calls only (never to ``?WSDL``), in this
    order once the request has been read: latency, then drop, then 503, then
    the operation runs and its answer may be made malformed.
    """

    script: Script = Script()
    """The script of every SecureLink request not given one with ``script_for``."""
    manual: bool = False
    """Leave every request pending until a person answers it on the phone pages
    (``/phone/``): the default script becomes ``Script.manual()``. A script given
    with ``script_for`` still wins."""
    link_lifetime: float | None = 900.0
    """Seconds an SMS link can be answered on the phone pages (None: for ever),
    measured with ``clock``. An unanswered request then shows as expired there
    and HasBeenVerified keeps answering nil, as for an SMS nobody opened."""
    first_request_id: int = 2**32 + 1
    """Ids start above 2**32 so a client that truncates them to 32 bits fails at once."""
    consent_by_default: bool = True
    """Every number has consent until revoked (False: only those given ``record_consent``)."""
    consent_text: str = DEFAULT_CONSENT_TEXT
    bad_checks: Mapping[int, str] = attrs.field(default=DEFAULT_BAD_CHECKS, converter=dict)
    """The bad-check items that exist (id -> CheckRejectReason); any other id does not."""
    verified_dialect: VerifiedDialect = attrs.field(
        default="nil", validator=attrs.validators.in_(("nil", "bool"))
    )
    """How HasBeenVerified says "nobody answered yet": "nil" (``Verified`` nil; false is
    a "no"; an unknown id is nil + ErrorMessage) or "bool", a plain .NET ``bool`` member
    (false while pending; an unknown id is false + ErrorMessage)."""
    throws: frozenset[str] = attrs.field(
        default=frozenset(), converter=frozenset, validator=_operation_names
    )
    """Operations (by wire name) whose web method throws: a soap:Server/Receiver fault on
    SOAP, a text/plain 500 with the exception's first line on HTTP GET/POST."""
    credential_failure: CredentialFailure = "message"
    """How wrong SOAP credentials are answered: "message" (HTTP 200 ``Error Message:
    Invalid API Credentials``) or "http-401" (the IIS 401 page)."""
    blocked: bool = False
    """Answer every request with the IIS 401 page, as for a blocked caller."""
    latency: float = attrs.field(default=0.0, validator=_non_negative)
    """Seconds added to every operation call."""
    jitter: float = attrs.field(default=0.0, validator=_non_negative)
    """Up to this many more seconds, uniformly random, added to every call."""
    fail_503: float = attrs.field(default=0.0, validator=_fraction)
    """Fraction of operation calls answered HTTP 503 (the HTTP.sys page)."""
    drop: float = attrs.field(default=0.0, validator=_fraction)
    """Fraction of operation calls whose connection is closed after the request was read."""
    malformed: float = attrs.field(default=0.0, validator=_fraction)
    """Fraction of successful answers cut in half (HTTP 200, unparseable XML)."""
    seed: int | None = 0
    """Seed of the random choices above; None for a different run every time."""
    clock: Callable[[], float] = time.monotonic
    """Time source of ``pending_seconds`` scripts; tests inject a fake one."""
    endpoint_path: str = ENDPOINT_PATH
    """Where the service lives; matched case-insensitively, as IIS does."""

    @property
    def default_script(self) -> Script:
        """The script of requests not given one: ``Script.manual()`` when
        ``manual``, else ``script``.
        """
        return Script.manual() if self.manual else self.script
