"""The HTML of the simulator's phone pages: string templates, nothing else.

Every value that came from a client (question, phone number) or from the
simulator's configuration (consent text, place names) goes through ``_e``
(``html.escape`` with quotes) before it touches markup; templates only ever
interpolate escaped text or other rendered fragments.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from .._results import Location

STATE_LABELS: Final = {
    "pending": "pending",
    "confirmed": "confirmed",
    "declined": "declined",
    "expired": "expired",
}


@attrs.frozen(slots=True)
class Message:
    """One SMS as the pages show it."""

    request_id: int
    phone_number: str
    question: str
    sent_at: float  # Unix time
    state: str  # pending / confirmed / declined / expired
    location_state: str  # pending / shared / denied
    location: Location | None


@attrs.frozen(slots=True)
class Place:
    key: str
    label: str
    location: Location


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(timestamp: float) -> tuple[str, str]:
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return moment.isoformat(timespec="seconds"), moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def page(title: str, body: str, *, live: bool = False, back: str = "") -> str:
    script = '\n<script src="/phone/live.js" defer></script>' if live else ""
    nav = f'<nav><a href="/phone/">All numbers</a>{back}</nav>'
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)} · simulator phone</title>
<link rel="stylesheet" href="/phone/style.css">{script}
</head>
<body>
<header>{nav}<h1>{_e(title)}</h1></header>
<main>
{body}
</main>
<footer><p>Pages of the verif_client simulator, standing in for the phone that got the SMS.</p>
</footer>
</body>
</html>
"""


def _message_item(message: Message, *, show_number: bool) -> str:
    iso, shown = _when(message.sent_at)
    number = (
        f'<p class="to">To <a href="/phone/{_e(message.phone_number)}/">'
        f"{_e(message.phone_number)}</a></p>"
        if show_number
        else ""
    )
    return f"""<li class="sms state-{_e(message.state)}" data-request-id="{message.request_id}">
<p class="question">{_e(message.question)}</p>
{number}<p class="meta"><time datetime="{_e(iso)}">{_e(shown)}</time>
· request <code>{message.request_id}</code>
· <span class="state">{_e(STATE_LABELS.get(message.state, message.state))}</span></p>
<p><a class="open" href="/phone/link/{message.request_id}">Open the SMS link</a></p>
</li>"""


def inbox(
    title: str,
    messages: Sequence[Message],
    version: str,
    feed: str,
    *,
    show_number: bool,
    intro: str = "",
    back: str = "",
) -> str:
    items = "\n".join(_message_item(m, show_number=show_number) for m in messages)
    listing = f'<ol class="inbox">{items}</ol>' if messages else "<p>No SMS yet.</p>"
    # The intro sits inside #inbox so the live update refreshes it too (new numbers).
    body = f"""<section id="inbox" aria-live="polite" data-version="{_e(version)}"
 data-feed="{_e(feed)}">
{intro}<h2>Messages, newest first</h2>
{listing}
</section>"""
    return page(title, body, live=True, back=back)


def numbers_list(numbers: Iterable[str]) -> str:
    items = "".join(
        f'<li><a href="/phone/{_e(n)}/">{_e(n)}</a> '
        f'(<a href="/phone/{_e(n)}/consent">consent</a>)</li>'
        for n in numbers
    )
    if not items:
        return ""
    return f'<section><h2>Numbers</h2><ul class="numbers">{items}</ul></section>\n'


def number_intro(number: str, consent: bool) -> str:
    state = "recorded" if consent else "not recorded (revoked)"
    return (
        f"<p>Consent for this number: <strong>{_e(state)}</strong> · "
        f'<a href="/phone/{_e(number)}/consent">Consent page</a></p>\n'
    )


def _location_text(location: Location) -> str:
    place = ", ".join(
        str(part) for part in (location.address, location.city, location.country) if part
    )
    coords = f"{location.latitude}, {location.longitude}"
    return f"{place} ({coords})" if place else coords


