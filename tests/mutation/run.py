"""Mutation testing of the modules where a silent break hurts people (``nox -s mutate``).

Each module is mutated by mutmut in a scratch copy of the project of its own
(``.mutate/<module>/``: mutmut's ``mutants/`` tree and its cache live there),
against only the test files that exercise it (``PLAN``), so that a run stays
affordable on two shared cores. mutmut traces which of those tests reach each
function and runs only those for the function's mutants.

    python tests/mutation/run.py                 # every module in PLAN
    python tests/mutation/run.py scrub ratelimit # some of them
    python tests/mutation/run.py --fresh scrub   # forget the cached results first

It prints one line per module (killed, survived, no test, timeout, score) and
the survivors' names; ``mutmut show <name>`` in the module's directory shows
one. Survivors are killed with a behaviour test or justified, one by one, in
tests/mutation/survivors.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / ".mutate"

# The in-process tests of bulk jobs (the Temporal ones need a server and take minutes).
BULK_TESTS: tuple[str, ...] = (
    "tests/test_journal.py",
    "tests/test_bulk_api.py",
    "tests/test_bulk_states.py",
    "tests/test_bulk_runner.py",
    "tests/test_poll_dialects.py::test_bulk_run_on_the_bool_shape_gives_verified_rows",
    "tests/test_poll_dialects.py::test_bulk_run_on_the_nil_shape_with_a_decline_gives_declined",
)

# Module -> the file mutated and the pytest arguments that select the tests exercising it.
# Subprocess tests (the CLI) are left out: mutmut sees only what runs in its own process.
PLAN: dict[str, tuple[str, tuple[str, ...]]] = {
    "scrub": (
        "verif_client/_scrub.py",
        (
            "tests/test_scrub.py",
            "tests/test_reliability_secrets.py",
            "tests/test_secrets_echoed.py",
            "-k",
            "not cli and not bulk_run",
        ),
    ),
    "ratelimit": ("verif_client/_ratelimit.py", ("tests/test_rate_limit.py",)),
    "clock": ("verif_client/_clock.py", ("tests/test_clock.py", "tests/test_poll_cancel.py")),
    "retry": (
        "verif_client/_retry.py",
        ("tests/test_retry_policy.py", "tests/test_client_failures.py", "tests/test_public_api.py"),
    ),
    "pollpolicy": (
        "verif_client/_pollpolicy.py",
        (
            "tests/test_retry_policy.py",
            "tests/test_poll_deadline.py",
            "tests/test_poll_dialects.py",
            "tests/test_public_api.py",
            "-k",
            "not cli",
        ),
    ),
    "inflate": (
        "verif_client/_inflate.py",
        ("tests/test_inflate.py", "tests/test_reliability_hostile.py"),
    ),
    "xml": (
        "verif_client/_xml.py",
        (
            "tests/test_xml_parser.py",
            "tests/test_hostile_xml.py",
            "tests/test_parser_opens_nothing.py",
            "tests/test_decode.py",
            "tests/test_encode_golden.py",
            "tests/test_simulator_wire.py",
            "tests/test_control_characters.py",
            "tests/test_input_validation.py::test_tab_cr_lf_and_astral_characters_are_allowed",
        ),
    ),
    "codec": (
        "verif_client/_codec.py",
        (
            "tests/test_answer_errors.py",
            "tests/test_repeated_elements.py",
            "tests/test_xml_parser.py",
            "tests/test_decode.py",
            "tests/test_input_validation.py",
            "tests/test_errors.py",
        ),
    ),
    "soap": (
        "verif_client/_soap.py",
        (
            "tests/test_answer_errors.py",
            "tests/test_soap_requests.py",
            "tests/test_repeated_elements.py",
            "tests/test_decode.py",
            "tests/test_encode_golden.py",
        ),
    ),
    "pool": (
        "verif_client/_transport/_pool.py",
        (
            "tests/test_transport_layer.py",
            "tests/test_transport_bad_peers.py",
            "tests/test_reliability_tls.py",
            "tests/test_transport_receiver.py",
            "tests/test_client_loops.py",
            "tests/test_client_cert.py",
            "tests/test_retry_after.py",
            "tests/test_transport_handshake.py",
            "tests/test_transport_partial_writes.py",
            "tests/test_proxy.py",
            "tests/test_base_url.py",
            "tests/test_pool_opening.py",
            "tests/test_poll_at_once.py",
        ),
    ),
    "parse": (
        "verif_client/_transport/_parse.py",
        (
            "tests/test_transport_parsers.py",
            "tests/test_transport_bad_peers.py",
            "tests/test_transport_layer.py",
            "tests/test_reliability_tls.py",
        ),
    ),
    # The poller; its polls made at once are compared with awaited ones (test_poll_at_once).
    "polling": (
        "verif_client/_polling.py",
        (
            "tests/test_poll_at_once.py",
            "tests/test_polling.py",
            "tests/test_poll_deadline.py",
            "tests/test_poll_intake.py",
            "tests/test_poll_dialects.py",
            "-k",
            "not cli and not bulk_run",
        ),
    ),
    "deadlines": (
        "verif_client/_transport/_deadlines.py",
        (
            "tests/test_transport_deadlines.py",
            "tests/test_transport_bad_peers.py",
            "tests/test_client_loops.py",
        ),
    ),
    # The bulk job's row states: which state a row goes to (and from), at a crash, a resume,
    # a failed send, an answer; the CLI's own tests run in subprocesses, out of mutmut's sight.
    "journal": ("verif_client/bulk/_sqlite.py", BULK_TESTS),
    "outcomes": ("verif_client/bulk/_outcomes.py", BULK_TESTS),
    "job": ("verif_client/bulk/_job.py", BULK_TESTS),
    "runner": ("verif_client/bulk/_runner.py", BULK_TESTS),
}

STATUSES = ("killed", "survived", "no tests", "timeout", "suspicious", "skipped", "segfault")


def prepare(name: str, fresh: bool) -> Path:
    """The module's scratch copy of the project: sources and tests refreshed, cache kept."""
    target, tests = PLAN[name]
    home = SCRATCH / name
    if fresh and home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    for folder in ("verif_client", "tests"):
        shutil.rmtree(home / folder, ignore_errors=True)
        shutil.copytree(
            ROOT / folder, home / folder, ignore=shutil.ignore_patterns("__pycache__", "mutation")
        )
    shutil.copy2(ROOT / "pyproject.toml", home / "pyproject.toml")
    lines = "\n    ".join(tests)
    (home / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = verif_client\n"
        f"only_mutate = {target}\n"
        f"pytest_add_cli_args_test_selection =\n    {lines}\n"
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n"
    )
    return home


