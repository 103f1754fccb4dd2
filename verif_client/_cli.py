"""The ``verif-client`` command."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import pathlib
import re
import shlex
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn, TypeAlias, get_args

import anyio
import attrs

from . import __version__, _prometheus, _xsd
from ._argtypes import POSITIVE, POSITIVE_COUNT, YES_NO
from ._client import VerificationClient
from ._codec import Codec
from ._counts import print_counts
from ._errors import RequestValidationError, VerifClientError
from ._hooks import Hooks
from ._operations import OPERATIONS, Operation
from ._pollpolicy import FalseMeans, PollPolicy
from ._progress import ProgressDisplay
from ._service import Binding
from ._terminal import safe, safe_json, write_or_drop
from .bulk import BulkInputError, BulkOptions, Stopper, read_input, run_job
from .bulk._job import ALL_STATES, FINAL_STATES, RowState
from .bulk._journal import JournalError
from .bulk._open import Job, check_location, is_temporal, open_job
from .bulk._runner import library_error_unwrapped

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


EXIT_SERVICE: Final = 1
EXIT_USAGE: Final = 2
EXIT_JOURNAL: Final = 3
EXIT_ROWS_FAILED: Final = 4
EXIT_INTERNAL: Final = 70

_JOURNAL_HELP = (
    "a SQLite file, or temporal://HOST:PORT/NAMESPACE?job=ID for a job shared by many "
    "workers (the temporal extra)"
)


class UsageError(Exception):
    """A command-line mistake: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {safe(message)} (see {self.prog} --help)\n")


