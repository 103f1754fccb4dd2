"""Choosing the codec for a binding."""

from __future__ import annotations

from typing import Final

from ._codec import DEFAULT_MAX_RESPONSE_BYTES, Codec
from ._http import HttpGetCodec, HttpPostCodec
from ._service import DEFAULT_NAMESPACE, ENDPOINT_PATH, Binding, parse_binding
from ._soap import Soap11Codec, Soap12Codec

_CODECS: Final[dict[Binding, type[Codec]]] = {
    Binding.SOAP11: Soap11Codec,
    Binding.SOAP12: Soap12Codec,
    Binding.HTTP_GET: HttpGetCodec,
    Binding.HTTP_POST: HttpPostCodec,
}


def codec_for(
    binding: Binding | str,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    endpoint_path: str = ENDPOINT_PATH,
    validate: bool = True,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> Codec:
    """The sans-IO codec of a binding (``Binding.SOAP11`` or its value ``"soap11"``)."""
    return _CODECS[parse_binding(binding)](
        namespace=namespace,
        endpoint_path=endpoint_path,
        validate=validate,
        max_response_bytes=max_response_bytes,
    )
