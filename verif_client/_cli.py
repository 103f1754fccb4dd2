"""The ``verif-client`` command."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, get_args

import anyio
import attrs

from . import _xsd
from ._bulk import BulkOptions, load_input, run_bulk, write_output
from ._client import VerificationClient
from ._errors import VerifClientError
from ._journal import FINAL_STATES, Journal, JournalError, open_journal
from ._operations import OPERATIONS, get_operation
from ._polling import FalseMeans, PollPolicy
from ._progress import ProgressDisplay
from ._service import Binding

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


_JOURNAL_HELP = "a SQLite file, or postgresql://user@host/db?job=NAME shared by many workers"


class UsageError(Exception):
    """A command-line mistake: reported in one line, exit status 2."""


def parse_duration(text: str) -> float:
    """``60``, ``90s``, ``10m`` or ``1h`` in seconds."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 60, 90s, 10m, 1h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def _connection_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("service (flags or VERIF_* environment variables)")
    group.add_argument("--base-url", default=os.environ.get("VERIF_BASE_URL"))
    group.add_argument("--username", default=os.environ.get("VERIF_API_USERNAME"))
    group.add_argument(
        "--binding",
        choices=[binding.value for binding in Binding],
        default=os.environ.get("VERIF_BINDING", Binding.SOAP11.value),
    )
    group.add_argument("--timeout", type=_positive_float, default=30.0)
    group.add_argument(
        "--rate", type=_positive_float, default=None, help="requests per second, all calls"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verif-client",
        description="Client and simulator for the GIACT VerificationServices v5 SecureLink "
        "operations. The password is read from VERIF_API_PASSWORD, never from a flag.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    call = commands.add_parser("call", help="call one operation and print its result as JSON")
    call.add_argument("operation", help=", ".join(op.name for op in OPERATIONS))
    call.add_argument("params", nargs="*", metavar="Name=value")
    _connection_args(call)

    # Imported here, not at the top: importing the CLI must not import the simulator.
    from .simulator import _main as simulator_main

    simulate = commands.add_parser(
        "simulate", help="serve the simulator on a port", description=simulator_main.DESCRIPTION
    )
    simulator_main.add_arguments(simulate)

    bulk = commands.add_parser("bulk", help="bulk verification jobs").add_subparsers(
        dest="bulk_command", required=True
    )
    run = bulk.add_parser("run", help="send, poll and record a CSV of phone numbers")
    run.add_argument("--input", help="CSV with phone_number[,question][,id]")
    run.add_argument("--question", help="the yes/no question, unless the row has its own")
    run.add_argument("--journal", required=True, help=_JOURNAL_HELP + " (created if missing)")
    run.add_argument("--output", required=True, help="JSON lines, one per input row")
    run.add_argument("--location", action="store_true", help="also wait for each location")
    run.add_argument("--concurrency", type=_positive_int, default=50)
    run.add_argument("--deadline", type=parse_duration, default=600.0)
    run.add_argument(
        "--false-means",
        choices=get_args(FalseMeans),
        default="auto",
        help="what a Verified false is: auto (final once the service has answered nil, "
        "else pending; the default), pending (ask again) or final (declined)",
    )
    run.add_argument(
        "--resend-unknown",
        action="store_true",
        help="send again the rows whose SMS may or may not have left in a killed run",
    )
    _connection_args(run)

    status = bulk.add_parser("status", help="counts of a journal's rows by state")
    status.add_argument("--journal", required=True, help=_JOURNAL_HELP)

    export = bulk.add_parser(
        "export", help="write the finished rows of a journal, one JSON line each"
    )
    export.add_argument("--journal", required=True, help=_JOURNAL_HELP)
    export.add_argument("--output", required=True, help="JSON lines, one per finished row")

    demo = commands.add_parser("demo", help="a bulk job against the in-process simulator")
    demo.add_argument("--rows", type=_positive_int, default=1000)
    demo.add_argument("--keep", metavar="DIR", help="keep the journal and output in DIR")
    return parser


def _client(args: argparse.Namespace, journal: Journal | None = None) -> VerificationClient:
    """The client the flags describe; with a journal, ``--rate`` is the whole
    job's, shared by every worker of the job."""
    if not args.base_url:
        raise UsageError("no service address: give --base-url or set VERIF_BASE_URL")
    password = os.environ.get("VERIF_API_PASSWORD")
    binding = Binding(args.binding)
    if binding.is_soap and (not args.username or password is None):
        raise UsageError(
            "SOAP bindings need credentials: --username (or VERIF_API_USERNAME) "
            "and VERIF_API_PASSWORD"
        )
    return VerificationClient(
        args.base_url,
        username=args.username,
        password=password,
        binding=binding,
        timeout=args.timeout,
        rate_limit=args.rate if journal is None else None,
        rate_limiter=journal.rate_limiter(args.rate) if journal is not None and args.rate else None,
    )


def _parse_params(operation: str, pairs: Sequence[str]) -> dict[str, object]:
    op = get_operation(operation)
    types = {param.name.lower(): param for param in op.params}
    params: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        param = types.get(name.lower())
        if not sep or param is None:
            expected = ", ".join(f"{p.name}=..." for p in op.params) or "no parameters"
            raise UsageError(f"{pair!r}: {op.name} takes {expected}")
        try:
            params[param.name] = text if param.type is _xsd.STRING else param.type.parse(text)
        except _xsd.LexicalError as exc:
            raise UsageError(f"{param.name}: {exc}") from None
    return params


def to_json(value: object) -> Any:
    if attrs.has(type(value)):
        return attrs.asdict(value)  # type: ignore[arg-type]
    return value


async def _call(args: argparse.Namespace) -> int:
    params = _parse_params(args.operation, args.params)
    async with _client(args) as client:
        result = await client.call_with(args.operation, params)
    print(json.dumps(to_json(result), ensure_ascii=False))
    return 0


async def _bulk_run(args: argparse.Namespace) -> int:
    journal = open_journal(args.journal)
    try:
        options = BulkOptions(
            question=args.question,
            location=args.location,
            concurrency=args.concurrency,
            deadline=args.deadline,
            resend_unknown=args.resend_unknown,
            policy=PollPolicy(false_means=args.false_means),
        )
        client = _client(args, journal)
        if args.input:
            data = await anyio.Path(args.input).read_bytes()
            load_input(journal, data, options, client.binding)
        elif not journal.is_loaded():
            raise UsageError("a new journal needs --input")
        display = ProgressDisplay()
        async with client:
            counts = await run_bulk(client, journal, args.output, options, display)
        display.close()
    finally:
        journal.close()
    print_counts(counts)
    return 0


def print_counts(counts: dict[str, int]) -> None:
    width = max(len(state) for state in counts)
    for state, count in counts.items():
        if count or state in FINAL_STATES:
            print(f"{state:<{width}}  {count:>8}")
    print(f"{'total':<{width}}  {sum(counts.values()):>8}")


def _bulk_status(args: argparse.Namespace) -> int:
    journal = open_journal(args.journal, create=False)
    try:
        print_counts(journal.counts())
    finally:
        journal.close()
    return 0


def _bulk_export(args: argparse.Namespace) -> int:
    journal = open_journal(args.journal, create=False)
    try:
        write_output(journal, args.output)
        counts = journal.counts()
    finally:
        journal.close()
    finished = sum(counts[state] for state in FINAL_STATES)
    print(f"{finished} of {sum(counts.values())} rows finished, written to {args.output}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from .simulator import _main as simulator_main

    simulator = simulator_main.simulator_from_args(args)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(simulator_main.run, simulator, args.host, args.port)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "call":
            return anyio.run(_call, args)
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "demo":
            from ._demo import run_demo

            return run_demo(rows=args.rows, keep=args.keep)
        if args.bulk_command == "run":
            return anyio.run(_bulk_run, args)
        if args.bulk_command == "export":
            return _bulk_export(args)
        return _bulk_status(args)
    except UsageError as exc:
        print(f"verif-client: {exc}", file=sys.stderr)
        return 2
    except (VerifClientError, JournalError, OSError) as exc:
        print(f"verif-client: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("verif-client: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
