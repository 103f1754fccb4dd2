"""``python -m verif_client.simulator``: the simulator on a port until Ctrl-C."""

from __future__ import annotations

import argparse
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
    parser.add_argument("--username", help="required SOAP ApiUsername (default: accept any)")
    parser.add_argument("--password", help="required SOAP ApiPassword (with --username)")
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
    credentials = None
    if args.username is not None or args.password is not None:
        credentials = (args.username or "", args.password or "")
    return Simulator(credentials=credentials, config=config)


async def run(simulator: Simulator, host: str, port: int) -> None:
    async with serve(simulator, host=host, port=port) as server:
        print(f"Simulator listening: {server.endpoint_url}  (WSDL: {server.wsdl_url})", flush=True)
        print(f"Phone pages: {server.base_url}/phone/", flush=True)
        await anyio.sleep_forever()


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog) if prog else build_parser()
    args = parser.parse_args(argv)
    try:
        anyio.run(run, simulator_from_args(args), args.host, args.port)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    except OSError as exc:
        print(f"{parser.prog}: {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
