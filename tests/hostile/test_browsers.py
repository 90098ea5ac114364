"""A web page the operator visits cannot use the service: a DNS-rebound Host gets 421, and a
cross-site form POST is refused 403 (issue 23), token or not; the service's own pages and
clients without browser headers keep working."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli.cli_support import Service
from service.conftest import ClientFactory

from tickwheel.model import Timer
from tickwheel.service.origin import Origins, host_name
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.memory import MemoryStore

EVIL = "https://evil.example"
# what a <form method=post> on another site sends: no JSON, no preflight
FORM = {"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded"}
TOKEN = "browser-token"


async def _dead_letter(store: MemoryStore, timer_id: str, queue: str) -> None:
    now_ms = store.now_ms()
    await store.add(Timer(id=timer_id, due_ms=now_ms, queue=queue, payload={"n": 1}))
    [lease] = await store.claim(queue, now_ms, 1, 60_000)
    await store.kill(lease, "gave up")


async def test_a_cross_site_form_cannot_pause_a_queue(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    response = await client.post("/v1/queues/payments/pause", headers=FORM)
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "cross_site"
    assert "payments" not in await store.queue_settings()


async def test_a_cross_site_form_cannot_pause_a_timer(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    await store.add(Timer(id="t1", due_ms=store.now_ms() + 60_000, payload={"n": 1}))
    response = await client.post("/v1/timers/t1/pause", headers=FORM)
    assert response.status_code == 403, response.text
    timer = await store.get("t1")
    assert timer is not None
    assert timer.state.value == "scheduled"


async def test_a_cross_site_form_cannot_replay_dead_letters(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    await _dead_letter(store, "d1", "payments")
    for path in ("/v1/dead/replay?queue=payments", "/v1/dead/d1/replay"):
        response = await client.post(path, headers=FORM)
        assert response.status_code == 403, response.text
    timer = await store.get("d1")
    assert timer is not None
    assert timer.state.value == "dead"


async def test_a_cross_site_request_is_refused_even_with_the_token(
    make_client: ClientFactory, store: MemoryStore
) -> None:
    async with make_client(token=TOKEN) as client:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        response = await client.post("/v1/queues/q/pause", headers=bearer | FORM)
        assert response.status_code == 403, response.text
        same_origin = bearer | {"Origin": "http://localhost"}
        response = await client.post("/v1/queues/q/pause", headers=same_origin)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        # a page on localhost:3000 is the same site as the service on localhost:8080
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Origin": "http://localhost:3000"},
        {"Origin": "http://attacker.localhost"},
        {"Origin": "http://127.0.0.1"},  # another loopback name is another origin
        {"Origin": "chrome-extension://abc"},
    ],
)
async def test_every_state_change_from_another_origin_is_refused(
    client: httpx.AsyncClient, store: MemoryStore, headers: dict[str, str]
) -> None:
    await store.add(Timer(id="t1", due_ms=store.now_ms() + 60_000, payload={"n": 1}))
    changes = [
        client.post("/v1/timers", json={"id": "t2", "delay": 60, "payload": {}}, headers=headers),
        client.put("/v1/limits/example.com", json={"rate": 1}, headers=headers),
        client.delete("/v1/timers/t1", headers=headers),
        client.put("/v1/queues/q", json={"paused": True}, headers=headers),
    ]
    for change in changes:
        response = await change
        assert response.status_code == 403, response.text
    assert await store.get("t2") is None
    assert await store.get("t1") is not None
    assert await store.limits() == {}


async def test_a_page_may_read_but_the_browser_keeps_the_answer_from_it(
    client: httpx.AsyncClient,
) -> None:
    # GET changes nothing, and without CORS headers the browser shows the page no answer
    response = await client.get("/v1/queues", headers={"Origin": EVIL})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_the_services_own_pages_and_plain_clients_change_state(
    client: httpx.AsyncClient,
) -> None:
    own = [
        {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},  # typed in the address bar
        {},  # curl, the CLI, a program: no browser headers
    ]
    for headers in own:
        response = await client.post("/v1/queues/q/pause", headers=headers)
        assert response.status_code == 200, (headers, response.text)


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"]
)
async def test_an_empty_form_post_is_not_json(
    client: httpx.AsyncClient, store: MemoryStore, content_type: str
) -> None:
    response = await client.post("/v1/queues/q/pause", headers={"Content-Type": content_type})
    assert response.status_code == 415, response.text
    assert "q" not in await store.queue_settings()


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "127.0.0.2"])
async def test_a_dns_rebound_host_gets_no_data(
    client: httpx.AsyncClient, store: MemoryStore, host: str
) -> None:
    await store.add(Timer(id="secret", due_ms=store.now_ms() + 60_000, payload={"card": 1}))
    for path in ("/v1/timers", "/v1/timers/secret", "/v1/queues", "/metrics", "/dashboard"):
        response = await client.get(path, headers={"Host": host})
        assert response.status_code == 421, (path, response.text)
        assert response.json()["error"]["field"] == "Host"
        assert "secret" not in response.text


async def test_a_missing_host_is_a_bad_request(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/timers", headers={"Host": ""})
    assert response.status_code == 400, response.text


async def test_healthz_answers_any_host_for_a_load_balancer(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz", headers={"Host": "10.0.0.5:8080"})
    assert response.status_code == 200, response.text


async def test_allowed_hosts_add_names_and_star_allows_any(make_client: ClientFactory) -> None:
    async with make_client(allowed_hosts=("tw.example.com",)) as client:
        response = await client.get("/v1/queues", headers={"Host": "TW.example.com:443"})
        assert response.status_code == 200, response.text
        response = await client.get("/v1/queues", headers={"Host": "other.example.com"})
        assert response.status_code == 421
        # the same origin under an allowed name may change state
        headers = {"Host": "tw.example.com", "Origin": "https://tw.example.com"}
        response = await client.post("/v1/queues/q/pause", headers=headers)
        assert response.status_code == 200, response.text
    async with make_client(allowed_hosts=("*",)) as client:
        response = await client.get("/v1/queues", headers={"Host": "anything.example"})
        assert response.status_code == 200, response.text
        # any Host, but still no cross-site state change
        response = await client.post("/v1/queues/q/pause", headers=FORM)
        assert response.status_code == 403


@pytest.mark.parametrize(
    ("bind", "served", "refused"),
    [
        ("127.0.0.1", ["localhost", "127.0.0.1:80", "[::1]:8080", "LOCALHOST."], ["127.0.0.2"]),
        ("0.0.0.0", ["localhost"], ["0.0.0.0", "10.0.0.5"]),
        ("::", ["[::1]"], ["[::]"]),
        ("10.0.0.5", ["10.0.0.5:8080"], ["10.0.0.6"]),
        ("fd00::1", ["[fd00::1]:8080", "[FD00::1]"], ["[fd00::2]"]),
    ],
)
def test_the_hosts_served_follow_the_bind_address(
    bind: str, served: list[str], refused: list[str]
) -> None:
    origins = Origins(bind)
    assert all(host_name(host) in origins.hosts for host in served)
    assert not any(host_name(host) in origins.hosts for host in refused)


@pytest.mark.parametrize(
    "value", ["http://tw.example.com", "tw.example.com/x", "a b", "", "tw.example.com:port"]
)
def test_allowed_hosts_refuse_what_is_not_a_host(value: str) -> None:
    with pytest.raises(ValueError, match="allowed_hosts"):
        ServiceSettings(allowed_hosts=(value,))


def test_allowed_hosts_come_from_the_environment() -> None:
    environ = {"TICKWHEEL_ALLOWED_HOSTS": " tw.example.com, ,10.0.0.5:8080"}
    settings = ServiceSettings.from_env(environ)
    assert settings.allowed_hosts == ("tw.example.com", "10.0.0.5:8080")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``tickwheel serve`` as ``make run`` starts it: loopback, no token."""
    directory = tmp_path_factory.mktemp("browsers")
    started = Service(directory, "--store", f"sqlite:///{directory}/t.db", "--no-worker")
    try:
        yield started
    finally:
        started.stop()


