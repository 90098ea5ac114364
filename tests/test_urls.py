"""`parse_url`: one reading of a callback URL for validation, the SSRF guard and the request.

The expected request targets and hosts are what yarl (aiohttp's URL parser, which sent
tickwheel's callbacks before) produced for the same URLs, so requests stay byte for byte.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tickwheel.errors import InvalidTimer
from tickwheel.urls import CallbackUrl, InvalidUrl, parse_url


@pytest.mark.parametrize(
    ("url", "host", "port", "target", "host_header"),
    [
        ("https://example.com/hook", "example.com", 443, "/hook", "example.com"),
        ("HTTPS://Example.COM:443/Hook?Q=1#frag", "example.com", 443, "/Hook?Q=1", "example.com"),
        ("http://example.com:8080", "example.com", 8080, "/", "example.com:8080"),
        ("http://example.com?a=1", "example.com", 80, "/?a=1", "example.com"),
        ("http://example.com./x", "example.com.", 80, "/x", "example.com"),
        ("https://example.com.:8443/x", "example.com.", 8443, "/x", "example.com:8443"),
        (
            "http://bücher.example/ä ö?q=ü",
            "xn--bcher-kva.example",
            80,
            "/%C3%A4%20%C3%B6?q=%C3%BC",
            "xn--bcher-kva.example",
        ),
        ("http://faß.de/", "xn--fa-hia.de", 80, "/", "xn--fa-hia.de"),
        ("http://[2001:DB8::1]:80/x", "2001:db8::1", 80, "/x", "[2001:db8::1]"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1", 80, "/", "[::ffff:7f00:1]"),
        (
            "http://[fe80::1%25eth0]:8080/",
            "fe80::1%25eth0",
            8080,
            "/",
            "[fe80::1%25eth0]:8080",
        ),
        ("http://127.0.0.1:9000/a/./b/../c", "127.0.0.1", 9000, "/a/c", "127.0.0.1:9000"),
        ("http://h/%2e%2E/x/..", "h", 80, "/", "h"),
        ("http://h/a/b/%2e", "h", 80, "/a/b/", "h"),
        ("http://h/?", "h", 80, "/", "h"),
        ("http://h/#only", "h", 80, "/", "h"),
        ("http://h:/x", "h", 80, "/x", "h"),
        ("http://127.1/x", "127.1", 80, "/x", "127.1"),
    ],
)
def test_hosts_ports_and_targets_are_read_as_the_request_sends_them(
    url: str, host: str, port: int, target: str, host_header: str
) -> None:
    parsed = parse_url(url)
    assert (parsed.host, parsed.port, parsed.target, parsed.host_header) == (
        host,
        port,
        target,
        host_header,
    )


@pytest.mark.parametrize(
    ("raw", "target"),
    [
        # spaces and non-ASCII encoded, valid escapes kept in upper case, unreserved ones
        # decoded, a "%" that starts no escape encoded; in the query a space is "+"
        (
            "/a b/%7e%41%2F%2b%3D%zz%/é?x=a b&y=%2F%3d%26+%20",
            "/a%20b/~A%2F%2B=%25zz%25/%C3%A9?x=a+b&y=/%3D%26+%20",
        ),
        ('/[x]{y}|^`"<>\\', "/%5Bx%5D%7By%7D%7C%5E%60%22%3C%3E%5C"),
        ("/@:!$&'()*,;=?@:/?!$'()*,;", "/@:!$&'()*,;=?@:/?!$'()*,;"),
        ("/%E2%82%AC%e2%82%ac", "/%E2%82%AC%E2%82%AC"),
    ],
)
def test_paths_and_queries_are_requoted(raw: str, target: str) -> None:
    assert parse_url(f"http://h{raw}").target == target


@pytest.mark.parametrize(
    ("url", "is_ip"),
    [
        ("http://8.8.8.8/", True),
        ("http://[::1]/", True),
        ("http://1.2.3.4%x/", True),  # judged as the address before the "%"
        ("http://127.1/", False),  # a legacy spelling: the resolver decides what it is
        ("http://127.0.0.1./", False),
        ("http://example.com/", False),
    ],
)
def test_ip_literals_are_told_from_names(url: str, is_ip: bool) -> None:
    assert parse_url(url).is_ip is is_ip


def test_the_value_is_immutable_and_names_its_origin() -> None:
    parsed = parse_url("https://Example.com:8443/x")
    assert parsed == CallbackUrl(
        scheme="https",
        host="example.com",
        port=8443,
        target="/x",
        host_header="example.com:8443",
        is_ip=False,
    )
    assert parsed.origin == ("https", "example.com", 8443)
    with pytest.raises(AttributeError):
        parsed.host = "elsewhere.example"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("url", "message", "host"),
    [
        ("ftp://example.com/x", "scheme must be http or https", None),
        ("//example.com/x", "scheme must be http or https", None),
        ("https:///x", "has no host", None),
        ("https://user:pw@example.com/", "must not carry credentials", "example.com"),
        ("https://example.com:0/", "port must not be 0", "example.com"),
        ("https://example.com:65536/", "Port out of range", None),
        ("https://example.com:+80/", "Port could not be cast", None),
        ("https://[::1/", "Invalid IPv6 URL", None),
        ("https://a[::1]/", "Invalid IPv6 URL", None),
        ("https://[::1]x/", "Invalid IPv6 URL", None),
        ("https://[1.2.3.4]/", "IPv4 address cannot be in brackets", None),
        ("https://evil.com\\@good.com/", "backslash", None),
        ("https://a..b/", "not a valid domain name", "a..b"),
        ("https://" + "a" * 64 + ".com/", "not a valid domain name", "a" * 64 + ".com"),
        ("https://é" + "é" * 69 + ".example/", "not a valid domain name", "é" * 70 + ".example"),
        ("https://e\u200bvil.com/", "invisible character", "e\u200bvil.com"),
    ],
)
def test_urls_that_cannot_be_called_are_refused_naming_their_host(
    url: str, message: str, host: str | None
) -> None:
    with pytest.raises(InvalidUrl, match=r"^callback\.url: ") as refused:
        parse_url(url)
    assert message in str(refused.value)
    assert refused.value.host == host
    assert isinstance(refused.value, InvalidTimer)


def test_idna_is_imported_for_the_first_non_ascii_host_only() -> None:
    code = (
        "import sys\n"
        "from tickwheel.urls import parse_url\n"
        "parse_url('https://example.com/')\n"
        "print('idna' in sys.modules)\n"
        "parse_url('https://bücher.example/')\n"
        "print('idna' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["False", "True"]
