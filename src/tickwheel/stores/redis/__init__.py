"""Timers in Redis or Redis Cluster: virtual shards holding a two-level wheel, Lua per step.

Needs ``redis`` (``pip install 'redis[hiredis]>=5'``); `tickwheel.stores` does not import this
package, so the other stores work without it.
"""

from tickwheel.stores.redis.keys import ShardKeys, shard_of
from tickwheel.stores.redis.store import RedisStore

__all__ = ["RedisStore", "ShardKeys", "shard_of"]
