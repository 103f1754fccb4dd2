"""Section 6: what the default PollPolicy costs in polls and in waiting.

No real waiting: for owners whose answer times follow a lognormal spread
(median 30 s, a few seconds to several minutes), replay the poll schedule of
``PollPolicy.delay`` and count the polls made up to the one that sees the
answer (what the service bills) and the time from the answer to that poll
(what the user feels). Request times are ignored (an instant service).
"""

from __future__ import annotations

import math
import random
import statistics

from verif_client import PollPolicy

from .common import Report, Settings

MEDIAN_ANSWER_S = 30.0
SIGMA = 1.0  # 90% of answers between ~6 s and ~2.6 min

POLICIES = {
    "default PollPolicy()": PollPolicy(),
    "fixed 1 s": PollPolicy(initial_delay=1, multiplier=1, max_delay=1, jitter=0),
    "fixed 5 s": PollPolicy(initial_delay=5, multiplier=1, max_delay=5, jitter=0),
    "fixed 15 s": PollPolicy(initial_delay=15, multiplier=1, max_delay=15, jitter=0),
}


def simulate(policy: PollPolicy, answers: list[float], seed: int = 1) -> dict[str, float]:
    rng = random.Random(seed)
    polls, delays, timed_out = [], [], 0
    for answer in answers:
        now, n = 0.0, 0
        while True:
            n += 1
            now = min(now + policy.delay(n, rng), policy.timeout)
            if now >= answer:
                polls.append(n)
                delays.append(now - answer)
                break
            if now >= policy.timeout:
                polls.append(n)
                timed_out += 1
                break
    delays.sort()
    return {
        "mean_polls": statistics.fmean(polls),
        "mean_detection_delay_s": statistics.fmean(delays),
        "p95_detection_delay_s": delays[int(0.95 * (len(delays) - 1))],
        "timed_out": timed_out,
    }


def run(report: Report, settings: Settings) -> None:
    rng = random.Random(7)
    count = settings.scaled(100_000, 2_000)
    answers = [rng.lognormvariate(math.log(MEDIAN_ANSWER_S), SIGMA) for _ in range(count)]
    figures = {name: simulate(policy, answers) for name, policy in POLICIES.items()}
    report.figures["economy"] = figures
    report.table(
        "6. Polling economy: polls per id and answer-to-detection delay",
        ["policy", "mean polls / id", "mean delay to detection", "p95 delay", "timed out"],
        [
            [
                name,
                f"{f['mean_polls']:.1f}",
                f"{f['mean_detection_delay_s']:.2f} s",
                f"{f['p95_detection_delay_s']:.2f} s",
                f"{f['timed_out']}",
            ]
            for name, f in figures.items()
        ],
        f"{count:,} simulated owners, answer times lognormal (median {MEDIAN_ANSWER_S:.0f} s, "
        f"sigma {SIGMA}); schedule replayed with `PollPolicy.delay(n, rng)`.",
    )
