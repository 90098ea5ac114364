"""One store's virtual shards as its scripts see them: how many, their keys, the calls on them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwheel.errors import NotReplicated
from tickwheel.stores.redis.keys import ShardKeys, shard_of
from tickwheel.stores.redis.scripts import Arg, ScriptCall, Scripts


class Shards:
    """The shards of one prefix, and the scripts that run on one shard's keys each call.

    `asked` is the count the store was opened with (None: the prefix's recorded one); the
    store checks it against the record (`layout.py`) and calls `learn` before its first call.
    """

    count: int

    def __init__(self, scripts: Scripts, prefix: str, asked: int | None) -> None:
        self.asked = asked
        self._scripts = scripts
        self._prefix = prefix
        if asked is not None:
            self.learn(asked)

    def learn(self, count: int) -> None:
        """Take the prefix's shard count."""
        self.count = count
        self._keys = [ShardKeys.of(self._prefix, shard) for shard in range(count)]
        self._fixed = [keys.fixed for keys in self._keys]
        self._with_schedules = [keys.fixed + keys.schedules for keys in self._keys]

    def keys(self, shard: int) -> ShardKeys:
        return self._keys[shard]

    def of(self, timer_id: str) -> int:
        """Return the shard `timer_id` lives in."""
        return shard_of(timer_id, self.count)

    def call(self, name: str, shard: int, args: Sequence[Arg]) -> ScriptCall:
        """One call of script `name` on `shard`'s fixed keys, for `run_many`."""
        return (name, self._fixed[shard], args)

    def schedule_call(self, name: str, shard: int, args: Sequence[Arg]) -> ScriptCall:
        """One call of a schedule script on `shard`: its fixed keys, then its schedule keys."""
        return (name, self._with_schedules[shard], args)

    async def run_many(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Run calls in one pipeline; return their replies in order."""
        return await self._scripts.run_many(calls)

    async def run(self, name: str, timer_id: str, args: Sequence[Arg]) -> Any:
        """Run script `name` on the shard of `timer_id`; return its reply."""
        return await self._scripts.run(name, self._fixed[self.of(timer_id)], args)

    async def step(self, name: str, timer_id: str, *args: Arg) -> bool:
        """Run a one-timer transition script; return whether it applied."""
        try:
            reply: int = await self.run(name, timer_id, (timer_id, *args))
        except NotReplicated as error:
            raise error.of((timer_id,)) from None
        return reply == 1
