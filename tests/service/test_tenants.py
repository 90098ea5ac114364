"""Tenants (``serve --tokens FILE``) against the app over memory and SQLite stores: each token
sees and touches only its queues, roles decide what it may change, quotas refuse with 429 and
write nothing; the tokens file is checked field by field and its secrets never shown."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwheel.errors import InvalidArgument
from tickwheel.model import State, Timer
from tickwheel.service.quotas import QuotaExceeded, Quotas
from tickwheel.service.settings import ServiceSettings
from tickwheel.service.tenants import Tenants, load_tenants, parse_tenants
from tickwheel.stores.base import Store
from tickwheel.stores.redis import RedisStore

from .conftest import serve
from .test_api import timer

BILLING = "billing-token-0123456789"
SHIPPING = "shipping-token-0123456789"
READER = "reader-token-0123456789ab"
ADMIN = "admin-token-0123456789abc"
PLAIN = "plain-admin-token"

FILE = f"""
[[token]]
name = "billing"
token = "{BILLING}"
queues = ["billing-*"]
role = "write"

[[token]]
name = "shipping"
token = "{SHIPPING}"
queues = ["shipping", "returns-?"]
role = "write"

[[token]]
name = "reader"
token = "{READER}"
queues = ["billing-*"]
role = "read"

