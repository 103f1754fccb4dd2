"""The facts of the VerificationServices v5 service, in one place.

What the service is and what it accepts, independent of how a request is
built or answered: its bindings, namespace, endpoint, how ASMX names a SOAP
action, and the rules it applies to inputs. The codecs, the client, the
poller, bulk jobs and the simulator all take these from here; the simulator
keeps its own algorithms (it is the check on the codecs) but shares the facts.
"""

from __future__ import annotations

import enum
import re
from typing import Final

SANDBOX_BASE_URL: Final = "https://sandbox.api.giact.com"
PRODUCTION_BASE_URL: Final = "https://api.giact.com"
DEFAULT_NAMESPACE: Final = "http://api.giact.com/verificationservices/v5"
ENDPOINT_PATH: Final = "/verificationservices/v5/InquiriesWS-5-8.asmx"

FORM_CONTENT_TYPE: Final = "application/x-www-form-urlencoded"
SOAP11_CONTENT_TYPE: Final = "text/xml; charset=utf-8"
SOAP12_CONTENT_TYPE: Final = "application/soap+xml; charset=utf-8"

# [0-9], not \d: a phone number in other scripts' digits is not one an SMS gateway takes.
PHONE_NUMBER: Final = re.compile(r"[0-9]{7,15}")
# ConfirmationQuestion, counted as .NET counts a string's Length (UTF-16 code units).
MAX_QUESTION_UNITS: Final = 200
# ASP.NET request validation refuses a form or query value matching this
# before the service runs: '<' followed by a letter, '!', '/' or '?', or '&#'.
REQUEST_VALIDATION: Final = re.compile(r"<[A-Za-z!/?]|&#")

LOCATION_NOT_AVAILABLE: Final = "Location not available for this SecureLink RequestID"


class Binding(enum.StrEnum):
    """The four ways the service can be called."""

    SOAP11 = "soap11"
    SOAP12 = "soap12"
    HTTP_GET = "http-get"
    HTTP_POST = "http-post"

    @property
    def is_soap(self) -> bool:
        """Whether the binding is SOAP (1.1 or 1.2): only SOAP carries credentials."""
        return self in (Binding.SOAP11, Binding.SOAP12)

    @classmethod
    def _missing_(cls, value: object) -> Binding | None:
        # Accept the member names too ("SOAP11", "http_get"), as users type them.
        if isinstance(value, str):
            wanted = value.strip().lower().replace("_", "-")
            for member in cls:
                if wanted in (member.value, member.name.lower().replace("_", "-")):
                    return member
        return None


def parse_binding(value: Binding | str) -> Binding:
    """A Binding from itself, its value or its name; a clear ValueError otherwise."""
    try:
        return Binding(value)
    except ValueError:
        choices = ", ".join(member.value for member in Binding)
        raise ValueError(f"binding: {value!r} is not one of {choices}") from None


def soap_action(namespace: str, operation: str) -> str:
    """The SOAP action of an operation, unquoted: ASMX joins the namespace and
    the name with one slash, adding it only if the namespace lacks it."""
    separator = "" if namespace.endswith("/") else "/"
    return f"{namespace}{separator}{operation}"
