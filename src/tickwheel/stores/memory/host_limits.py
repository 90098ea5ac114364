"""The limits on callbacks to each host kept by a `MemoryStore`."""

from __future__ import annotations

from tickwheel.errors import CapReached
from tickwheel.stores.base import Limit, LimitPage
from tickwheel.stores.memory.heaps import MemoryHeaps


class MemoryHostLimits(MemoryHeaps):
    """The host-limit calls of `MemoryStore`."""

    async def limits(self) -> dict[str, Limit]:
        self._open()
        return dict(self._limits)

    async def _list_limits(self, limit: int, cursor: str | None) -> LimitPage:
        self._open()
        hosts = sorted(h for h in self._limits if cursor is None or h > cursor)
        page = [(host, self._limits[host]) for host in hosts[:limit]]
        return LimitPage(page, hosts[limit - 1] if len(hosts) > limit else None)

    async def _set_limit(self, host: str, limit: Limit) -> None:
        self._open()
        cap = self.settings.max_limits
        if host not in self._limits and len(self._limits) >= cap:
            raise CapReached("limits", cap, "host")
        self._limits[host] = limit
        self._limits_version += 1

    async def delete_limit(self, host: str) -> bool:
        self._open()
        self._limits_version += 1
        return self._limits.pop(host, None) is not None
