"""The acceptance flow in a real headless Chromium: a client sends SMS to the
simulator on loopback, a person answers on the phone pages, the client's
waits see the answers."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import attrs
from anyio.from_thread import BlockingPortal
from playwright.sync_api import Browser, Page, expect

import verif_client as vc
from verif_client.simulator import Server, Simulator

NUMBER = "5551234567"
SCREENSHOT = Path(__file__).parents[2] / "docs" / "phone.png"
FAST = vc.PollPolicy(initial_delay=0.05, multiplier=1.0, max_delay=0.05, jitter=0.0, timeout=20)
SHORT = vc.PollPolicy(initial_delay=0.05, multiplier=1.0, max_delay=0.05, jitter=0.0, timeout=1)
HOSTILE = "Pay <script>window.__pwned=1</script> \"ACME\" & 'co' \N{CREDIT CARD}?"


def _send(portal: BlockingPortal, client: vc.VerificationClient, question: str) -> int:
    sent = portal.call(client.send_confirmation_sms, NUMBER, question)
    assert sent.ok, sent
    return sent.request_id


def test_answer_yes_share_a_place_then_no_then_revoke(
    page: Page,
    server: Server,
    simulator: Simulator,
    portal: BlockingPortal,
    client: vc.VerificationClient,
) -> None:
    page.goto(f"{server.base_url}/phone/")
    expect(page.get_by_text("No SMS yet.")).to_be_visible()

    request_id = _send(portal, client, "Did you ask to pay $25 to ACME & Co.?")
    # The client waits while the person answers, as a product's worker would.
    verified = portal.start_task_soon(
        functools.partial(client.wait_until_verified, request_id, policy=FAST)
    )
    located = portal.start_task_soon(
        functools.partial(client.wait_for_location, request_id, policy=FAST)
    )

    # The live update shows the new SMS without a reload.
    sms = page.locator(f'li[data-request-id="{request_id}"]')
    expect(sms).to_be_visible(timeout=10_000)
    expect(sms.locator(".state")).to_have_text("pending")
    sms.get_by_role("link", name="Open the SMS link").click()
    expect(page).to_have_url(re.compile(rf"/phone/link/{request_id}$"))
    expect(page.locator("#question")).to_have_text("Did you ask to pay $25 to ACME & Co.?")
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    page.get_by_role("button", name="Yes", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("You answered Yes.")
    expect(page.locator(".state")).to_have_text("confirmed")
    page.get_by_label("A place").select_option("new-york")
    page.get_by_role("button", name="Share my location").click()
    expect(page.get_by_role("status")).to_have_text("Location shared.")

    verification = verified.result(timeout=30)
    assert verification.status is vc.PollStatus.VERIFIED
    assert verification.result is not None
    assert verification.result.verified is True
    location = located.result(timeout=30)
    assert location.status is vc.PollStatus.LOCATED
    assert location.result is not None
    assert location.result.location is not None
    assert location.result.location.city == "New York"
    assert location.result.location.latitude == 40.758

    # A second SMS answered No: Verified false. This client has already seen this
    # service say nil for "not yet", so under the default (false_means="auto") the
    # false is an answer: DECLINED, never VERIFIED; "pending" would keep polling.
    declined_id = _send(portal, client, "Did you ask to move $900 to account 42?")
    page.goto(f"{server.base_url}/phone/{NUMBER}/")
    page.locator(f'li[data-request-id="{declined_id}"]').get_by_role(
        "link", name="Open the SMS link"
    ).click()
    page.get_by_role("button", name="No", exact=True).click()
    expect(page.locator(".state")).to_have_text("declined")
    assert portal.call(client.has_been_verified, declined_id).verified is False
    declined = portal.call(functools.partial(client.wait_until_verified, declined_id, policy=SHORT))
    assert declined.status is vc.PollStatus.DECLINED
    assert declined.result is not None
    assert declined.result.verified is False
    pending = attrs.evolve(SHORT, false_means="pending")
    waited = portal.call(functools.partial(client.wait_until_verified, declined_id, policy=pending))
    assert waited.status is vc.PollStatus.TIMED_OUT
    final = vc.PollPolicy(initial_delay=0.05, jitter=0.0, timeout=5, false_means="final")
    strict = portal.call(functools.partial(client.wait_until_verified, declined_id, policy=final))
    assert strict.status is vc.PollStatus.DECLINED

    # Typed coordinates reach MobileLocation_GetResult.
    page.get_by_label("Latitude").fill("-33.8688")
    page.get_by_label("Longitude").fill("151.2093")
    page.get_by_role("button", name="Share my location").click()
    expect(page.get_by_role("status")).to_have_text("Location shared.")
    typed = portal.call(client.get_mobile_location, declined_id).location
    assert typed is not None
    assert (typed.latitude, typed.longitude) == (-33.8688, 151.2093)

    # The inbox shows both, newest first, with their states.
    page.goto(f"{server.base_url}/phone/")
    states = page.locator("li.sms .state").all_text_contents()
    assert states == ["declined", "confirmed"]

    # Consent: revoke on the page, and RevokeMobileConsent finds nothing left to revoke.
    page.goto(f"{server.base_url}/phone/{NUMBER}/consent")
    expect(page.locator(".consent-text")).to_have_text(simulator.consent_text)
    page.get_by_role("button", name="Revoke consent").click()
    expect(page.locator(".consent-state")).to_have_text("not recorded")
    assert portal.call(client.revoke_mobile_consent, NUMBER) is False
    page.get_by_role("button", name="I agree: record consent").click()
    expect(page.locator(".consent-state")).to_have_text("recorded")
    assert portal.call(client.revoke_mobile_consent, NUMBER) is True
    assert not simulator.has_consent(NUMBER)


def test_a_hostile_question_is_text_never_script(
    page: Page, server: Server, portal: BlockingPortal, client: vc.VerificationClient
) -> None:
    request_id = _send(portal, client, HOSTILE)
    for path in ("/phone/", f"/phone/{NUMBER}/", f"/phone/link/{request_id}"):
        page.goto(server.base_url + path)
        question = page.locator(".question").first
        expect(question).to_have_text(HOSTILE)
        assert question.locator("script").count() == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"
    # The live update re-renders the inbox from the server: still text.
    page.goto(f"{server.base_url}/phone/")
    _send(portal, client, HOSTILE)
    expect(page.locator("li.sms")).to_have_count(2, timeout=10_000)
    expect(page.locator("li.sms .question")).to_have_text([HOSTILE, HOSTILE])
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_the_pages_work_without_javascript(
    browser: Browser,
    server: Server,
    simulator: Simulator,
    portal: BlockingPortal,
    client: vc.VerificationClient,
) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        request_id = _send(portal, client, "Pay $5?")
        page.goto(f"{server.base_url}/phone/link/{request_id}")
        page.get_by_role("button", name="Yes", exact=True).click()
        expect(page.locator(".state")).to_have_text("confirmed")
        page.get_by_label("A place").select_option("paris")
        page.get_by_role("button", name="Share my location").click()
        expect(page.locator(".shared")).to_contain_text("Paris")
        assert portal.call(client.has_been_verified, request_id).verified is True
    finally:
        context.close()


def test_every_control_has_a_label(
    page: Page, server: Server, portal: BlockingPortal, client: vc.VerificationClient
) -> None:
    request_id = _send(portal, client, "Pay $5?")
    for path in (f"/phone/link/{request_id}", f"/phone/{NUMBER}/consent"):
        page.goto(server.base_url + path)
        unlabelled = page.evaluate(
            """() => [...document.querySelectorAll('input, select, button')]
                 .filter(el => !(el.labels && el.labels.length) && !el.textContent.trim())
                 .map(el => el.outerHTML)"""
        )
        assert unlabelled == []


def test_a_rebound_name_gets_nothing_in_a_real_browser(
    rebound_browser: Browser,
    server: Server,
    simulator: Simulator,
    portal: BlockingPortal,
    client: vc.VerificationClient,
) -> None:
    # DNS rebinding as Chromium sees it: attacker.test resolves to the simulator's
    # address, so its pages are "same-origin" with the inbox; only Host tells.
    request_id = _send(portal, client, "Pay $25 to ACME?")
    page = rebound_browser.new_page()
    attacker = f"http://attacker.test:{server.port}"
    for path in ("/phone/", "/phone/inbox.json", f"/phone/link/{request_id}"):
        response = page.goto(attacker + path)
        assert response is not None
        assert response.status == 403, path
        assert NUMBER not in page.content()
        assert "Pay $25" not in page.content()
    # Its own script posting "Yes", as a same-origin fetch now is.
    status = page.evaluate(
        """async (path) => (await fetch(path, {method: 'POST',
             headers: {'Content-Type': 'application/x-www-form-urlencoded'},
             body: 'answer=yes'})).status""",
        f"/phone/link/{request_id}/answer",
    )
    assert status == 403
    # The simulator's own address still serves the same browser.
    own = page.goto(f"{server.base_url}/phone/")
    assert own is not None
    assert own.status == 200
    assert NUMBER in page.content()
    assert simulator.secure_link(request_id).verification == "pending"
