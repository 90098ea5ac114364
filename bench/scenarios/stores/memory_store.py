"""MemoryStore, the in-process reference: schedule and claim + ack rates, claim latency at 10k."""

from __future__ import annotations

from harness.report import progress

from scenarios.stores.context import StoreBench
from scenarios.stores.inputs import SMALL
from scenarios.stores.measuring import add_each, claim_ack
from tickwheel.stores import MemoryStore


async def memory_phases(bench: StoreBench) -> None:
    """Measure MemoryStore: one-by-one adds, claim + ack, and latency at 10k pending."""
    s, inputs = bench.sizes, bench.inputs
    store = MemoryStore()
    label = "MemoryStore.add (reference), one at a time"
    progress(f"memory schedule ({s.schedule:,})")
    async with bench.probe(label, s.schedule, False) as probe:
        await add_each(store, inputs.far[: s.schedule], 1)
    bench.results.schedule[label] = probe.measured

    store = MemoryStore()
    await add_each(store, inputs.due[: s.claim], 1)
    progress(f"memory claim+ack ({s.claim:,})")
    async with bench.probe("MemoryStore claim+ack", s.claim, False) as probe:
        probe.count = await claim_ack(store, probe)
    bench.results.claim["MemoryStore"] = probe.measured

    store = MemoryStore()  # at 10k only: at N only the fill would take time (a heap)
    await add_each(store, inputs.far[:SMALL], 1)

    async def add_due() -> None:
        await add_each(store, bench.due_for_latency(), 1)

    await bench.latency("MemoryStore", {SMALL: store}, add_due)
