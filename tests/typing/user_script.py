"""A user's script: every public method, every result field, sync and async.

``mypy --strict`` checks it (the lint session) with no casts: it proves the
public API is typed as a user reads it. ``tests/test_public_api.py`` also runs it
against the simulator, so it stays true.
"""

from __future__ import annotations

import anyio

import verif_client as vc

POLICY = vc.PollPolicy(initial_delay=0, multiplier=1, max_delay=0, jitter=0, timeout=30)


def read_location(location: vc.Location | None) -> list[object]:
    if location is None:
        return []
    fields: list[float | str | int | None] = [
        location.latitude,
        location.longitude,
        location.accuracy_radius,
        location.altitude,
        location.altitude_accuracy,
        location.address,
        location.zip_postal_code,
        location.city,
        location.state_region,
        location.county_district,
        location.country,
        location.distance,
    ]
    return list(fields)


def read_verification(outcome: vc.VerificationOutcome) -> tuple[object, ...]:
    verified: bool | None = outcome.result.verified if outcome.result else None
    error: vc.VerifClientError | None = outcome.error
    return (outcome.request_id, outcome.status, verified, error, outcome.attempts, outcome.elapsed)


def read_location_outcome(outcome: vc.LocationOutcome) -> tuple[object, ...]:
    location = outcome.result.location if outcome.result else None
    return (outcome.request_id, outcome.status, read_location(location), outcome.elapsed)


async def async_user(base_url: str) -> list[object]:
    seen: list[object] = []
    async with vc.VerificationClient(base_url, username="u", password="p") as client:
        sent: vc.RequestResult = await client.send_confirmation_sms("5551234567", "Pay ACME?")
        request_id: int = sent.request_id
        seen += [sent.error_message, sent.ok]
        verification: vc.VerificationResult = await client.has_been_verified(request_id)
        seen += [verification.verified, verification.error_message, verification.pending]
        location: vc.LocationResult = await client.get_mobile_location(request_id)
        seen += [*read_location(location.location), location.error_message, location.pending]
        revoked: bool = await client.revoke_mobile_consent("5551234567")
        text: str = await client.get_mobile_consent_text(binding=vc.Binding.SOAP12)
        updated: bool = await client.update_bad_check_reject_reason(1001, "NSF")
        seen += [revoked, text, updated]

        typed: vc.VerificationResult = await client.call(vc.HAS_BEEN_VERIFIED, RequestId=request_id)
        mapped: vc.LocationResult = await client.call_with(
            vc.GET_MOBILE_LOCATION, {"RequestId": request_id}, retry=vc.NO_RETRY
        )
        untyped: object = await client.call("GetMobileConsentText")
        codec: vc.Codec = client.codec(vc.Binding.HTTP_GET)
        seen += [typed.verified, mapped.location, untyped, codec.binding]

        waited: vc.VerificationOutcome = await client.wait_until_verified(request_id, policy=POLICY)
        located: vc.LocationOutcome = await client.wait_for_location(request_id, policy=POLICY)
        seen += [read_verification(waited), read_location_outcome(located)]

        async with client.poll_verifications([request_id], policy=POLICY) as verifications:
            async for verification_outcome in verifications:
                seen.append(read_verification(verification_outcome))
        async with client.poll_locations([request_id], max_concurrency=4) as locations:
            async for location_outcome in locations:
                seen.append(read_location_outcome(location_outcome))
        async with client.poll_verifications_and_locations(policy=POLICY, keep_open=True) as both:
            both.add(request_id)
            both.close_input()
            async for either in both:
                if isinstance(either, vc.VerificationOutcome):
                    seen.append(read_verification(either))
                else:
                    seen.append(read_location_outcome(either))
    return seen


def sync_user(base_url: str) -> list[object]:
    seen: list[object] = []
    with vc.SyncVerificationClient(base_url, username="u", password="p") as client:
        sent: vc.RequestResult = client.send_confirmation_sms("5551234567", "Pay ACME?")
        verification: vc.VerificationResult = client.has_been_verified(sent.request_id)
        location: vc.LocationResult = client.get_mobile_location(sent.request_id)
        seen += [sent.request_id, verification.verified, read_location(location.location)]
        seen += [
            client.revoke_mobile_consent("5551234567"),
            client.get_mobile_consent_text(),
            client.update_bad_check_reject_reason(1001, "NSF"),
        ]
        typed: vc.VerificationResult = client.call(vc.HAS_BEEN_VERIFIED, RequestId=sent.request_id)
        text: str = client.call_with(vc.GET_MOBILE_CONSENT_TEXT, {}, before_send=lambda: None)
        seen += [typed.verified, text, client.codec().binding]
        seen.append(read_verification(client.wait_until_verified(sent.request_id, policy=POLICY)))
        seen.append(read_location_outcome(client.wait_for_location(sent.request_id, policy=POLICY)))
        for verification_outcome in client.poll_verifications([sent.request_id], policy=POLICY):
            seen.append(read_verification(verification_outcome))
        for location_outcome in client.poll_locations([sent.request_id], policy=POLICY):
            seen.append(read_location_outcome(location_outcome))
        for either in client.poll_verifications_and_locations([sent.request_id], policy=POLICY):
            seen.append(either.status)
    return seen


def codec_user(body: bytes) -> bool | None:
    codec: vc.Codec = vc.codec_for(vc.Binding.HTTP_GET)
    request: vc.HTTPRequest = codec.encode(vc.HAS_BEEN_VERIFIED, {"RequestId": 5000000001})
    seen = [request.method, request.path, request.headers, request.body]
    result: vc.VerificationResult = codec.decode(vc.HAS_BEEN_VERIFIED, 200, (), body)
    operation: vc.Operation[vc.VerificationResult] = vc.get_operation(vc.HAS_BEEN_VERIFIED)
    seen += [operation.name, vc.__version__]
    return result.verified


def main(base_url: str) -> tuple[list[object], list[object]]:
    return anyio.run(async_user, base_url), sync_user(base_url)