def parse_duration(text: str) -> float:
    """``60``, ``90s``, ``10m`` or ``1h`` in seconds."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 60, 90s, 10m, 1h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _binding(text: str) -> Binding:
    try:
        return Binding(text)
    except ValueError:
        choices = ", ".join(binding.value for binding in Binding)
        raise argparse.ArgumentTypeError(f"{text!r} is not a binding ({choices})") from None


# Options that an environment variable can set: (dest, variable, parse).
_FROM_ENVIRONMENT: Final[tuple[tuple[str, str, Callable[[str], object]], ...]] = (
    ("base_url", "VERIF_BASE_URL", str),
    ("username", "VERIF_API_USERNAME", str),
    ("username_is_secret", "VERIF_USERNAME_IS_SECRET", YES_NO),
    ("binding", "VERIF_BINDING", _binding),
    ("timeout", "VERIF_TIMEOUT", POSITIVE),
    ("rate", "VERIF_RATE", POSITIVE),
    # The variable may carry the proxy's password; the flag may not (see _proxy_flag).
    ("proxy", "VERIF_PROXY", str),
    ("client_cert", "VERIF_CLIENT_CERT", str),
    ("client_key", "VERIF_CLIENT_KEY", str),
)


def _proxy_flag(text: str) -> str:
    """A proxy URL without a password: flags show in every process list."""
    userinfo = text.partition("://")[2].rpartition("@")[0]
    if ":" in userinfo:
        raise argparse.ArgumentTypeError(
            "a proxy password on the command line shows in every process list: put the "
            "URL with its password in VERIF_PROXY (or HTTPS_PROXY) instead"
        )
    return text


def _connection_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "service (each flag can be set by the VERIF_* variable named in its help; "
        "the password only by VERIF_API_PASSWORD)"
    )
    group.add_argument(
        "--base-url", help="the service's address, e.g. https://host (VERIF_BASE_URL)"
    )
    group.add_argument("--username", help="SOAP ApiUsername (VERIF_API_USERNAME)")
    group.add_argument(
        "--username-is-secret",
        action="store_const",
        const=True,
        help="treat the username as a secret too: masked as *** wherever the service's "
        "answers or errors would show it (VERIF_USERNAME_IS_SECRET=1)",
    )
    choices = ", ".join(binding.value for binding in Binding)
    group.add_argument(
        "--binding",
        type=_binding,
        metavar="{" + choices.replace(", ", ",") + "}",
        help=f"how requests are sent: {choices} (default soap11; VERIF_BINDING)",
    )
    group.add_argument(
        "--timeout",
        type=POSITIVE,
        help="seconds one HTTP attempt may take in all, connect to last byte "
        "(default 30; VERIF_TIMEOUT)",
    )
    group.add_argument(
        "--rate",
        type=POSITIVE,
        help="at most this many requests per second, all calls; for a bulk job, "
        "all of its workers together (default: no limit; VERIF_RATE)",
    )
    group.add_argument(
        "--proxy",
        type=_proxy_flag,
        metavar="URL",
        help="an http:// proxy for every request, without password (VERIF_PROXY, which may "
        "hold user:password@; default: HTTPS_PROXY, HTTP_PROXY, ALL_PROXY as NO_PROXY allows)",
    )
    group.add_argument(
        "--client-cert",
        metavar="PEM",
        help="client certificate for mutual TLS, with its key unless --client-key is given "
        "(VERIF_CLIENT_CERT; an encrypted key's password only by VERIF_CLIENT_KEY_PASSWORD)",
    )
    group.add_argument(
        "--client-key", metavar="PEM", help="the client certificate's key (VERIF_CLIENT_KEY)"
    )


def _environment_defaults(args: argparse.Namespace) -> None:
    """Fill the options not given as flags from VERIF_* variables, checked as the flags are."""
    for dest, variable, parse in _FROM_ENVIRONMENT:
        if not hasattr(args, dest) or getattr(args, dest) is not None:
            continue
        text = os.environ.get(variable)
        if text is None or text == "":
            continue
        try:
            setattr(args, dest, parse(text))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UsageError(f"{variable}: {exc}") from None
    if getattr(args, "binding", Binding.SOAP11) is None:
        args.binding = Binding.SOAP11
    if getattr(args, "timeout", 30.0) is None:
        args.timeout = 30.0
    if getattr(args, "username_is_secret", False) is None:
        args.username_is_secret = False


def _operations_help() -> str:
    lines = ["operations and their parameters (Name=value):"]
    for op in OPERATIONS:
        params = " ".join(f"{param.name}=<{param.type.name}>" for param in op.params)
        lines.append(f"  {op.name} {params}".rstrip())
        lines.append(f"      {op.doc}")
    lines += [
        "",
        "example:",
        "  verif-client call SecureLink_Confirmation_SendRequestViaSms PhoneNumber=5551234567 \\",
        "      ConfirmationQuestion='Did you ask to pay $25 to ACME?' --base-url http://127.0.0.1:8765",
    ]
    return "\n".join(lines)


# What add_subparsers returns: each command's builder adds its parser to it.
_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"


def build_parser(named: str | None = None) -> argparse.ArgumentParser:
    """The command line: each command's arguments are added by its own builder
    below. ``named``: the command the arguments name, when known; the simulator's
    flags are added only for ``simulate`` (or when it is not known)."""
    parser = _Parser(
        prog="verif-client",
        description="Client and simulator for the GIACT VerificationServices v5 SecureLink "
        "operations. The password is read from VERIF_API_PASSWORD, never from a flag. "
        "Exit status: 0 done, 1 service or network error, 2 bad usage or input, "
        "3 journal problem, 4 bulk job done with failed or unknown rows, "
        "70 a bug in verif-client, 130/143 stopped by SIGINT/SIGTERM.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log every request (DEBUG) to stderr"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    call = _add_call(commands)
    simulate = _add_simulate(commands, full=named in (None, "simulate"))
    bulk = commands.add_parser("bulk", help="bulk verification jobs").add_subparsers(
        dest="bulk_command", required=True
    )
    run = _add_bulk_run(bulk)
    status = _add_bulk_status(bulk)
    export = _add_bulk_export(bulk)
    worker = _add_worker(commands)
    demo = _add_demo(commands)
    for command in (call, simulate, run, status, export, worker, demo):
        command.set_defaults(parser=command)
        # Also after the command, where it is typed last; SUPPRESS keeps one given before.
        command.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="log every request (DEBUG) to stderr",
        )
    return parser


def _add_call(commands: _Commands) -> argparse.ArgumentParser:
    """``verif-client call``: one operation, its result as JSON."""
    call = commands.add_parser(
        "call",
        help="call one operation and print its result as JSON",
        # Raw, for the epilog's table: the description is wrapped by hand.
        description="Call one operation of the service with its parameters as Name=value\n"
        "(the names as the service spells them) and print its result as JSON.",
        epilog=_operations_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    call.add_argument("operation", help="one of the operations below (any case)")
    call.add_argument("params", nargs="*", metavar="Name=value")
    _connection_args(call)
    return call


_SIMULATE_HELP: Final = "serve the simulator on a port"


def _add_simulate(commands: _Commands, *, full: bool) -> argparse.ArgumentParser:
    """``verif-client simulate``: the simulator's own flags (``full``), or only
    its line in the list of commands: importing the simulator for its flags
    took a tenth of every other command's start (a bulk worker's among them)."""
    if not full:
        return commands.add_parser("simulate", help=_SIMULATE_HELP)
    from .simulator import _main as simulator_main

    simulate = commands.add_parser(
        "simulate", help=_SIMULATE_HELP, description=simulator_main.DESCRIPTION
    )
    simulator_main.add_arguments(simulate)
    _prometheus.add_arguments(simulate)
    return simulate


def _add_bulk_run(bulk: _Commands) -> argparse.ArgumentParser:
    """``verif-client bulk run``: a CSV sent, polled and recorded."""
    run = bulk.add_parser(
        "run",
        help="send, poll and record a CSV of phone numbers",
        description="Send one SMS per row of a CSV, wait for the answers and write one JSON "
        "line per row. The journal records every step: a killed or stopped job resumes where "
        "it was, and no number is texted twice. Ctrl-C (or SIGTERM) stops gracefully: "
        "requests in flight are recorded; press it again to stop at once.",
    )
    run.add_argument(
        "--input",
        help="CSV with a header naming phone_number, and optionally question and id; "
        "needed for a new journal",
    )
    run.add_argument("--question", help="the yes/no question, unless the row has its own")
    run.add_argument(
        "--encoding",
        help="the input's text encoding, e.g. cp1252 (default: UTF-8, with or without a BOM); "
        "rows that do not decode in it are reported invalid",
    )
    run.add_argument("--journal", required=True, help=_JOURNAL_HELP + " (created if missing)")
    run.add_argument("--output", required=True, help="JSON lines, one per input row")
    run.add_argument("--location", action="store_true", help="also wait for each location")
    run.add_argument(
        "--concurrency",
        type=POSITIVE_COUNT,
        default=50,
        help="requests in flight at once (default 50)",
    )
    run.add_argument(
        "--deadline",
        type=parse_duration,
        default=600.0,
        help="how long to wait for each answer after its SMS: 60, 90s, 10m, 1h (default 10m)",
    )
    run.add_argument(
        "--grace",
        type=parse_duration,
        default=10.0,
        help="on Ctrl-C or SIGTERM, how long requests in flight may take to finish (default 10s)",
    )
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
        help="send again the rows whose SMS may or may not have left (state unknown)",
    )
    run.add_argument(
        "--resend-failed",
        action="store_true",
        help="send again the rows the service refused (state failed, no request id)",
    )
    _connection_args(run)
    _prometheus.add_arguments(run)
    run.add_argument(
        "--metrics-linger",
        type=parse_duration,
        default=15.0,
        metavar="DURATION",
        help="with --metrics-port, keep serving the final counts this long after the job "
        "ends, for a scraper to see them; set it to your scrape interval (default 15s)",
    )
    return run


def _add_bulk_status(bulk: _Commands) -> argparse.ArgumentParser:
    """``verif-client bulk status``: a journal's counts."""
    status = bulk.add_parser(
        "status",
        help="counts of a journal's rows by state",
        description="Print how many rows of a bulk job are in each state (queued, sending, "
        "sent, verified, declined, ...), read from its journal. It only reads: it works "
        "beside a running job, and for a PostgreSQL journal counts the whole job.",
    )
    status.add_argument("--journal", required=True, help=_JOURNAL_HELP)
    return status