[[token]]
name = "ops"
token = "{ADMIN}"
queues = ["*"]
role = "admin"
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def api(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app with the four tenants of `FILE` and ``--token PLAIN``."""
    async with serve(store, tenants=parse_tenants(FILE), token=PLAIN) as client:
        yield client


def quota_client(store: Store, **quotas: Any) -> Any:
    fields = "\n".join(f"{name} = {value}" for name, value in quotas.items())
    text = f"""
[[token]]
name = "billing"
token = "{BILLING}"
queues = ["billing-*"]
role = "write"
{fields}
"""
    return serve(store, tenants=parse_tenants(text))


# --- who sees what ------------------------------------------------------------------------------


async def test_a_tenant_sees_only_its_queues_timers(api: httpx.AsyncClient, store: Store) -> None:
    made = await api.post(
        "/v1/timers", json=timer(id="b1", queue="billing-eu"), headers=bearer(BILLING)
    )
    assert made.status_code == 201
    made = await api.post(
        "/v1/timers", json=timer(id="s1", queue="shipping"), headers=bearer(SHIPPING)
    )
    assert made.status_code == 201
    # another tenant's timer is a 404 for every route, and nothing changes
    for method, path in [
        ("GET", "/v1/timers/s1"),
        ("PATCH", "/v1/timers/s1"),
        ("DELETE", "/v1/timers/s1"),
        ("POST", "/v1/timers/s1/pause"),
        ("POST", "/v1/timers/s1/resume"),
        ("POST", "/v1/dead/s1/replay"),
    ]:
        body = {"delay": 5000} if method == "PATCH" else None
        answer = await api.request(method, path, json=body, headers=bearer(BILLING))
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["error"]["message"] == "no timer 's1'"
    assert (await store.get("s1")).state is State.SCHEDULED  # type: ignore[union-attr]
    put = await api.put("/v1/timers/s1", json=timer(queue="billing-eu"), headers=bearer(BILLING))
    assert put.status_code == 404
    assert (await store.get("s1")).queue == "shipping"  # type: ignore[union-attr]
    listed = await api.get("/v1/timers", headers=bearer(BILLING))
    assert [t["id"] for t in listed.json()["timers"]] == ["b1"]
    listed = await api.get("/v1/timers", headers=bearer(SHIPPING))
    assert [t["id"] for t in listed.json()["timers"]] == ["s1"]
    listed = await api.get("/v1/timers", headers=bearer(ADMIN))
    assert [t["id"] for t in listed.json()["timers"]] == ["b1", "s1"]
    queues = await api.get("/v1/queues", headers=bearer(BILLING))
    assert [q["name"] for q in queues.json()["queues"]] == ["billing-eu"]
    stats = await api.get("/v1/stats", headers=bearer(SHIPPING))
    assert stats.json()["counts"]["scheduled"] == 1


async def test_a_queue_outside_the_patterns_is_403(api: httpx.AsyncClient, store: Store) -> None:
    for method, path, body in [
        ("POST", "/v1/timers", timer(queue="shipping")),
        ("PUT", "/v1/timers/x1", timer(queue="shipping")),
        ("GET", "/v1/queues/shipping", None),
        ("PUT", "/v1/queues/shipping", {"paused": True}),
        ("POST", "/v1/queues/shipping/pause", None),
        ("PUT", "/v1/queues/shipping/limit", {"concurrency": 1}),
        ("DELETE", "/v1/queues/shipping/limit", None),
        ("POST", "/v1/dead/replay?queue=shipping", None),
        ("GET", "/v1/timers?queue=shipping", None),
        ("POST", "/v1/schedules", {"every": 3600, "queue": "shipping", "payload": 1}),
    ]:
        answer = await api.request(method, path, json=body, headers=bearer(BILLING))
        assert answer.status_code == 403, (method, path, answer.text)
        assert answer.json()["error"]["code"] == "forbidden"
    assert await store.queue_infos() == []
    assert (await store.list_schedules()).schedules == []


async def test_a_batch_answers_403_for_the_items_outside(api: httpx.AsyncClient) -> None:
    batch = [timer(id="b1", queue="billing-1"), timer(id="s1", queue="shipping")]
    answer = await api.post("/v1/timers/batch", json={"timers": batch}, headers=bearer(BILLING))
    assert [r["status"] for r in answer.json()["results"]] == [201, 403]


async def test_schedules_are_scoped_by_their_queue(api: httpx.AsyncClient) -> None:
    made = await api.post(
        "/v1/schedules",
        json={"id": "ship", "every": 3600, "queue": "shipping", "payload": 1},
        headers=bearer(SHIPPING),
    )
    assert made.status_code == 201, made.text
    for method, path in [
        ("GET", "/v1/schedules/ship"),
        ("PATCH", "/v1/schedules/ship"),
        ("DELETE", "/v1/schedules/ship"),
        ("POST", "/v1/schedules/ship/pause"),
        ("GET", "/v1/schedules/ship/runs"),
    ]:
        body = {"every": 7200} if method == "PATCH" else None
        answer = await api.request(method, path, json=body, headers=bearer(BILLING))
        assert answer.status_code == 404, (method, path, answer.text)
    listed = await api.get("/v1/schedules", headers=bearer(BILLING))
    assert listed.json()["schedules"] == []
    moved = await api.patch(
        "/v1/schedules/ship", json={"queue": "billing-x"}, headers=bearer(SHIPPING)
    )
    assert moved.status_code in {403, 422}  # a schedule's queue is not changed to another's
    still = await api.get("/v1/schedules/ship", headers=bearer(SHIPPING))
    assert still.json()["queue"] == "shipping"


# --- roles --------------------------------------------------------------------------------------


async def test_read_cannot_write_write_cannot_limit_admin_can(api: httpx.AsyncClient) -> None:
    refused = await api.post("/v1/timers", json=timer(queue="billing-1"), headers=bearer(READER))
    assert refused.status_code == 403
    assert "role read" in refused.json()["error"]["message"]
    assert (await api.get("/v1/timers", headers=bearer(READER))).status_code == 200
    for token in (BILLING, READER):
        limit = await api.put("/v1/limits/example.com", json={"rate": 5}, headers=bearer(token))
        assert limit.status_code == 403
        assert "needs admin" in limit.json()["error"]["message"]
        assert (await api.get("/v1/limits", headers=bearer(token))).status_code == 403
        assert (await api.get("/metrics", headers=bearer(token))).status_code == 403
    for token in (ADMIN, PLAIN):
        limit = await api.put("/v1/limits/example.com", json={"rate": 5}, headers=bearer(token))
        assert limit.status_code == 200
        assert (await api.get("/metrics", headers=bearer(token))).status_code == 200
    wrong = await api.get("/v1/timers", headers=bearer("not-a-token-of-anyone"))
    assert wrong.status_code == 401
    assert (await api.get("/healthz")).status_code == 200


async def test_plain_token_still_works_alone(store: Store) -> None:
    async with serve(store, token=PLAIN) as client:
        assert (await client.get("/v1/timers")).status_code == 401
        made = await client.post("/v1/timers", json=timer(queue="any"), headers=bearer(PLAIN))
        assert made.status_code == 201
        limits = await client.put("/v1/limits/a.example", json={"rate": 1}, headers=bearer(PLAIN))
        assert limits.status_code == 200


async def test_request_metrics_carry_the_tenant(api: httpx.AsyncClient) -> None:
    await api.get("/v1/timers", headers=bearer(BILLING))
    text = (await api.get("/metrics", headers=bearer(ADMIN))).text
    assert 'route="/v1/timers",status="200",tenant="billing"' in text


# --- quotas -------------------------------------------------------------------------------------


async def test_max_pending_refuses_with_429_and_writes_nothing(store: Store) -> None:
    async with quota_client(store, max_pending=3) as client:
        for n in range(3):
            made = await client.post(
                "/v1/timers", json=timer(id=f"t{n}", queue="billing-a"), headers=bearer(BILLING)
            )
            assert made.status_code == 201
        over = await client.post(
            "/v1/timers", json=timer(id="t3", queue="billing-a"), headers=bearer(BILLING)
        )
        assert over.status_code == 429
        error = over.json()["error"]
        assert error["code"] == "quota_exceeded"
        assert error["field"] == "max_pending"
        assert "max_pending" in error["message"]
        assert await store.get("t3") is None
        # a repeat of a stored create is not a new timer: 200, not 429
        again = await client.post(
            "/v1/timers", json=timer(id="t0", queue="billing-a"), headers=bearer(BILLING)
        )
        assert again.status_code == 200


async def test_a_batch_over_quota_adds_nothing(store: Store) -> None:
    async with quota_client(store, max_pending=5) as client:
        batch = [timer(id=f"b{n}", queue="billing-a") for n in range(6)]
        over = await client.post(
            "/v1/timers/batch", json={"timers": batch}, headers=bearer(BILLING)
        )
        assert over.status_code == 429
        assert (await store.list()).timers == []
        fits = await client.post(
            "/v1/timers/batch", json={"timers": batch[:5]}, headers=bearer(BILLING)
        )
        assert [r["status"] for r in fits.json()["results"]] == [201] * 5


async def test_pending_counts_timers_stored_by_others(store: Store) -> None:
    for n in range(2):  # stored before the app started: read from the store's counts
        await store.add(
            Timer(id=f"old{n}", due_ms=store.now_ms() + 60_000, queue="billing-z", payload=1)
        )
    async with quota_client(store, max_pending=3) as client:
        made = await client.post(
            "/v1/timers", json=timer(queue="billing-a"), headers=bearer(BILLING)
        )
        assert made.status_code == 201
        over = await client.post(
            "/v1/timers", json=timer(queue="billing-a"), headers=bearer(BILLING)
        )
        assert over.status_code == 429


async def test_max_queues_refuses_a_new_queue(store: Store) -> None:
    async with quota_client(store, max_queues=2) as client:
        for queue in ("billing-a", "billing-b", "billing-a"):
            made = await client.post("/v1/timers", json=timer(queue=queue), headers=bearer(BILLING))
            assert made.status_code == 201
        over = await client.post(
            "/v1/timers", json=timer(queue="billing-c"), headers=bearer(BILLING)
        )
        assert over.status_code == 429
        assert over.json()["error"]["field"] == "max_queues"
        settings = await client.put(
            "/v1/queues/billing-d", json={"paused": True}, headers=bearer(BILLING)
        )
        assert settings.status_code == 429
        assert [info.name for info in await store.queue_infos()] == ["billing-a", "billing-b"]


async def test_max_schedules_refuses_another(store: Store) -> None:
    async with quota_client(store, max_schedules=1) as client:
        body = {"every": 3600, "queue": "billing-a", "payload": 1}
        made = await client.post("/v1/schedules", json=body, headers=bearer(BILLING))
        assert made.status_code == 201
        over = await client.post("/v1/schedules", json=body, headers=bearer(BILLING))
        assert over.status_code == 429
        assert over.json()["error"]["field"] == "max_schedules"
        assert len((await store.list_schedules()).schedules) == 1


async def test_creates_per_second_is_a_bucket_with_retry_after(store: Store) -> None:
    async with quota_client(store, creates_per_second=2) as client:
        codes = []
        for _ in range(3):
            made = await client.post(
                "/v1/timers", json=timer(queue="billing-a"), headers=bearer(BILLING)
            )
            codes.append(made.status_code)
        assert codes == [201, 201, 429]
        assert made.headers["Retry-After"] == "1"
        assert made.json()["error"]["field"] == "creates_per_second"
        big = [timer(queue="billing-a") for _ in range(3)]
        over = await client.post("/v1/timers/batch", json={"timers": big}, headers=bearer(BILLING))
        assert over.status_code == 429
        assert "at once" in over.json()["error"]["message"]
        assert len((await store.list()).timers) == 2


# --- the tokens file ----------------------------------------------------------------------------


def table(**fields: Any) -> str:
    base: dict[str, Any] = {"name": "a", "token": BILLING, "queues": ["*"], "role": "read"}
    base.update(fields)
    lines = [f"{k} = {_toml(v)}" for k, v in base.items() if v is not None]
    return "[[token]]\n" + "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "has no [[token]] table"),
        ("[[token]\n", "is not valid TOML"),
        (table(role="owner"), "token[0].role: must be one of read, write, admin"),
        (table(queues=[]), "token[0].queues: must be a non-empty list"),
        (table(queues=["a/b"]), "token[0].queues: 'a/b' is not a queue name"),
        (table(name="-x"), "token[0].name: must be 1-64"),
        (table(token="short"), "token[0].token: must be at least 16 characters"),
        (table(token=None), "token[0].token: give token or token_file"),
        (table(token=BILLING + " x"), "token[0].token: must be printable ASCII"),
        (table(token=BILLING + "é"), "token[0].token: must be printable ASCII"),
        (table(max_pending=0), "token[0].max_pending: must be a positive integer"),
        (table(max_queues=True), "token[0].max_queues: must be a positive integer"),
        (table(creates_per_second=-1), "token[0].creates_per_second: must be a number above 0"),
        (table(colour="red"), "token[0].colour: is not a field"),
        (table() + table(token=SHIPPING), "token[1].name: 'a' is given twice"),
        (table() + table(name="b"), "token[1].token: is the same as the token of 'a'"),
        (table(token_file="missing.token", token=None), "token[0].token_file: cannot read"),
    ],
)
def test_a_bad_tokens_file_names_the_table_and_field(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        parse_tenants(text)
    assert message in str(raised.value)
    assert BILLING not in str(raised.value)
    assert SHIPPING not in str(raised.value)


def test_token_file_is_read_relative_to_the_tokens_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a.token").write_text(SHIPPING + "\n")
    path = tmp_path / "tokens.toml"
    path.write_text(table(token=None, token_file="a.token"))
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        tenants = load_tenants(path)
    assert "other users may read it" in caplog.text
    found = tenants.resolve(SHIPPING.encode())
    assert found is not None
    assert found.name == "a"
    assert tenants.resolve(BILLING.encode()) is None
    settings = ServiceSettings(tenants=tenants, token=PLAIN)
    assert SHIPPING not in repr(settings) + repr(found) + repr(tenants)
    assert PLAIN not in repr(settings)


def test_the_plain_token_may_not_also_be_in_the_file() -> None:
    with pytest.raises(InvalidArgument, match="also a token of the tokens file"):
        ServiceSettings(tenants=parse_tenants(table()), token=BILLING)


def test_settings_read_the_tokens_file_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(table())
    path.chmod(0o600)
    settings = ServiceSettings.from_env({"TICKWHEEL_TOKENS_FILE": str(path)})
    assert isinstance(settings.tenants, Tenants)
    assert len(settings.tenants) == 1


async def test_pending_is_read_again_after_a_second_so_cancels_free_the_quota(
    store: Store,
) -> None:
    text = f'[[token]]\nname = "b"\ntoken = "{BILLING}"\nqueues = ["q"]\nrole = "write"\n'
    tenants = parse_tenants(text + "max_pending = 2\n")
    now_s = [0.0]
    quotas = Quotas(tenants, clock=lambda: now_s[0])
    [tenant] = list(tenants)
    for n in range(2):  # as the routes do: admitted, then stored
        await quotas.admit(store, tenant, {"q"}, 1)
        await store.add(Timer(id=f"p{n}", due_ms=store.now_ms() + 60_000, queue="q", payload=1))
    with pytest.raises(QuotaExceeded):
        await quotas.admit(store, tenant, {"q"}, 1)
    await store.cancel("p0")
    now_s[0] += 0.5  # the counts are not read again yet
    with pytest.raises(QuotaExceeded):
        await quotas.admit(store, tenant, {"q"}, 1)
    now_s[0] += 0.6
    await quotas.admit(store, tenant, {"q"}, 1)


def test_the_readme_example_is_a_valid_tokens_file() -> None:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    [example] = re.findall(r"```toml\n(.*?)```", readme.read_text(), flags=re.DOTALL)
    tenants = parse_tenants(example)
    found = tenants.resolve(b"billing-2f7c9e1a4b6d8f03")
    assert found is not None
    assert found.max_pending == 100000
    assert found.sees("billing-eu")
    assert not found.sees("ops")


@pytest.fixture(params=["redis_server", "redis_cluster"])
async def redis_store(request: pytest.FixtureRequest) -> AsyncIterator[RedisStore]:
    url = request.getfixturevalue(request.param).url
    opened = RedisStore.from_url(url, prefix=f"t{uuid.uuid4().hex[:12]}")
    try:
        yield opened
    finally:
        await opened.close()


async def test_tenants_over_redis(redis_store: RedisStore) -> None:
    """Scoped listing walks every shard; quotas count from Redis's queue counts."""
    store = redis_store
    async with serve(store, tenants=parse_tenants(FILE + "max_pending = 40\n")) as client:
        for n in range(30):
            queue = "billing-a" if n % 3 else "shipping"
            token = BILLING if n % 3 else SHIPPING
            made = await client.post(
                "/v1/timers", json=timer(id=f"r{n:02}", queue=queue), headers=bearer(token)
            )
            assert made.status_code == 201
        ids: list[str] = []
        params = {"limit": "4"}
        while True:
            page = (await client.get("/v1/timers", params=params, headers=bearer(BILLING))).json()
            ids += [t["id"] for t in page["timers"]]
            if page["cursor"] is None:
                break
            params["cursor"] = page["cursor"]
        assert sorted(ids) == [f"r{n:02}" for n in range(30) if n % 3]
        # the ops token (max_pending 40, every queue) has 30 pending: a batch of 11 is over
        batch = [timer(queue="billing-b") for _ in range(11)]
        over = await client.post("/v1/timers/batch", json={"timers": batch}, headers=bearer(ADMIN))
        assert over.status_code == 429
        assert len([t async for t in _all(store)]) == 30


async def _all(store: Store) -> AsyncIterator[Timer]:
    cursor = None
    while True:
        page = await store.list(None, 1000, cursor)
        for found in page.timers:
            yield found
        if (cursor := page.cursor) is None:
            return