def test_make_run_is_safe_from_a_page_the_operator_visits(served: Service) -> None:
    assert served.url.startswith("http://127.0.0.1:")
    with httpx.Client(base_url=served.url, timeout=10) as client:
        made = client.post("/v1/timers", json={"id": "t1", "delay": 600, "payload": {}})
        assert made.status_code == 201, made.text
        for path in ("/v1/queues/default/pause", "/v1/timers/t1/pause", "/v1/dead/replay"):
            response = client.post(path, headers=FORM)
            assert response.status_code == 403, (path, response.text)
        rebound = client.get("/v1/timers/t1", headers={"Host": "attacker.example"})
        assert rebound.status_code == 421, rebound.text
        assert client.get("/v1/timers/t1").json()["state"] == "scheduled"
        assert client.get("/v1/queues/default").json()["paused"] is False


def test_serve_answers_the_allowed_hosts_it_is_given(tmp_path: Path) -> None:
    args = ("--store", "memory://", "--no-worker", "--allowed-hosts", "tw.example.com")
    started = Service(tmp_path, *args)
    try:
        with httpx.Client(base_url=started.url, timeout=10) as client:
            response = client.get("/v1/queues", headers={"Host": "tw.example.com"})
            assert response.status_code == 200, response.text
    finally:
        started.stop()
