"""IPv6 addresses that carry an IPv4 address are judged by the address they carry.

``::ffff:0:a.b.c.d`` (IPv4-translated, SIIT) reaches a.b.c.d through a translator as
``::ffff:a.b.c.d`` (IPv4-mapped) does on a dual-stack host; both are refused when what they
carry is loopback, private or link-local: when a timer is created, and when it fires, spelled
in the URL or answered by DNS for a name.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

import httpx
import pytest

from tickwheel.callbacks.guard import PrivateAddressRefused
from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.httpclient import HttpClient
from tickwheel.callbacks.resolver import AddressInfo
from tickwheel.engine.outcome import Outcome, Verdict
from tickwheel.model import Callback, Timer
from tickwheel.urls import parse_url

CARRYING_PRIVATE = [
    "::ffff:0:127.0.0.1",  # IPv4-translated loopback
    "::ffff:0:a9fe:a9fe",  # IPv4-translated cloud metadata (169.254.169.254)
    "::ffff:0:10.0.0.1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo: refused whatever it carries
]


@pytest.mark.parametrize("address", CARRYING_PRIVATE)
async def test_creating_a_timer_for_an_address_carrying_a_private_one_is_refused(
    client: httpx.AsyncClient, address: str
) -> None:
    body = {"delay": 60, "callback": {"url": f"http://[{address}]:8080/hook"}}
    response = await client.post("/v1/timers", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "callback.url"


@pytest.mark.parametrize("address", CARRYING_PRIVATE)
async def test_firing_at_an_address_carrying_a_private_one_is_refused(address: str) -> None:
    url = f"http://[{address}]:8080/hook"
    target = HttpTarget()
    try:
        outcome = await target.fire(Timer(id="t-1", due_ms=0, callback=Callback(url=url)), 1)
    finally:
        await target.close()
    host = parse_url(url).host  # as the request would name it
    assert outcome == Outcome(Verdict.KILL, f"refused: {host} is a private address")


async def test_a_name_resolving_to_an_ipv4_translated_private_address_is_refused() -> None:
    async def resolve(_: str) -> Sequence[AddressInfo]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::ffff:0:a9fe:a9fe", 80, 0, 0))]

    client = HttpClient(allow_private=False, max_connections=4, resolve=resolve)
    try:
        with pytest.raises(PrivateAddressRefused, match=r"^refused: metadata\.example resolves"):
            await client.request(("http", "metadata.example", 80), b"GET / HTTP/1.1\r\n\r\n", 5.0)
    finally:
        client.close()
