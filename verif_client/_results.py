"""Typed results of the six operations.

Every field that the service may send as ``xsi:nil`` or leave out is
``... | None``; ``None`` always means "the service sent no value", never a
default. In particular ``VerificationResult.verified is None`` means the
owner has not answered yet, which is not the same as ``False``.
"""

from __future__ import annotations

import attrs

from ._service import LOCATION_NOT_AVAILABLE

__all__ = ["Location", "LocationResult", "RequestResult", "VerificationResult"]


@attrs.frozen(slots=True)
class RequestResult:
    """Answer to SecureLink_Confirmation_SendRequestViaSms.

    ``request_id`` is the id to poll with; the service answers ``0`` together
    with an ``error_message`` when it refused the request.
    """

    request_id: int
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the service took the request: a non-zero id and no error message."""
        return self.request_id != 0 and not self.error_message


@attrs.frozen(slots=True)
class VerificationResult:
    """Answer to SecureLink_SecurityCode_HasBeenVerified.

    ``verified`` is tri-state: ``True`` (confirmed), ``False`` (answered no /
    not verified) or ``None`` (nil on the wire: nobody has answered yet).
    """

    verified: bool | None
    error_message: str | None = None

    @property
    def pending(self) -> bool:
        """Whether nobody has answered yet: ``verified`` nil and no error message."""
        return self.verified is None and not self.error_message


@attrs.frozen(slots=True)
class Location:
    """The twelve fields of a location result, in wire order."""

    latitude: float | None = None
    longitude: float | None = None
    accuracy_radius: float | None = None
    altitude: float | None = None
    altitude_accuracy: float | None = None
    address: str | None = None
    zip_postal_code: str | None = None
    city: str | None = None
    state_region: str | None = None
    county_district: str | None = None
    country: str | None = None
    distance: int | None = None


@attrs.frozen(slots=True)
class LocationResult:
    """Answer to SecureLink_MobileLocation_GetResult.

    ``location`` is ``None`` until the phone's owner shares a location (or if
    they decline); the service then says so in ``error_message``.
    """

    location: Location | None
    error_message: str | None = None

    @property
    def pending(self) -> bool:
        """True for the service's "not available (yet)" answer."""
        return self.location is None and (
            self.error_message is None
            or LOCATION_NOT_AVAILABLE.lower() in self.error_message.lower()
        )
