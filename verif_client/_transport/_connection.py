"""One pool connection: its socket, its answer reader, how it is closed."""

from __future__ import annotations

import contextlib
import os
import select
import socket
from typing import TYPE_CHECKING, Final

import anyio
import anyio.abc
import anyio.lowlevel

from . import _parse
from ._receiver import AsyncioReceiver

if TYPE_CHECKING:
    from . import Answer

READ_SIZE: Final = 65536


class Connection:
    __slots__ = (
        "answer",
        "fd",
        "idle_since",
        "plain_fd",
        "poller",
        "receiver",
        "replay",
        "stream",
    )

    def __init__(
        self,
        stream: anyio.abc.ByteStream | None,
        receiver: AsyncioReceiver | None,
        fd: int,
        *,
        tls: bool,
    ) -> None:
        # None when the loop's create_connection opened it (see _opening).
        self.stream = stream
        # poll(), not select(): a process with 1,024 connections has fds past FD_SETSIZE.
        self.poller = select.poll()
        self.fd = fd
        self.poller.register(fd, select.POLLIN)
        # Where a request can be written with one write(2) (see _write); -1 over TLS.
        self.plain_fd = -1 if tls else fd
        self.answer = _parse.reader()()
        # The last answer that came whole in one read and left the connection
        # reusable: its bytes, the size cap it was read under, and what it
        # gave (see _Attempt.feed).
        # The answer typed with None: mypyc (hatch_build.py) keeps a union as the
        # object it is, where it would rebuild a tuple typed as one at every read,
        # and the pool tells a replayed answer by its identity (see on_data).
        self.replay: tuple[bytes, int, Answer | None] | None = None
        self.idle_since = 0.0
        # On asyncio, answers are read (and over TLS, requests written) by a
        # protocol of ours on the socket's transport (see _receiver).
        self.receiver = receiver

    async def close(self) -> None:
        if self.stream is None:
            self.close_now()
            # The loop closes the socket on its next pass: closed when this
            # returns, as anyio's forceful close of a stream is, cancelled or not.
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return
        if self.receiver is not None:
            self.receiver.closed_here = True
        await anyio.aclose_forcefully(self.stream)

    def close_now(self) -> None:
        """Close a connection read by a receiver, from a callback: the loop
        closes the socket on its next pass. Its transport is the one an anyio
        stream would close, if anyio opened it (taken over, see _receiver):
        that stream no longer reads, and has nothing of its own to release."""
        assert self.receiver is not None
        self.receiver.abort()

    def abandon(self) -> None:
        """End a connection of another (likely closed) event loop without
        touching that loop: its stream's close() would schedule work on it.
        A shutdown through a duplicate of the socket ends the TCP connection;
        the socket itself is closed when the dead loop's objects are collected."""
        try:
            duplicate = socket.socket(fileno=os.dup(self.fd))
        except OSError:
            return  # already closed
        with duplicate, contextlib.suppress(OSError):
            duplicate.shutdown(socket.SHUT_RDWR)


def read_in_heap_sized_chunks(transport: object) -> None:
    """Have asyncio read at most READ_SIZE bytes at a time from this socket.

    asyncio's socket transport reads into a fresh 256 KiB buffer each time:
    past glibc's mmap threshold (128 KiB), so every answer costs an mmap, an
    mremap when the buffer is cut to size, a munmap and a page fault or two.
    64 KiB buffers come from the heap. Not public API: looked up defensively,
    and left alone when it is not there (uvloop's transports, trio's streams).
    """
    if getattr(transport, "max_size", 0) > READ_SIZE:
        transport.max_size = READ_SIZE  # type: ignore[attr-defined]


def transport_of(stream: object) -> object:
    """The asyncio transport under an anyio stream (and the streams it wraps), if any."""
    while stream is not None:
        transport = getattr(stream, "_transport", None)
        if transport is not None:
            return transport
        stream = getattr(stream, "transport_stream", None)
    return None
