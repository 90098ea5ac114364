"""The route stack alone: the tickwheel app and the floor's endpoint called as ASGI apps in this
process, no HTTP server and no network, the tickwheel app over a `MemoryStore`.

What a create costs in the app (the `Gate`, the metrics, routing, validation, the timer, the
answer) apart from the server and the store's round trip: the CPU of batches alternating
between the two apps, the least of each kept, as the steadiest figure on a shared machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

from harness.report import Table, fmt

from scenarios.api.posting import BODY, FLOOR_SOURCE
from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.memory import MemoryStore

App = Any
RAW = json.dumps(BODY).encode()
SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.3"},
    "http_version": "1.1",
    "server": ("127.0.0.1", 8080),
    "client": ("127.0.0.1", 50000),
    "scheme": "http",
    "root_path": "",
    "method": "POST",
    "path": "/v1/timers",
    "raw_path": b"/v1/timers",
    "query_string": b"",
    "headers": [
        (b"host", b"127.0.0.1:8080"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(RAW)).encode()),
    ],
}


async def _create(app: App) -> int:
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": RAW, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        status = message.get("status", status)

    await app({**SCOPE, "state": {}}, receive, send)
    return status


async def _batch_us(app: App, count: int) -> float:
    start = time.process_time()
    for _ in range(count):
        await _create(app)
    return (time.process_time() - start) / count * 1e6


async def _measure(batches: int, count: int) -> tuple[float, float]:
    floor = sys.modules["floor"] = types.ModuleType("floor")  # pydantic resolves names there
    exec(FLOOR_SOURCE, floor.__dict__)
    store = MemoryStore()
    app = create_app(ServiceSettings(store_url="memory://"), store)
    try:
        for each in (floor.app, app):  # warm: first requests build FastAPI's caches
            assert await _create(each) == 201
            await _batch_us(each, count // 5)
        floor_us, ours_us = [], []
        for _ in range(batches):
            floor_us.append(await _batch_us(floor.app, count))
            ours_us.append(await _batch_us(app, count))
        return min(floor_us), min(ours_us)
    finally:
        await store.close()


def rows(batches: int, count: int, before: str | None) -> Table:
    """The CPU a create costs each app, the least of `batches` alternating batches, measured in
    a child process each (with `before`, one more on that tree's ``src``)."""
    runs = [("tickwheel `create_app`, MemoryStore", None)]
    if before:
        runs.append((f"the same from {before}", before))
    out = Table(
        f"The route stack alone: one create, CPU µs (least of {batches} batches of {count})",
        ["app, called in process", "CPU µs a create", "floor's, same process", "x floor"],
    )
    for label, source in runs:
        env = os.environ | ({"PYTHONPATH": source} if source else {})
        done = subprocess.run(
            [sys.executable, "-m", "scenarios.api.inprocess", str(batches), str(count)],
            cwd=Path(__file__).parents[2],
            env=env,
            capture_output=True,
            check=True,
        )
        floor_us, ours_us = json.loads(done.stdout)
        out.rows.append([label, fmt(ours_us, 1), fmt(floor_us, 1), f"{ours_us / floor_us:.2f}"])
    out.notes = [
        "no server, no socket: the app's own cost; the floor is the FastAPI endpoint of the "
        "table above (pydantic body, dict answer), alternating with it in the same process"
    ]
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_measure(int(sys.argv[1]), int(sys.argv[2])))))