def link_page(message: Message, places: Sequence[Place], *, notice: str = "") -> str:
    iso, shown = _when(message.sent_at)
    note = f'<p class="notice" role="status">{_e(notice)}</p>\n' if notice else ""
    base = f"/phone/link/{message.request_id}"
    if message.state == "pending":
        answer = f"""<form method="post" action="{base}/answer" class="answer">
<fieldset><legend>Your answer</legend>
<button type="submit" name="answer" value="yes" id="answer-yes">Yes</button>
<button type="submit" name="answer" value="no" id="answer-no">No</button>
</fieldset></form>"""
    elif message.state == "expired":
        answer = "<p><strong>This link has expired.</strong> It can no longer be answered.</p>"
    else:
        answer = (
            f'<p>You answered: <strong class="answered">'
            f"{'Yes' if message.state == 'confirmed' else 'No'}</strong></p>"
        )
    if message.location_state == "shared" and message.location is not None:
        location = (
            f'<p>Location shared: <strong class="shared">'
            f"{_e(_location_text(message.location))}</strong></p>"
        )
    elif message.location_state == "denied":
        location = "<p>You chose not to share your location.</p>"
    elif message.state == "expired":
        location = ""
    else:
        options = "\n".join(f'<option value="{_e(p.key)}">{_e(p.label)}</option>' for p in places)
        location = f"""<form method="post" action="{base}/location" class="location">
<fieldset><legend>Share my location</legend>
<p><label for="place">A place</label>
<select id="place" name="place">
<option value="">Typed below</option>
{options}
</select></p>
<p><label for="latitude">Latitude</label>
<input id="latitude" name="latitude" inputmode="decimal" autocomplete="off"></p>
<p><label for="longitude">Longitude</label>
<input id="longitude" name="longitude" inputmode="decimal" autocomplete="off"></p>
<p><button type="submit" name="share" value="yes" id="share">Share my location</button>
<button type="submit" name="share" value="no" id="deny">Don't share</button></p>
</fieldset></form>"""
    body = f"""{note}<article class="sms state-{_e(message.state)}">
<p class="from">SMS to {_e(message.phone_number)}, sent
<time datetime="{_e(iso)}">{_e(shown)}</time>, request <code>{message.request_id}</code></p>
<h2 class="question" id="question">{_e(message.question)}</h2>
<p>State: <span class="state">{_e(STATE_LABELS.get(message.state, message.state))}</span></p>
{answer}
</article>
<section class="location-section"><h2>Location</h2>
{location}
</section>"""
    back = (
        f' · <a href="/phone/{_e(message.phone_number)}/">Inbox of {_e(message.phone_number)}</a>'
    )
    return page("SecureLink", body, back=back)


def consent_page(number: str, consent: bool, text: str, *, notice: str = "") -> str:
    note = f'<p class="notice" role="status">{_e(notice)}</p>\n' if notice else ""
    state = "recorded" if consent else "not recorded"
    body = f"""{note}<p>Consent of <strong>{_e(number)}</strong>:
<strong class="consent-state">{_e(state)}</strong></p>
<blockquote class="consent-text">{_e(text)}</blockquote>
<form method="post" action="/phone/{_e(number)}/consent">
<fieldset><legend>Consent</legend>
<button type="submit" name="consent" value="record" id="record">I agree: record consent</button>
<button type="submit" name="consent" value="revoke" id="revoke">Revoke consent</button>
</fieldset></form>"""
    back = f' · <a href="/phone/{_e(number)}/">Inbox of {_e(number)}</a>'
    return page(f"Consent of {number}", body, back=back)


def error_page(status: int, message: str) -> str:
    return page(f"Error {status}", f"<p>{_e(message)}</p>")


# Kept out of the HTML so the pages' Content-Security-Policy can forbid
# inline script: even a question that slipped past escaping could not run.
LIVE_JS: Final = """\
"use strict";
(function () {
  var inbox = document.getElementById("inbox");
  if (!inbox || !window.fetch || !window.DOMParser) { return; }
  async function tick() {
    try {
      var feed = await fetch(inbox.dataset.feed, {cache: "no-store"});
      var data = await feed.json();
      if (data.version !== inbox.dataset.version) {
        var page = await fetch(location.href, {cache: "no-store"});
        var doc = new DOMParser().parseFromString(await page.text(), "text/html");
        var fresh = doc.getElementById("inbox");
        if (fresh) { inbox.replaceWith(fresh); inbox = fresh; }
      }
    } catch (e) { /* the simulator stopped; try again later */ }
    setTimeout(tick, 1000);
  }
  setTimeout(tick, 1000);
})();
"""

STYLE_CSS: Final = """\
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 40rem; padding: 1rem;
  line-height: 1.4; }
nav a { margin-right: .5rem; }
h1 { font-size: 1.4rem; }
h2 { font-size: 1.15rem; }
.inbox { list-style: none; padding: 0; }
.sms { border: 1px solid #999; border-radius: .5rem; padding: .5rem .75rem; margin: .5rem 0;
  overflow-wrap: anywhere; }
.question { font-weight: 600; white-space: pre-wrap; }
.meta, .from { color: #333; font-size: .9rem; }
.state-pending .state { color: #8a5a00; }
.state-confirmed .state { color: #0a6b0a; }
.state-declined .state, .state-expired .state { color: #a01010; }
button { font-size: 1.1rem; padding: .5rem 1.25rem; margin: .25rem .5rem .25rem 0; }
input, select { font-size: 1rem; padding: .25rem; max-width: 100%; }
label { display: block; }
.notice { background: #eef; padding: .5rem; }
blockquote { border-left: 4px solid #999; margin: 0; padding-left: .75rem; }
"""
