from __future__ import annotations

import contextlib

import pytest

# A hang fails its test within the per-test timeout on every backend (see hangs.py).
from hangs import pytest_collection_modifyitems, pytest_pyfunc_call  # noqa: F401
from realparts import import_real_part

# Hypothesis imports its optimiser lazily, in the middle of a test, where
# pytest's assertion rewriting compiles it deep in the stack; CPython 3.11.7
# then fails with "SystemError: AST constructor recursion depth mismatch"
# (tests/test_reliability_fuzz.py, some seeds). Imported here, at the top.
with contextlib.suppress(ImportError):  # moved in another hypothesis version: nothing to do
    import hypothesis.internal.conjecture.optimiser  # noqa: F401


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["llhttp", "h11"])
def answer_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The pool reads its answers with this parser (the bad-peer tests run on both)."""
    from verif_client._transport import _parse

    if request.param == "llhttp":
        import_real_part("httptools", "the speedups extra's parser")
        monkeypatch.setattr(_parse, "READER", _parse.LlhttpAnswer)
    else:
        monkeypatch.setattr(_parse, "READER", _parse.H11Answer)
    return str(request.param)