def _add_bulk_export(bulk: _Commands) -> argparse.ArgumentParser:
    """``verif-client bulk export``: a journal's finished rows."""
    export = bulk.add_parser(
        "export",
        help="write the finished rows of a journal, one JSON line each",
        description="Write the rows of a bulk job that have an outcome, one JSON line each "
        "(the lines bulk run writes), from its journal. It only reads: it works beside a "
        "running job, and on a job whose workers' own outputs are lost.",
    )
    export.add_argument("--journal", required=True, help=_JOURNAL_HELP)
    export.add_argument("--output", required=True, help="JSON lines, one per finished row")
    return export


def _add_worker(commands: _Commands) -> argparse.ArgumentParser:
    """``verif-client worker``: a Temporal task queue served."""
    worker = commands.add_parser(
        "worker",
        help="serve the bulk jobs of a Temporal task queue until stopped",
        description="A long-lived worker for every bulk job on Temporal whose URL names the "
        "same task_queue (default verif-client). The service's address and credentials come "
        "from this process's flags and environment, never from Temporal.",
    )
    worker.add_argument(
        "--journal", required=True, help="temporal://HOST:PORT/NAMESPACE[?task_queue=Q]"
    )
    worker.add_argument(
        "--concurrency",
        type=POSITIVE_COUNT,
        default=50,
        help="SMS requests in flight at once (default 50)",
    )
    worker.add_argument(
        "--grace",
        type=parse_duration,
        default=10.0,
        help="on Ctrl-C or SIGTERM, how long requests in flight may take to finish (default 10s)",
    )
    _connection_args(worker)
    return worker


