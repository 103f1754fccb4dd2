"""A Temporal payload codec that encrypts every payload with AES-256-GCM.

Phone numbers travel in workflow inputs, activity inputs and results; with
``VERIF_TEMPORAL_KEY`` set (64 hex digits, the same on every worker and every
``bulk`` command of the job), they reach the Temporal server, its database and
its UI sealed. Payloads carry the key's id (not the key), so a worker with
another key says so instead of failing on garbage.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Final

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from ._journal import JournalError

KEY_VARIABLE: Final = "VERIF_TEMPORAL_KEY"
_ENCODING: Final = b"binary/verif-aes256gcm"
_NONCE_BYTES: Final = 12


class SealingCodec(PayloadCodec):
    def __init__(self, key: bytes) -> None:
        # Imported here: only a sealed job needs cryptography.
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:  # pragma: no cover - depends on the installed extras
            raise JournalError(
                f"{KEY_VARIABLE} needs cryptography: pip install 'verif-client[temporal]'"
            ) from None
        self._aead = AESGCM(key)
        self.key_id = hashlib.sha256(b"verif-client key id\0" + key).hexdigest()[:16]
        self._key_id = self.key_id.encode()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        sealed = []
        for payload in payloads:
            nonce = os.urandom(_NONCE_BYTES)
            data = nonce + self._aead.encrypt(nonce, payload.SerializeToString(), self._key_id)
            metadata = {"encoding": _ENCODING, "key-id": self._key_id}
            sealed.append(Payload(metadata=metadata, data=data))
        return sealed

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        opened = []
        for payload in payloads:
            if payload.metadata.get("encoding") != _ENCODING:
                opened.append(payload)
                continue
            if payload.metadata.get("key-id") != self._key_id:
                raise JournalError(
                    f"a payload of this job is sealed with another key than {KEY_VARIABLE}'s"
                )
            nonce, sealed = payload.data[:_NONCE_BYTES], payload.data[_NONCE_BYTES:]
            opened.append(Payload.FromString(self._aead.decrypt(nonce, sealed, self._key_id)))
        return opened


class UnsealedCodec(PayloadCodec):
    """No key: payloads go as they are, and a sealed one read is refused in one
    line naming the variable (the SDK would raise a bare KeyError)."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if any(payload.metadata.get("encoding") == _ENCODING for payload in payloads):
            raise JournalError(
                f"this job's payloads are sealed: set {KEY_VARIABLE} to the job's key "
                "(the same 64 hex digits every process of the job has)"
            )
        return list(payloads)


def sealed_task_queue(task_queue: str) -> str:
    """``task_queue`` as the workers of this process's key poll it: a sealed
    job's tasks go to a queue of its key's own (its id, not the key), so a
    worker with another key, or none, is never given a task it cannot read."""
    codec = codec_from_environment()
    return task_queue if codec is None else f"{task_queue}/sealed-{codec.key_id}"


def codec_from_environment() -> SealingCodec | None:
    """The codec of ``VERIF_TEMPORAL_KEY``, or None when it is not set."""
    text = os.environ.get(KEY_VARIABLE, "")
    if not text:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise JournalError(f"{KEY_VARIABLE}: expected 64 hex digits (a 256-bit key)")
    return SealingCodec(key)
