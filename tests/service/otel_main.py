"""Run in a fresh interpreter by test_otel.py: an app and a worker over one memory store, with
OpenTelemetry's SDK and its in-memory exporter as the global tracer provider (which can be set
once a process, so the other tests never see it). One timer is created with a
``traceparent``; its receiver answers 503 and then 200. Prints the finished spans and the
callbacks' trace headers as JSON."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine.worker import Worker
from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.memory import MemoryStore
from tickwheel.testing.receiver import Received, Receiver, Reply

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _fail_first(received: Received) -> Reply:
    return Reply(503) if received.attempt == 1 else Reply()


def _span(span: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format(span.context.trace_id, "032x"),
        "span_id": format(span.context.span_id, "016x"),
        "parent": None if span.parent is None else format(span.parent.span_id, "016x"),
        "attributes": dict(span.attributes),
        "links": [format(link.context.trace_id, "032x") for link in span.links],
        "error": span.status.status_code.name == "ERROR",
    }


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    store = MemoryStore()
    app = create_app(ServiceSettings(store_url="memory://", allow_private_targets=True), store)
    worker = Worker(store, HttpTarget(HttpSettings(allow_private_targets=True)))
    running = asyncio.create_task(worker.run())
    async with Receiver(respond=_fail_first) as receiver:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            body = {
                "id": "traced",
                "delay": 0.1,
                "callback": {"url": f"{receiver.url}/hook?token=secret"},
                "retry": {"min_backoff": 0, "max_backoff": 0},
            }
            answer = await client.post(
                "/v1/timers", json=body, headers={"traceparent": PARENT, "tracestate": "a=1"}
            )
            assert answer.status_code == 201, answer.text
        await receiver.wait_for(2, 20)
        await asyncio.sleep(0.2)  # the second attempt's settle span ends after its answer
        worker.stop()
        await running
    headers = [
        {"traceparent": r.headers["traceparent"], "tracestate": r.headers.get("tracestate")}
        for r in receiver.received
    ]
    spans = [_span(span) for span in exporter.get_finished_spans()]
    print(json.dumps({"spans": spans, "callbacks": headers}))


if __name__ == "__main__":
    asyncio.run(main())