def _add_demo(commands: _Commands) -> argparse.ArgumentParser:
    """``verif-client demo``: a bulk job on the simulator in process."""
    demo = commands.add_parser(
        "demo",
        help="a bulk job against the in-process simulator",
        description="Run a whole bulk job (send, poll, record) on generated numbers against "
        "the simulator in this process: no account, no network. Some numbers are invalid, "
        "some never answer, some say no. The journal and results go to a temporary "
        "directory, removed at the end, or to --keep DIR.",
    )
    demo.add_argument(
        "--rows", type=POSITIVE_COUNT, default=1000, help="numbers in the job (default 1000)"
    )
    demo.add_argument("--keep", metavar="DIR", help="keep the journal and output in DIR")
    return demo


def _client(
    args: argparse.Namespace, journal: Job | None = None, hooks: Hooks | None = None
) -> VerificationClient:
    """The client the flags describe; with a journal, ``--rate`` is the whole
    job's, shared by every worker of the job."""
    if not args.base_url:
        raise UsageError("no service address: give --base-url or set VERIF_BASE_URL")
    password = os.environ.get("VERIF_API_PASSWORD")
    binding = args.binding
    if binding.is_soap and (not args.username or password is None):
        raise UsageError(
            "SOAP bindings need credentials: --username (or VERIF_API_USERNAME) "
            "and VERIF_API_PASSWORD"
        )
    try:
        return VerificationClient(
            args.base_url,
            proxy=args.proxy,
            cert=_client_cert(args),
            username=args.username,
            password=password,
            username_is_secret=args.username_is_secret,
            binding=binding,
            timeout=args.timeout,
            rate_limit=args.rate if journal is None else None,
            rate_limiter=(
                journal.rate_limiter(args.rate) if journal is not None and args.rate else None
            ),
            hooks=hooks,
        )
    except ValueError as exc:
        problem = str(exc).replace(
            "(cert=(cert_path, key_path, password))", "(set VERIF_CLIENT_KEY_PASSWORD)"
        )
        # The library names its option; the user gave a flag (or its variable).
        for option, flag in _FLAG_OF.items():
            if problem.startswith(option):
                raise UsageError(f"{flag}{problem[len(option) :]}") from None
        raise UsageError(problem if "_PROXY:" in problem else f"--base-url: {problem}") from None


