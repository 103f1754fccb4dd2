"""A local imitation of the VerificationServices v5 service, for tests and demos.

``Simulator`` is an ASGI 3 app: use it in-process through
``VerificationClient(transport=simulator.transport())`` (no HTTP objects, the
cheap path) or ``httpx.ASGITransport(app=simulator)``, or on a port with ``serve()`` /
``serve_in_thread()`` / ``python -m verif_client.simulator``. Importing
``verif_client`` does not import this package.
"""

from .._public import show_as_public
from ._config import DEFAULT_CONSENT_TEXT, DEFAULT_LOCATION, Script, SimulatorConfig
from ._server import ConnectionDropped, Server, serve, serve_in_thread
from ._simulator import LoggedRequest, Simulator
from ._state import SecureLinkRequest
from ._transport import SimulatorTransport

__all__ = [
    "DEFAULT_CONSENT_TEXT",
    "DEFAULT_LOCATION",
    "ConnectionDropped",
    "LoggedRequest",
    "Script",
    "SecureLinkRequest",
    "Server",
    "Simulator",
    "SimulatorConfig",
    "SimulatorTransport",
    "serve",
    "serve_in_thread",
]

show_as_public(__name__, globals(), __all__)
