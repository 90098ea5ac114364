"""Engine fixtures: a real HTTP receiver on loopback (`receiver`, `make_receiver`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tickwheel.service.receiver import Receiver

MakeReceiver = Callable[..., Awaitable[Receiver]]


@pytest.fixture
async def make_receiver() -> AsyncIterator[MakeReceiver]:
    """Start receivers with `Receiver(**kwargs)`; all are stopped after the test."""
    started: list[Receiver] = []

    async def make(**kwargs: Any) -> Receiver:
        receiver = Receiver(**kwargs)
        await receiver.start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        await receiver.stop()


@pytest.fixture
async def receiver(make_receiver: MakeReceiver) -> Receiver:
    """A started receiver on a free loopback port: no secret, always 200."""
    return await make_receiver()