_FLAG_OF: Final = {"cert:": "--client-cert:", "proxy:": "--proxy (or VERIF_PROXY):"}


def _client_cert(args: argparse.Namespace) -> tuple[str, str] | tuple[str, str, str] | None:
    if args.client_cert is None:
        if args.client_key is not None:
            raise UsageError("--client-key: give the certificate too (--client-cert)")
        return None
    # Without --client-key, the certificate's file holds the key too.
    key = args.client_key or args.client_cert
    password = os.environ.get("VERIF_CLIENT_KEY_PASSWORD")
    return (args.client_cert, key, password) if password else (args.client_cert, key)


def _operation(name: str) -> Operation[Any]:
    """An operation by its wire name or a unique tail of it at a ``_``
    (``HasBeenVerified``, ``MobileLocation_GetResult``), any case."""
    wanted = name.lower()
    found = [
        op
        for op in OPERATIONS
        if op.name.lower() == wanted or op.name.lower().endswith("_" + wanted)
    ]
    if len(found) != 1:
        known = ", ".join(op.name for op in OPERATIONS)
        problem = "ambiguous" if found else "unknown"
        raise UsageError(f"{name!r}: {problem} operation; expected one of {known}")
    return found[0]


def _parse_params(operation: str, pairs: Sequence[str]) -> dict[str, object]:
    op = _operation(operation)
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
        try:
            result = await client.call_with(_operation(args.operation), params)
        except RequestValidationError as exc:
            # Checked before anything is sent: the user's input, not the service.
            raise UsageError(str(exc)) from None
    print(safe_json(json.dumps(to_json(result), ensure_ascii=False)))
    return 0


