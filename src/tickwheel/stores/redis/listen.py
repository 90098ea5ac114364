"""`Listener`: the one pub/sub subscription of a `RedisStore`, waking its `wait` callers.

Scripts PUBLISH the names of the queues they woke on ``<prefix>:wake``, separated by spaces
(see ``lib.lua``). Classic pub/sub is
broadcast to every node of a Cluster, so one connection to any node hears every shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

from redis.asyncio import RedisCluster
from redis.asyncio.client import PubSub
from redis.exceptions import RedisClusterException, RedisError

from tickwheel.stores.redis.scripts import Client
from tickwheel.stores.wake import Wakeups

POLL_S = 1.0  # longest read of the subscription, so a closed store's task ends soon
RECONNECT_S = 0.5  # pause before subscribing again after a connection error
YIELD_EVERY = 32
"""Messages heard between two turns given to the other tasks: reading a message already
buffered never suspends, so a flood of wakes (one per queue and shard of a large add) would
otherwise hold the event loop, and the timers due meanwhile, until it is all read."""


class Listener:
    """Subscribe on first use; on each message, wake the waiters of the queue it names."""

    def __init__(self, client: Client, channel: str) -> None:
        self.wakeups = Wakeups()
        self.subscribed = asyncio.Event()
        """Set while the subscription is confirmed: from then on every change is heard."""
        self._client = client
        self._channel = channel
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the subscription in the background, unless it runs already."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._listen(), name=f"tickwheel {self._channel}")

    async def close(self) -> None:
        task, self._task = self._task, None
        # redis-py drops a cancellation that lands while it connects: cancel until it ends
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.1)

    async def _listen(self) -> None:
        while True:
            try:
                await self._subscribed()
            except (RedisError, RedisClusterException, OSError):
                self.subscribed.clear()
                # a message may have been lost: let every waiter look again
                self.wakeups.notify_all()
                await asyncio.sleep(RECONNECT_S)

    async def _subscribed(self) -> None:
        pubsub: PubSub
        if isinstance(self._client, RedisCluster):
            # any node hears every PUBLISH; naming one skips redis-py's slot lookup
            await self._client.initialize()
            pubsub = self._client.pubsub(node=random.choice(self._client.get_nodes()))
        else:
            pubsub = self._client.pubsub()
        try:
            await pubsub.subscribe(self._channel)
            while await pubsub.get_message(timeout=POLL_S) is None:
                pass  # the first message is the subscription's confirmation
            # changes made before the subscription took effect were not heard
            self.subscribed.set()
            self.wakeups.notify_all()
            heard = 0
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=POLL_S)
                if message is not None and message["type"] == "message":
                    for queue in message["data"].decode().split(" "):
                        self.wakeups.notify(queue)
                    heard += 1
                    if heard % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
        finally:
            with contextlib.suppress(RedisError, RedisClusterException, OSError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
