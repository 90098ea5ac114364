"""The SSRF guard: which addresses and callback URLs tickwheel refuses to call."""

from __future__ import annotations

import pytest

from tickwheel.callbacks.guard import check_target_url, is_legacy_ipv4, is_public_address
from tickwheel.errors import InvalidTimer

PUBLIC = [
    "8.8.8.8",
    "93.184.215.14",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "2a00:1450:4001:82b::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "::ffff:0:8.8.8.8",  # IPv4-translated (SIIT) 8.8.8.8
    "2002:808:808::1",  # 6to4 around 8.8.8.8
]

PRIVATE = [
    "127.0.0.1",
    "127.255.255.254",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "0.0.0.0",
    "0.1.2.3",
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "100.127.255.254",
    "169.254.169.254",  # cloud metadata
    "169.254.0.1",
    "192.0.0.1",
    "192.0.2.1",
    "198.18.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "224.0.0.1",  # multicast
    "::",
    "::1",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "fd00:ec2::254",  # AWS metadata over IPv6
    "fec0::1",  # site-local
    "ff02::1",
    "2001:db8::1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:7f00:1",
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "::127.0.0.1",  # IPv4-compatible
    "2002:7f00:1::",  # 6to4 around 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 around 169.254.169.254
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a00:1",
    "64:ff9b:1::1",  # local-use NAT64
    "64:ff9b:1::808:808",
    "::ffff:0:127.0.0.1",  # IPv4-translated (SIIT, ::ffff:0:0:0/96)
    "::ffff:0:7f00:1",
    "::ffff:0:169.254.169.254",
    "::ffff:0:10.0.0.1",
    "::ffff:0:0.0.0.0",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo, whatever it embeds
    "2001::808:808",
]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert is_public_address(address)


@pytest.mark.parametrize("address", PRIVATE)
def test_private_loopback_link_local_and_reserved_addresses_are_refused(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize("name", ["example.com", "localhost", "", "127.1", "[::1]"])
def test_names_are_not_addresses(name: str) -> None:
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
        is_public_address(name)


@pytest.mark.parametrize("host", ["127.1", "0x7f.0.0.1", "2130706433", "017700000001", "10.1"])
def test_legacy_ipv4_forms_are_recognised(host: str) -> None:
    assert is_legacy_ipv4(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "example.com", "cafe.be", "1.2.3.4.5", "::1"])
def test_dotted_quads_and_names_are_not_legacy_forms(host: str) -> None:
    assert not is_legacy_ipv4(host)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "http://93.184.215.14:8080/x",
        "https://[2606:4700:4700::1111]/x",
        "https://api.internal-tools.com/x",
        "https://localhost.example.com/x",
    ],
)
def test_public_urls_pass(url: str) -> None:
    check_target_url(url, allow_private=False)


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/x",
        "http://LOCALHOST./x",
        "http://app.localhost:8000/x",
        "http://printer.local/x",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://box.localdomain/x",
        "http://127.0.0.1:9000/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://[::ffff:0:127.0.0.1]/x",
        "http://[::ffff:0:a9fe:a9fe]/latest/meta-data/",
        "http://[fd00:ec2::254]/x",
        "http://0.0.0.0/x",
        "http://100.64.1.1/x",
        "http://127.1/x",
        "http://2130706433/x",
        "http://0x7f000001/x",
    ],
)
def test_private_and_local_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidTimer, match=r"callback\.url") as raised:
        check_target_url(url, allow_private=False)
    assert "TICKWHEEL_ALLOW_PRIVATE_TARGETS" in str(raised.value)


def test_private_urls_pass_when_allowed() -> None:
    check_target_url("http://localhost:9000/x", allow_private=True)
    check_target_url("http://169.254.169.254/", allow_private=True)