def results(home: Path) -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=home,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_status: dict[str, list[str]] = {status: [] for status in STATUSES}
    for line in out.splitlines():
        mutant, _, status = line.strip().rpartition(": ")
        if mutant:
            by_status.setdefault(status, []).append(mutant)
    return by_status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="module", help=", ".join(PLAN))
    parser.add_argument("--fresh", action="store_true", help="forget cached results")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    options = parser.parse_args()
    unknown = sorted(set(options.modules) - set(PLAN))
    if unknown:
        parser.error(f"unknown modules {unknown}: choose from {', '.join(PLAN)}")
    summary = {}
    for name in options.modules or list(PLAN):
        cached = (SCRATCH / name / "mutants").exists() and not options.fresh
        home = prepare(name, options.fresh)
        started = time.monotonic()
        run = [sys.executable, "-m", "mutmut", "run", "--max-children", str(options.jobs)]
        done = subprocess.run(run, cwd=home, check=False)
        survivors = results(home)["survived"]
        if cached and survivors and done.returncode == 0:
            # mutmut keeps a cached verdict: try the survivors against today's tests.
            done = subprocess.run([*run, *survivors], cwd=home, check=False)
        seconds = time.monotonic() - started
        by_status = results(home)
        killed = len(by_status["killed"]) + len(by_status["timeout"])
        total = sum(len(names) for names in by_status.values())
        summary[name] = {
            "mutants": total,
            "killed": killed,
            "survived": by_status["survived"],
            "no_tests": by_status["no tests"],
            "score": round(100 * killed / total, 1) if total else None,
            "seconds": round(seconds),
            "mutmut_exit": done.returncode,
        }
    print("\nmodule       mutants  killed  survived  no-tests  score   time")
    for name, row in summary.items():
        print(
            f"{name:<12} {row['mutants']:>7} {row['killed']:>7} {len(row['survived']):>9}"
            f" {len(row['no_tests']):>9} {row['score']!s:>6}% {row['seconds']:>5}s"
        )
    for name, row in summary.items():
        for mutant in row["survived"] + row["no_tests"]:
            print(f"  {name}: {mutant}")
    (SCRATCH / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0 if all(row["mutmut_exit"] == 0 for row in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