def _check_writable(flag: str, path: str) -> None:
    """Refuse, before anything is created, a file that could not be written."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory")
    if not os.path.isdir(directory):
        raise UsageError(f"{flag} {path}: no such directory {directory}")
    # The output is replaced through a temporary file beside it: the directory too.
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable")


def _read_checked_input(args: argparse.Namespace, options: BulkOptions, codec: Codec) -> bytes:
    try:
        data = pathlib.Path(args.input).read_bytes()
    except OSError as exc:
        raise UsageError(f"--input {args.input}: {exc.strerror or exc}") from None
    # Checked as a whole now, before the journal exists; read again when loaded.
    read_input(data, options.question, codec, encoding=options.encoding, name=args.input)
    return data


class _Signals:
    """Turns SIGINT and SIGTERM into stop requests for the run."""

    def __init__(self, stopper: Stopper, display: ProgressDisplay) -> None:
        self.stopper = stopper
        self.display = display
        self.first: int | None = None

    async def watch(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                self.first = self.first or signum
                if self.stopper.requests == 0:
                    self.display.note(
                        f"stopping: no new sends; requests in flight get up to "
                        f"{self.stopper.grace:g}s to finish ({signal.Signals(signum).name} "
                        "again to stop at once)"
                    )
                self.stopper.request(signal.Signals(signum).name)

    @property
    def exit_status(self) -> int:
        return 128 + (self.first or signal.SIGINT)


def _bulk_prepare(
    args: argparse.Namespace,
) -> tuple[BulkOptions, bytes | None, _prometheus.Served | None]:
    """Every check of a bulk run that needs no journal, so that a mistake leaves nothing behind."""
    options = BulkOptions(
        question=args.question,
        location=args.location,
        concurrency=args.concurrency,
        deadline=args.deadline,
        resend_unknown=args.resend_unknown,
        resend_failed=args.resend_failed,
        encoding=args.encoding,
        policy=PollPolicy(false_means=args.false_means),
    )
    codec = _client(args).codec()  # the flags describe a usable client
    data = _read_checked_input(args, options, codec) if args.input else None
    _check_writable("--output", args.output)
    check_location(args.journal)
    if is_temporal(args.journal):
        _temporal_location(args.journal)
    else:
        if data is None and not os.path.exists(args.journal):
            raise UsageError(f"--journal {args.journal}: no such journal; a new job needs --input")
        _check_writable("--journal", args.journal)
    try:
        metrics = _prometheus.serve(args)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, f"--metrics-port {args.metrics_port}") from None
    return options, data, metrics


async def _bulk_run(
    args: argparse.Namespace,
    options: BulkOptions,
    data: bytes | None,
    metrics: _prometheus.Served | None,
) -> int:
    journal = await open_job(args.journal)
    stopper = Stopper(grace=args.grace)
    display = ProgressDisplay()
    signals = _Signals(stopper, display)
    try:
        client = _client(args, journal, _prometheus.hooks_of(metrics))
        on_progress = _prometheus.progress_of(metrics, display)
        with library_error_unwrapped():
            async with client, anyio.create_task_group() as tg:
                tg.start_soon(signals.watch)
                tg.start_soon(display.run)
                counts = await run_job(
                    client,
                    journal=journal,
                    output=args.output,
                    data=data,
                    options=options,
                    on_progress=on_progress,
                    stopper=stopper,
                    input_name=args.input or "input",
                )
                tg.cancel_scope.cancel()
        display.close()
    finally:
        await journal.aclose()
    # Past this point the journal holds everything: a dead stdout or stderr
    # (see write_or_drop) only loses these lines, never the exit status.
    print_counts(counts)
    if stopper.requests:
        left = sum(counts[state] for state in ALL_STATES if state not in FINAL_STATES)
        # The same command resumes: the journal knows its input and what is left.
        resume = shlex.join(["verif-client", *args.argv])
        write_or_drop(
            sys.stderr,
            f"verif-client: stopped with {left} rows unfinished; resume with: {safe(resume)}\n",
        )
        return signals.exit_status
    if counts[RowState.UNKNOWN]:
        write_or_drop(
            sys.stderr,
            f"verif-client: {counts[RowState.UNKNOWN]} rows are unknown: their SMS may have been "
            "sent (see each row's reason); --resend-unknown would send them again\n",
        )
    if metrics is not None and args.metrics_linger > 0:
        await _linger(args.metrics_linger)
    if counts[RowState.FAILED] or counts[RowState.UNKNOWN]:
        return EXIT_ROWS_FAILED
    return 0


async def _linger(seconds: float) -> None:
    """Keep /metrics up with the final counts, so that a scraper sees the job's
    end (a short job is over between two scrapes); a signal ends the wait."""
    write_or_drop(
        sys.stderr,
        f"metrics: the final counts stay on /metrics for {seconds:g}s (Ctrl-C ends it)\n",
    )
    with (
        anyio.move_on_after(seconds),
        anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals,
    ):
        async for _ in signals:
            return


async def _bulk_status(args: argparse.Namespace) -> int:
    journal = await open_job(args.journal, create=False, own=False)
    try:
        print_counts(await journal.counts())
    finally:
        await journal.aclose()
    return 0


async def _bulk_export(args: argparse.Namespace) -> int:
    _check_writable("--output", args.output)
    journal = await open_job(args.journal, create=False, own=False)
    try:
        counts = await journal.export(args.output)
    finally:
        await journal.aclose()
    finished = sum(counts[state] for state in FINAL_STATES)
    print(f"{finished} of {sum(counts.values())} rows finished, written to {safe(args.output)}")
    return 0


def _temporal_location(location: str) -> Any:
    """The parsed temporal:// URL (a one-line error without the temporal extra)."""
    from .bulk._temporal_location import Location

    return Location.parse(location)


