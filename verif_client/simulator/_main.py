"""``python -m verif_client.simulator``: the simulator on a port until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import anyio

from .._argtypes import COUNT, FRACTION, PORT, SECONDS
from ._config import Script, SimulatorConfig
from ._server import serve
from ._simulator import Simulator

DESCRIPTION = "Serve a simulated GIACT VerificationServices v5 endpoint (all four bindings, ?WSDL)."


def build_parser(prog: str = "python -m verif_client.simulator") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The simulator's options, shared with ``verif-client simulate``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=PORT, default=8765, help="port (default 8765; 0 = any)")
    parser.add_argument(
        "--username",
        help="the only SOAP ApiUsername accepted (VERIF_API_USERNAME with verif-client; "
        "default: any non-empty one)",
    )
    parser.add_argument(
        "--password",
        help="the only SOAP ApiPassword accepted, with --username (default: VERIF_API_PASSWORD)",
    )
    parser.add_argument(
        "--accept-any-credentials",
        action="store_true",
        help="let SOAP calls through with any credentials or none (the service refuses "
        "a missing or empty AuthenticationHeader; by default so does the simulator)",
    )
    parser.add_argument(
        "--pending-polls",
        type=COUNT,
        default=2,
        help="HasBeenVerified/location polls answered pending (default 2)",
    )
    parser.add_argument(
        "--manual",
        action="store_true",
        help="leave every request pending until answered on the phone pages (/phone/)",
    )
    parser.add_argument(
        "--latency", type=SECONDS, default=0.0, help="seconds added to each call (default 0)"
    )
    parser.add_argument(
        "--jitter", type=SECONDS, default=0.0, help="up to this many more seconds (default 0)"
    )
    parser.add_argument(
        "--fail-503", type=FRACTION, default=0.0, help="fraction answered 503 (default 0)"
    )
    parser.add_argument(
        "--drop", type=FRACTION, default=0.0, help="fraction of connections dropped (default 0)"
    )
    parser.add_argument(
        "--malformed", type=FRACTION, default=0.0, help="fraction of broken answers (default 0)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the random faults")
    parser.add_argument(
        "--verified-dialect",
        choices=["nil", "bool"],
        default="nil",
        help="HasBeenVerified while nobody answered: nil (default) or false (a plain bool)",
    )
    parser.add_argument(
        "--throws",
        action="append",
        default=[],
        metavar="OPERATION",
        help="make this operation's web method throw (repeatable)",
    )


def simulator_from_args(args: argparse.Namespace) -> Simulator:
    config = SimulatorConfig(
        script=Script(pending_polls=args.pending_polls, location_pending_polls=args.pending_polls),
        manual=args.manual,
        latency=args.latency,
        jitter=args.jitter,
        fail_503=args.fail_503,
        drop=args.drop,
        malformed=args.malformed,
        seed=args.seed,
        verified_dialect=args.verified_dialect,
        throws=args.throws,
    )
    return Simulator(
        credentials=_credentials(args),
        config=config,
        accept_any_credentials=args.accept_any_credentials,
    )


def _credentials(args: argparse.Namespace) -> tuple[str, str] | None:
    """The one username and password accepted, or None for any non-empty pair.

    The password comes from --password or, as for every other command, from
    VERIF_API_PASSWORD; a username without a password (or the other way round)
    would make every call fail, so it is refused at start.
    """
    password = args.password
    if password is None and args.username is not None:
        password = os.environ.get("VERIF_API_PASSWORD")
    if args.username is None and password is None:
        return None
    if args.accept_any_credentials:
        raise ValueError("--accept-any-credentials: not with --username/--password")
    if not args.username:
        raise ValueError("--password needs --username (or VERIF_API_USERNAME)")
    if not password:
        raise ValueError(
            f"--username {args.username!r} needs a password: --password or VERIF_API_PASSWORD"
        )
    return args.username, password


async def run(simulator: Simulator, host: str, port: int) -> None:
    async with serve(simulator, host=host, port=port) as server:
        print(f"Simulator listening: {server.endpoint_url}  (WSDL: {server.wsdl_url})", flush=True)
        print(f"Phone pages: {server.base_url}/phone/", flush=True)
        await anyio.sleep_forever()


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog) if prog else build_parser()
    args = parser.parse_args(argv)
    try:
        simulator = simulator_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        anyio.run(run, simulator, args.host, args.port)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    except OSError as exc:
        print(f"{parser.prog}: {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
