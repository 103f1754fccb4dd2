"""Where a Temporal job lives: the ``temporal://`` URL and the connection to it.

``temporal://HOST:PORT/NAMESPACE?job=ID&task_queue=Q&tls=true&heartbeat=S&batch=N``
(see docs/fleet.md). The connection seals payloads with ``VERIF_TEMPORAL_KEY``
(or refuses sealed ones in one line without it), lets the SDK retry the
server's calls for as long as an outage the workers are meant to ride out,
and keeps the SDK's core quiet (``_temporal_outage`` says it in one line).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Final
from urllib.parse import parse_qsl, urlsplit

import attrs

from .._terminal import safe
from ._journal import JournalError

try:
    import temporalio.client
    import temporalio.converter
    import temporalio.service
except ImportError:  # pragma: no cover - depends on the installed extras
    raise JournalError(
        "a temporal:// journal needs temporalio: pip install 'verif-client[temporal]'"
    ) from None

from ._sealed import UnsealedCodec, codec_from_environment
from ._temporal_converter import PayloadConverter
from ._temporal_outage import quiet_runtime

SCHEME: Final = "temporal://"
API_KEY_VARIABLE: Final = "TEMPORAL_API_KEY"
DEFAULT_TASK_QUEUE: Final = "verif-client"
_PARAMETERS: Final = frozenset({"job", "task_queue", "tls", "heartbeat", "batch"})
# Seconds of silence after which a worker's activities are given up. A server
# outage counts as silence (its timers run from the last heartbeat it stored),
# so this is also how long an outage a send in flight survives, less a
# quarter (heartbeats reach the server every quarter of it): 45 s.
DEFAULT_HEARTBEAT: Final = 60
# The SDK's own retries of a call to the server (an activity's completion
# among them) last this long: a server away for longer than its default 10 s
# must not lose a send's outcome.
_RETRY: Final = temporalio.service.RetryConfig(
    max_interval_millis=5_000, max_elapsed_time_millis=600_000, max_retries=1_000
)


def is_temporal(location: str) -> bool:
    return location.startswith(SCHEME)


@attrs.frozen(slots=True)
class Location:
    """A parsed ``temporal://HOST:PORT/NAMESPACE?...`` (see docs/fleet.md)."""

    target: str
    namespace: str
    job: str | None
    task_queue: str | None
    tls: bool
    heartbeat: float
    # Rows per batch; None: the job's own (see batch_of).
    batch: int | None

    @classmethod
    def parse(cls, location: str) -> Location:
        def fail(problem: str) -> JournalError:
            return JournalError(f"--journal {safe(location)}: {problem}")

        parts = urlsplit(location)
        if parts.scheme != "temporal" or not parts.hostname or parts.port is None:
            raise fail("expected temporal://HOST:PORT/NAMESPACE?job=ID")
        if parts.username or parts.password:
            raise fail(f"no credentials in the URL: the API key is read from {API_KEY_VARIABLE}")
        namespace = parts.path.strip("/") or "default"
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(params) - _PARAMETERS)
        if unknown:
            raise fail(
                f"unknown parameter {unknown[0]!r} (known: {', '.join(sorted(_PARAMETERS))})"
            )
        try:
            heartbeat = float(params.get("heartbeat", str(DEFAULT_HEARTBEAT)))
            batch = int(params["batch"]) if "batch" in params else None
        except ValueError as exc:
            raise fail(str(exc)) from None
        if not (heartbeat > 0 and (batch is None or 1 <= batch <= 1000)):
            raise fail("heartbeat must be > 0 seconds and batch from 1 to 1000 rows")
        tls = params.get("tls", "false").lower()
        if tls not in ("true", "false", "1", "0"):
            raise fail("tls must be true or false")
        return cls(
            target=f"{parts.hostname}:{parts.port}",
            namespace=namespace,
            job=params.get("job") or None,
            task_queue=params.get("task_queue") or None,
            tls=tls in ("true", "1"),
            heartbeat=heartbeat,
            batch=batch,
        )

    def where(self) -> str:
        return f"temporal://{self.target}/{self.namespace}"


async def connect(location: Location) -> temporalio.client.Client:
    codec = codec_from_environment()
    converter = dataclasses.replace(
        temporalio.converter.DataConverter.default, payload_converter_class=PayloadConverter
    )
    if codec is not None:
        # Sealed failures too: an error message could quote a row.
        converter = dataclasses.replace(
            converter,
            payload_codec=codec,
            failure_converter_class=temporalio.converter.DefaultFailureConverterWithEncodedAttributes,
        )
    else:
        # A sealed payload read without the key: one line naming it, not a KeyError.
        converter = dataclasses.replace(converter, payload_codec=UnsealedCodec())
    api_key = os.environ.get(API_KEY_VARIABLE) or None
    try:
        return await temporalio.client.Client.connect(
            location.target,
            namespace=location.namespace,
            api_key=api_key,
            tls=location.tls,
            data_converter=converter,
            retry_config=_RETRY,
            runtime=quiet_runtime(),
        )
    except RuntimeError as exc:
        raise JournalError(f"{location.where()}: cannot connect ({str(exc).strip()})") from None