async def _worker(args: argparse.Namespace) -> int:
    from .bulk._runner import library_error_unwrapped
    from .bulk._temporal import serve

    if not is_temporal(args.journal):
        raise UsageError("worker --journal: expected temporal://HOST:PORT/NAMESPACE")
    location = _temporal_location(args.journal)
    stopper = Stopper(grace=args.grace)
    display = ProgressDisplay()
    signals = _Signals(stopper, display)

    def ready() -> None:
        print(f"verif-client: serving {safe(location.where())}; Ctrl-C stops", file=sys.stderr)

    # A server that cannot be reached, a namespace it does not have: one line.
    with library_error_unwrapped():
        async with _client(args) as client, anyio.create_task_group() as tg:
            tg.start_soon(signals.watch)
            await serve(location, client, args.concurrency, stopper, on_ready=ready)
            tg.cancel_scope.cancel()
    return signals.exit_status


def _simulate(args: argparse.Namespace) -> int:
    from .simulator import _main as simulator_main

    try:
        simulator = simulator_main.simulator_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        _prometheus.serve_simulator(args, simulator)
    except OSError as exc:
        return _fail(EXIT_SERVICE, f"--metrics-port {args.metrics_port}: {exc.strerror or exc}")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(simulator_main.run, simulator, args.host, args.port)
    except OSError as exc:
        return _fail(EXIT_SERVICE, f"simulate: {args.host}:{args.port}: {exc.strerror or exc}")
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    _environment_defaults(args)
    if args.command == "call":
        return anyio.run(_call, args)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(rows=args.rows, keep=args.keep)
    if args.command == "worker":
        return anyio.run(_worker, args)
    if args.bulk_command == "run":
        return anyio.run(_bulk_run, args, *_bulk_prepare(args))
    if args.bulk_command == "export":
        return anyio.run(_bulk_export, args)
    return anyio.run(_bulk_status, args)


class _SafeFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return safe(super().format(record))


def _verbose() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_SafeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    library = logging.getLogger("verif_client")
    library.addHandler(handler)
    library.setLevel(logging.DEBUG)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    # argparse reports arguments no subcommand took from the top-level parser, so its error
    # would point at `verif-client --help`: the command they were given to says it instead.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _fail(status: int, message: str) -> int:
    write_or_drop(sys.stderr, f"verif-client: {safe(message)}\n")
    return status


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The first word that is not an option names the command (the top-level
    # options take no value).
    command = next((word for word in argv if not word.startswith("-")), None)
    args = _parse(build_parser(command), argv)
    args.argv = argv
    status = _main(args)
    if is_temporal(getattr(args, "journal", "")) and "temporalio.bridge" in sys.modules:
        # The Temporal SDK's native threads can crash the interpreter's
        # finalization (PyGILState_Release): leave without it, output flushed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def _main(args: argparse.Namespace) -> int:
    if args.verbose:
        _verbose()
    try:
        return _dispatch(args)
    except (UsageError, BulkInputError) as exc:
        return _fail(EXIT_USAGE, str(exc))
    except JournalError as exc:
        return _fail(EXIT_JOURNAL, str(exc))
    except VerifClientError as exc:
        return _fail(EXIT_SERVICE, f"{type(exc).__name__}: {exc}")
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(EXIT_SERVICE, f"{where}{exc.strerror or exc}")
    except KeyboardInterrupt:
        return _fail(128 + signal.SIGINT, "interrupted")
    except Exception as exc:
        # A bug of ours, not the user's: still one line, the traceback under -v.
        if args.verbose:
            traceback.print_exc()
        return _fail(EXIT_INTERNAL, f"internal error: {type(exc).__name__}: {exc} (-v shows more)")


if __name__ == "__main__":
    sys.exit(main())
