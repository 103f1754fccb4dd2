"""One poll run: its context manager and its tasks.

Out of _polling, which mypyc compiles in the opt-in build (hatch_build.py): mypyc compiles no
async generator, and see run."""

from __future__ import annotations

import random
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from ._polling import (
    _O,
    _WORKERS_STARTED_AT_ONCE,
    CallOperation,
    CallsAtOnce,
    PollKind,
    PollStream,
)
from ._pollpolicy import PollPolicy, VerifiedDialect
from ._pollwatch import Watch

if TYPE_CHECKING:
    from ._hooks import Dispatch


@asynccontextmanager
async def poll(
    call: CallOperation,
    request_ids: Iterable[int] | AsyncIterable[int],
    kinds: tuple[PollKind[_O], ...],
    *,
    policy: PollPolicy,
    workers: int,
    keep_open: bool,
    dialect: VerifiedDialect,
    hooks: Dispatch | None = None,
    at_once: CallsAtOnce | None = None,
) -> AsyncIterator[PollStream[_O]]:
    """Run one poll run: ``workers`` tasks share the due ids and ask through
    ``call``; the stream yields each id's outcome per kind as it settles."""
    stream = PollStream(call, kinds, policy, workers, random.Random(), dialect, hooks, at_once)
    if not isinstance(request_ids, AsyncIterable):
        # Taken by the workers as they have room (see _next_due), not here.
        stream._source = iter(request_ids)
        if not keep_open:
            stream._input_open = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, stream, request_ids)
            try:
                yield stream
            finally:
                tg.cancel_scope.cancel()
    finally:
        # Once every worker is gone: a poll whose answer came just as the
        # run was cancelled is recorded before the ids left are closed, and
        # nothing follows the run's end.
        if hooks is not None:
            hooks.poll_run_ended(stream)


async def run(stream: PollStream[Any], source: Iterable[int] | AsyncIterable[int] | None) -> None:
    """The run's tasks: the workers, the dispatcher and an async source's feed.

    Here, not in _polling, which mypyc compiles in the opt-in build (hatch_build.py): a
    task group's exit waits, and mypyc's code then re-raises the exception the thread
    handles, which other tasks may have changed meanwhile."""
    due_send, due_receive = anyio.create_memory_object_stream[Watch](0)
    async with anyio.create_task_group() as tg:
        if isinstance(source, AsyncIterable):
            tg.start_soon(stream._feed, source)
        checkpoint = stream._backend.checkpoint
        for started in range(1, stream._workers + 1):
            tg.start_soon(stream._worker, due_receive.clone())
            if started % _WORKERS_STARTED_AT_ONCE == 0:
                # Each starts by taking an id and opening a connection: a
                # thousand at once make one event-loop pass of a third of a
                # second, which the first answers would wait behind.
                await checkpoint()
        due_receive.close()
        async with due_send:
            await stream._dispatch(due_send)
    stream._outcomes.end(stream._source_error)
