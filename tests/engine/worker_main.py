"""A worker process for the failure tests: ``python worker_main.py STORE_URL LEASE_MS``.

It fires HTTP callbacks (private targets allowed: the receiver is on loopback) until SIGTERM,
with a short lease so that a killed worker's timers come back within the test.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine import Worker, WorkerSettings
from tickwheel.stores import open_store


async def main(store_url: str, lease_ms: int) -> None:
    store = open_store(store_url)
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    worker = Worker(store, target, WorkerSettings(lookahead_ms=500, lease_ms=lease_ms))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
    print("worker ready", flush=True)
    try:
        await worker.run()
    finally:
        await target.close()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
