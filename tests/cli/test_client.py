"""`tickwheel.client` against a real ``tickwheel serve`` on a SQLite file: the verbs, the errors
as `tickwheel.errors` kinds, and creates sent again after a connection lost mid-answer."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tickwheel.client import AsyncClient, Client
from tickwheel.errors import (
    AccessDenied,
    Conflict,
    NotFound,
    RequestInvalid,
    ServiceError,
    ServiceUnreachable,
    TickwheelError,
)

from .cli_support import Service, sqlite_service

pytestmark = pytest.mark.timeout(120)

service = sqlite_service("client")


@pytest.fixture
def client(service: Service) -> Iterator[Client]:
    with Client(service.url) as opened:
        yield opened


def test_add_get_ls_cancel(client: Client, service: Service) -> None:
    url = f"{service.url}/healthz"
    timer = client.add(url=url, delay=3600, id="py-a", headers={"X-Key": "abc"}, body={"n": 42})
    assert (timer.id, timer.state, timer.url, timer.attempt) == ("py-a", "scheduled", url, 0)
    assert timer.json["callback"]["headers"]["X-Key"] == "***"  # values are not shown
    assert timedelta(minutes=59) < timer.due - datetime.now(UTC) <= timedelta(hours=1)
    assert client.add(url=url, delay=3600, id="py-a", headers={"X-Key": "abc"}, body={"n": 42}) == (
        timer
    )  # the same spec again: the timer already there
    assert client.get("py-a") == timer
    assert "py-a" in {found.id for found in client.ls(state="scheduled", limit=1000).items}
    client.cancel("py-a")
    with pytest.raises(NotFound) as missing:
        client.get("py-a")
    assert (missing.value.status, missing.value.code, missing.value.field) == (
        404,
        "not_found",
        "id",
    )
    assert isinstance(missing.value, LookupError)
    with pytest.raises(NotFound):
        client.cancel("py-a")


def test_an_id_is_chosen_when_none_is_given_and_due_takes_a_datetime(client: Client) -> None:
    due = datetime.now(UTC) + timedelta(hours=2)
    timer = client.add(due=due, queue="py-ids", payload={"job": 1})
    assert len(timer.id) == 26
    assert (timer.queue, timer.payload, timer.url) == ("py-ids", {"job": 1}, None)
    assert abs(timer.due - due) < timedelta(milliseconds=1)
    with pytest.raises(ValueError, match="time zone"):
        client.add(due=datetime.now(), queue="py-ids")  # naive: the mistake refused
    with pytest.raises(ValueError, match="exactly one of delay"):
        client.add(queue="py-ids")
    with pytest.raises(TypeError, match="colour"):
        client.add(delay=1, queue="py-ids", colour="red")
    client.cancel(timer.id)


def test_api_errors_are_tickwheel_errors(client: Client, service: Service) -> None:
    url = f"{service.url}/healthz"
    with pytest.raises(RequestInvalid) as invalid:
        client.add(url="ftp://example.com/x", delay=1)
    assert (invalid.value.status, invalid.value.field) == (422, "callback.url")
    assert isinstance(invalid.value, ValueError)
    assert invalid.value.bad_input
    client.add(url=url, delay=3600, id="py-clash")
    with pytest.raises(Conflict) as clash:
        client.add(url=url, delay=7200, id="py-clash")
    assert str(clash.value).endswith("(id) [HTTP 409 conflict]")
    replaced = client.add(url=url, delay=7200, id="py-clash", replace=True, retry={"timeout": 5})
    assert replaced.json["retry"]["timeout"] == 5.0
    client.cancel("py-clash")
    with pytest.raises(ServiceUnreachable, match="connection refused"):
        Client(_free_api(), retries=0).stats()


def test_dead_letters_replay_and_stats(client: Client, service: Service) -> None:
    added = client.add(url=f"{service.url}/no-such-hook", delay=0, id="py-dead", queue="py-dead")
    deadline = time.monotonic() + 15
    while "py-dead" not in {timer.id for timer in client.dead(limit=1000).items}:
        assert time.monotonic() < deadline, "never dead-lettered"
        time.sleep(0.05)
    assert client.get(added.id).last_error is not None
    assert client.replay("py-dead").state == "scheduled"
    stats = client.stats()
    assert set(stats.counts) == {"scheduled", "leased", "paused", "done", "dead"}


def test_a_token_is_sent_and_a_wrong_one_refused(tmp_path: str) -> None:
    secured = Service(tmp_path, "--store", "memory://", "--token", "s3cret", "--no-worker")
    try:
        with Client(secured.url, token="s3cret") as good:
            assert good.stats().counts["scheduled"] == 0
        with Client(secured.url, token="wrong") as bad, pytest.raises(AccessDenied) as refused:
            bad.stats()
        assert (refused.value.status, isinstance(refused.value, PermissionError)) == (401, True)
    finally:
        secured.stop()
    with pytest.raises(ValueError, match="printable"):
        Client(secured.url, token="two words")
    with pytest.raises(ValueError, match="credentials"):
        Client("http://user:pw@127.0.0.1:1")


async def test_the_async_client_has_the_same_verbs(service: Service) -> None:
    url = f"{service.url}/healthz"
    async with AsyncClient(service.url) as client:
        timer = await client.add(url=url, delay=3600, id="py-async", queue="py-async")
        assert (await client.pause(timer.id)).state == "paused"
        assert (await client.resume(timer.id)).state == "scheduled"
        moved = await client.reschedule(timer.id, delay=7200)
        assert moved.due > timer.due
        listed = await client.ls(queue="py-async")
        assert [found.id for found in listed.items] == ["py-async"]
        assert listed.cursor is None
        queue = await client.pause_queue("py-async")
        assert (queue.name, queue.paused, queue.counts["scheduled"]) == ("py-async", True, 1)
        assert not (await client.resume_queue("py-async")).paused
        limited = await client.set_queue_limit("py-async", rate=5, concurrency=2)
        assert limited.limit is not None
        assert (limited.limit.rate, limited.limit.concurrency) == (5, 2)
        await client.remove_queue_limit("py-async")
        host = await client.set_limit("py-async.example", rate=10, burst=3)
        assert (host.host, host.limit.rate, host.limit.burst) == ("py-async.example", 10, 3)
        assert "py-async.example" in {found.host for found in await client.limits()}
        await client.remove_limit("py-async.example")
        with pytest.raises(NotFound):
            await client.remove_limit("py-async.example")
        await client.cancel(timer.id)
        with pytest.raises(ServiceError) as gone:
            await client.get(timer.id)
        assert gone.value.status == 404


async def test_schedules(service: Service) -> None:
    async with AsyncClient(service.url) as client:
        schedule = await client.add_schedule(
            url=f"{service.url}/healthz", cron="0 9 * * 1-5", id="py-s", timezone="Europe/Berlin"
        )
        assert (schedule.id, schedule.cron, schedule.paused) == ("py-s", "0 9 * * 1-5", False)
        assert len(schedule.upcoming) == 5
        assert (await client.pause_schedule("py-s")).paused
        assert not (await client.resume_schedule("py-s")).paused
        assert "py-s" in {found.id for found in (await client.schedules()).items}
        assert (await client.get_schedule("py-s")).next_run == schedule.next_run
        [pending] = await client.schedule_runs("py-s")
        assert (pending.nominal, pending.state) == (schedule.next_run, "scheduled")
        await client.remove_schedule("py-s")
        with pytest.raises(NotFound):
            await client.get_schedule("py-s")
    with Client(service.url) as blocking:
        every = blocking.add_schedule(every=60, payload={"tick": True}, queue="py-every")
        assert every.every == 60
        blocking.remove_schedule(every.id)


# --- creates sent again --------------------------------------------------------------------------


class _Proxy(socketserver.ThreadingTCPServer):
    """Relays connections to the service; the first `drops` requests reach it, but their answers
    are dropped with the connection (the client cannot know whether they arrived), and later
    requests wait `delay_s` before they are relayed."""

    daemon_threads = True

    def __init__(self, upstream: tuple[str, int], drops: int, delay_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Relay)
        self.upstream = upstream
        self.drops = drops
        self.delay_s = delay_s
        self.requests = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Relay(socketserver.BaseRequestHandler):
    server: _Proxy

    def handle(self) -> None:
        with socket.create_connection(self.server.upstream) as upstream:
            while request := _read(self.request, first_s=10):
                with self.server.lock:
                    self.server.requests += 1
                    drop = self.server.requests <= self.server.drops
                if not drop:
                    time.sleep(self.server.delay_s)
                upstream.sendall(request)
                answer = _read(upstream, first_s=10)
                if drop:
                    return  # closes the connection: the answer is lost
                self.request.sendall(answer)


def _read(sock: socket.socket, first_s: float) -> bytes:
    """What `sock` sends until it pauses for 0.2 s (or closes)."""
    sock.settimeout(first_s)
    try:
        data = sock.recv(65536)
        sock.settimeout(0.2)
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    except OSError:
        return b""
    return data


@pytest.fixture
def proxy(service: Service, request: pytest.FixtureRequest) -> Iterator[_Proxy]:
    host, port = service.url.removeprefix("http://").rsplit(":", 1)
    relay = _Proxy((host, int(port)), drops=1, delay_s=request.param)
    thread = threading.Thread(target=relay.serve_forever, daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        relay.shutdown()
        relay.server_close()
        thread.join(timeout=5)


# 0 s: the second try repeats the spec within a second, found as is (200); 1.5 s: a `delay`
# repeated later is another spec (409), and the timer of the id chosen here is read back
@pytest.mark.parametrize("proxy", [0.0, 1.5], indirect=True)
def test_a_create_whose_answer_was_lost_is_made_once(proxy: _Proxy, service: Service) -> None:
    queue = f"py-lost-{proxy.delay_s:g}".replace(".", "-")
    with Client(proxy.url) as client:
        timer = client.add(url=f"{service.url}/healthz", delay=3600, queue=queue)
    with Client(service.url) as direct:
        stored = direct.ls(queue=queue).items
    assert proxy.requests >= 2  # the lost one and the one that was answered
    assert [found.id for found in stored] == [timer.id]
    assert timer.state == "scheduled"


@pytest.mark.parametrize("proxy", [0.0], indirect=True)
def test_a_request_that_is_not_idempotent_is_not_sent_again(proxy: _Proxy) -> None:
    with Client(proxy.url) as client, pytest.raises(TickwheelError) as lost:
        client.replay("py-never-dead")
    assert isinstance(lost.value, ServiceUnreachable)
    assert proxy.requests == 1


def _free_api() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize("proxy", [1.5], indirect=True)
async def test_the_async_client_makes_a_lost_create_once_too(
    proxy: _Proxy, service: Service
) -> None:
    async with AsyncClient(proxy.url) as client:
        timer = await client.add(url=f"{service.url}/healthz", delay=3600, queue="py-lost-async")
    async with AsyncClient(service.url) as direct:
        stored = (await direct.ls(queue="py-lost-async")).items
    assert proxy.requests >= 2
    assert [found.id for found in stored] == [timer.id]
