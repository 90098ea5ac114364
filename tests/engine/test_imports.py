"""The engine's light paths import nothing outside the standard library: `consume` and a
`Worker` with its own target run in a base install, without the service extra's packages."""

from __future__ import annotations

import subprocess
import sys

from prometheus_client import CollectorRegistry

from tickwheel.engine.metrics import Metrics

# a fresh interpreter in which the service extra's packages cannot be imported
BLOCKED = (
    "import sys\nfor name in ('httptools', 'prometheus_client'):\n    sys.modules[name] = None\n"
)


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKED + code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_consume_and_a_worker_need_no_service_extra() -> None:
    code = (
        "import asyncio\n"
        "from tickwheel.engine import Worker, consume\n"
        "from tickwheel.model import Timer\n"
        "from tickwheel.stores import MemoryStore\n"
        "async def main():\n"
        "    store = MemoryStore()\n"
        "    await store.add(Timer(id='t', due_ms=store.now_ms(), payload=1))\n"
        "    async for delivery in consume(store):\n"
        "        await delivery.ack()\n"
        "        print(delivery.timer.id, Worker.__name__)\n"
        "        break\n"
        "asyncio.run(main())\n"
    )
    assert run(code).split() == ["t", "Worker"]


def test_the_http_target_names_what_it_is_missing() -> None:
    code = (
        "import tickwheel.callbacks\n"
        "try:\n"
        "    tickwheel.callbacks.HttpTarget\n"
        "except ImportError as error:\n"
        "    print(error.name)\n"
    )
    assert run(code).split() == ["httptools"]


def test_metrics_are_exported_on_the_registry_they_are_given() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.acked["q"] += 2
    assert metrics.registry is registry
    assert registry.get_sample_value("tickwheel_acked_total", {"queue": "q"}) == 2
    own = Metrics()
    own.leases_lost = 3
    assert own.registry.get_sample_value("tickwheel_leases_lost_total") == 3
    assert own.registry is own.registry


def test_a_name_is_the_same_whichever_is_imported_first() -> None:
    code = (
        "from tickwheel.engine import Delivery, consume\n"
        "import inspect\n"
        "print(inspect.isasyncgenfunction(consume), Delivery.__name__)\n"
    )
    assert run(code).split() == ["True", "Delivery"]
