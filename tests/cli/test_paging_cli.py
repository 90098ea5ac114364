"""The CLI follows the cursors of ``GET /v1/limits`` and ``GET /v1/queues`` to the end."""

from __future__ import annotations

from tickwheel.stores.base import Limit
from tickwheel.stores.open import open_store

from .cli_support import Run, Service, ok_json, sqlite_service

service = sqlite_service("paging-cli")


async def _fill(service: Service, hosts: int, queues: int) -> None:
    """Write host limits and paused queues straight into the service's SQLite file."""
    store = open_store(f"sqlite:///{service.log.parent}/t.db")
    try:
        for n in range(hosts):
            await store.set_limit(f"h{n:04}.example.com", Limit(concurrency=1))
        for n in range(queues):
            await store.pause_queue(f"q{n:04}", True)
    finally:
        await store.close()


async def test_the_cli_follows_the_cursors_to_the_end(tw: Run, service: Service) -> None:
    await _fill(service, 1005, 1003)  # over the CLI's 1,000 a page
    hosts = ok_json(tw("limit", "ls", "--json"))["limits"]
    assert [row["host"] for row in hosts] == [f"h{n:04}.example.com" for n in range(1005)]
    queues = ok_json(tw("queues", "--json"))["queues"]
    assert [row["name"] for row in queues] == [f"q{n:04}" for n in range(1003)]
