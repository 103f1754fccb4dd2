"""The smallest end-to-end check of the codecs: every operation encodes in every binding."""

from __future__ import annotations

import pytest

import verif_client as vc


@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("operation", vc.OPERATIONS, ids=lambda op: op.name)
def test_every_operation_encodes_in_every_binding(
    binding: vc.Binding, operation: vc.Operation
) -> None:
    params: dict[str, object] = {}
    for param in operation.params:
        if param.type.name == "long":
            params[param.name] = 2**40
        elif "Number" in param.name:
            params[param.name] = "5551234567"
        else:
            params[param.name] = "Did you ask to pay?"
    request = vc.codec_for(binding).encode(
        operation, params, credentials=vc.Credentials("user", "secret")
    )
    assert request.path.startswith(vc.ENDPOINT_PATH)
    assert (b"secret" in request.body) is binding.is_soap
    assert "secret" not in repr(request)
