"""The simulator on 127.0.0.1 in a process of its own, for the loopback runs.

``python -m benchmarks.server COUNT`` creates COUNT SecureLink requests that
are verified on their 5th poll, serves the simulator, prints one JSON line
(``base_url``, ``wsdl_url``, ``first_id``) and serves until stdin closes. A
separate process keeps the server off the client's event loop and its GIL.
"""

from __future__ import annotations

import json
import sys
from contextlib import AbstractContextManager
from typing import Any

import anyio
from anyio.to_thread import run_sync

from verif_client.simulator import serve

from . import workload
from .common import server_process


async def _main(count: int) -> None:
    simulator = workload.scripted_simulator()
    ids = workload.create_requests(simulator, count)
    async with serve(simulator, "127.0.0.1", 0) as server:
        print(
            json.dumps(
                {"base_url": server.base_url, "wsdl_url": server.wsdl_url, "first_id": ids[0]}
            ),
            flush=True,
        )
        async with anyio.create_task_group() as tg:

            async def trim_log() -> None:
                # The request log would grow by one record per poll for the whole run.
                while True:
                    await anyio.sleep(0.5)
                    simulator.reset_log()

            tg.start_soon(trim_log)
            await run_sync(sys.stdin.read, abandon_on_cancel=True)
            tg.cancel_scope.cancel()


def running(count: int) -> AbstractContextManager[dict[str, Any]]:
    """Start the server process; yield what it printed; stop it on exit."""
    return server_process("benchmarks.server", str(count))


if __name__ == "__main__":
    anyio.run(_main, int(sys.argv[1]))
