"""Who may take the client's connection slots: by address, and a reserve for prompt origins.

Ports and names cost an attacker nothing, addresses do: the origins of one address share a
cap until they show they answer promptly, and the last quarter of it is kept for first calls
(an origin's only request in flight), so a target new to the worker still gets its first call
through beside ports of its host whose calls hang. A quarter of all slots is kept for origins
proven prompt, so targets that hang on many addresses still leave room for targets that answer.
"""

from __future__ import annotations

import ipaddress

from tickwheel.callbacks.guard import keep_public
from tickwheel.callbacks.pool import Origin, Pool, PoolTimeout, Slots
from tickwheel.callbacks.resolver import Resolver

IPV6_PREFIX = 64  # one site's addresses: a /64 is what a single host or LAN is handed
PROVEN_FOR_S = 600.0  # a forgotten origin that was proven prompt is taken as still prompt this long
PROVEN_ORIGINS = 10_000  # origins remembered as proven prompt at most (the oldest go first)


def per_address(max_connections: int, max_per_host: int) -> int:
    """Return how many slots the origins of one address share until proven prompt: two
    origins' worth, so one origin that hangs cannot block the others of a shared host alone,
    and a host needs no more than one address to be held to that however many ports it opens."""
    return min(max_connections, 2 * max_per_host)


def reserve_of(max_connections: int) -> int:
    """Return how many of `max_connections` only origins proven prompt may take: a quarter."""
    return max_connections // 4


def kept_of_address(per_address: int) -> int:
    """Return how many of an address's share are kept for first calls (`Pool.probing`)."""
    return per_address // 4


def address_key(ip: str) -> str:
    """The key of the address an origin connects to: the IPv4 address, or the IPv6 /64."""
    address = ipaddress.ip_address(ip.partition("%")[0])
    if address.version == 4:
        return str(address)
    return str(ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False))


class Share:
    """`count` slots of which `kept` are only for callers that qualify: everyone takes the
    others first, so the kept ones are there for a qualifying caller when those are gone."""

    def __init__(self, count: int, kept: int) -> None:
        self.slots = Slots(count - kept)  # anyone's
        self.kept = Slots(kept)
        self._keeps = kept > 0

    async def take(self, qualifies: bool, wait_until: float, wait_s: float) -> Slots:
        """Take a slot, a kept one if the others are taken and the caller `qualifies`;
        return the `Slots` to give it back to.

        Raises:
            PoolTimeout: none came free by loop time `wait_until`.
        """
        shared = self.slots
        if shared.free > 0:
            shared.free -= 1
            return shared
        kept = self.kept
        # a qualifying caller waits for a kept slot: its holders are the ones that give back
        slots = kept if qualifies and self._keeps else shared
        if slots is kept and kept.free > 0:
            kept.free -= 1
        elif not await slots.take(wait_until):
            raise PoolTimeout(wait_s)
        return slots


class AddressShare(Share):
    """The slots that the origins of one address (every port, every name) take together
    while none of them is proven prompt; a quarter kept for first calls."""

    def __init__(self, most: int) -> None:
        super().__init__(most, kept_of_address(most))
        self.users = 0


class Shares:
    """The global slots (a reserve for origins proven prompt among them), the address shares,
    and the origins proven prompt whose pools were dropped."""

    def __init__(
        self, max_connections: int, max_per_host: int, resolver: Resolver, *, allow_private: bool
    ) -> None:
        self.connections = Share(max_connections, reserve_of(max_connections))
        self._per_address = per_address(max_connections, max_per_host)
        self._addresses: dict[str, AddressShare] = {}
        self._resolver = resolver
        self._allow_private = allow_private
        # loop time until which a dropped origin still counts as proven prompt
        self._proven: dict[Origin, float] = {}

    async def address(self, pool: Pool, deadline: float) -> AddressShare:
        """The share of the address `pool`'s origin connects to, counted as one more user
        until `leave`; the lookup is cached, so only an origin's first request in a while
        waits for it (until loop time `deadline` at most)."""
        host, port = pool.origin[1:]
        found = await self._resolver.resolve(host, port, deadline)
        addresses = found if self._allow_private else keep_public(host, found)
        key = address_key(addresses[0][4][0]) if addresses else host
        share = self._addresses.get(key)
        if share is None:
            share = self._addresses[key] = AddressShare(self._per_address)
        share.users += 1
        return share

    def recall(self, origin: Origin, now: float) -> bool:
        """Whether a new pool of `origin` starts proven prompt (its last one was, lately)."""
        return self._proven.pop(origin, 0.0) > now

    def forget(self, pool: Pool, now: float) -> None:
        """Note that `pool` is dropped, remembering for a while whether it was proven; drop
        the address shares nobody uses."""
        if pool.proven:
            proven = self._proven
            if len(proven) >= PROVEN_ORIGINS:
                for name in [name for name, until in proven.items() if until <= now]:
                    del proven[name]
                if len(proven) >= PROVEN_ORIGINS:
                    del proven[next(iter(proven))]  # the one remembered longest ago
            proven[pool.origin] = now + PROVEN_FOR_S

    def sweep(self) -> None:
        """Drop the address shares nobody uses."""
        for key, share in list(self._addresses.items()):
            if not share.users:
                del self._addresses[key]
