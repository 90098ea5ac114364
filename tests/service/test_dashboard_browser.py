"""The dashboard in a real browser: headless Chromium (Debian's package) driven by Playwright,
against the API served by uvicorn on loopback. Each action is a click on the page; the store is
then read back through the API, which must show what the same call made with curl would."""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from playwright.async_api import (
    Browser,
    ConsoleMessage,
    Dialog,
    Locator,
    Page,
    async_playwright,
    expect,
)
from prometheus_client import CollectorRegistry

from tickwheel.engine.metrics import Metrics
from tickwheel.model import Timer
from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.service.tenants import parse_tenants
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import Limit, Store
from tickwheel.stores.open import open_store

# one browser for the module (starting it is most of a test's time), so the tests, and the
# fixtures they share it with, run on the module's event loop
pytestmark = [pytest.mark.timeout(60), pytest.mark.asyncio(loop_scope="module")]
fixture = pytest_asyncio.fixture(loop_scope="module")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "dashboard-test-token"
TENANT = "dashboard-tenant-token-1"
WAIT_MS = 5000  # for anything the page shows: it reads the API every 2 s
_UPDATED = re.compile(r"^updated ")
NEEDS_TOKEN = "this service needs a token: enter it above"
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


@dataclass
class Service:
    url: str
    store: Store
    api: httpx.AsyncClient
    metrics: Metrics  # what /metrics renders, as a worker in the process would count

    async def state(self, timer_id: str) -> str:
        response = await self.api.get(f"/v1/timers/{timer_id}")
        assert response.status_code == 200, response.text
        state: str = response.json()["state"]
        return state

    async def create(self, timer_id: str, queue: str = "default", **fields: Any) -> None:
        body = {"id": timer_id, "queue": queue, "delay": 3600, "payload": {"n": 1}, **fields}
        response = await self.api.post("/v1/timers", json=body)
        assert response.status_code == 201, response.text

    async def dead_letter(self, timer_id: str, queue: str, error: str, payload: Any) -> None:
        """Put a dead timer in the store, as a worker whose last attempt failed would."""
        now_ms = self.store.now_ms()
        await self.store.add(Timer(id=timer_id, due_ms=now_ms, queue=queue, payload=payload))
        [lease] = await self.store.claim(queue, now_ms, 1, 60_000)
        await self.store.kill(lease, error)


async def _serve(tmp_path: Path, token: str | None, **more: Any) -> AsyncIterator[Service]:
    """The API over a SQLite file, served by uvicorn on a free loopback port.

    The socket listens before uvicorn starts, so a request made meanwhile waits for it."""
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    settings = ServiceSettings(store_url="memory://", token=token, **more)
    app = create_app(settings, store, registry=registry)
    config = uvicorn.Config(app, log_level="warning", access_log=False, http="h11")
    server = uvicorn.Server(config)
    with socket.create_server(("127.0.0.1", 0)) as sock:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        try:
            async with httpx.AsyncClient(base_url=url, headers=headers) as api:
                yield Service(url, store, api, metrics)
        finally:
            server.should_exit = True
            await serving
            await store.close()


@fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    """A service that asks for `TOKEN`; its client `api` sends it."""
    async for started in _serve(tmp_path, TOKEN):
        yield started


@fixture
async def open_service(tmp_path: Path) -> AsyncIterator[Service]:
    """A service on loopback without a token."""
    async for started in _serve(tmp_path, None):
        yield started


@fixture
async def tenant_service(tmp_path: Path) -> AsyncIterator[Service]:
    """A service with a tokens file: `TENANT` writes to ``billing-*`` only; `TOKEN` is admin."""
    tenants = parse_tenants(
        f'[[token]]\nname = "billing"\ntoken = "{TENANT}"\nqueues = ["billing-*"]\nrole = "write"\n'
    )
    async for started in _serve(tmp_path, TOKEN, tenants=tenants):
        yield started


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: `make tools` installs it (chromium)"
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


class Tabs:
    """Opens dashboard pages in `browser`; `errors` gathers their uncaught script errors and CSP
    refusals, which every test expects none of."""

    def __init__(self, browser: Browser, service: Service) -> None:
        self.browser = browser
        self.service = service
        self.errors: list[str] = []
        self.responses: list[tuple[str, int]] = []
        self.pages: list[Page] = []
        self.confirming = True  # how the pages answer confirmations
        self.asked: list[str] = []  # what they asked

    async def new(self) -> Page:
        """Load the dashboard in a new page that answers its confirmations as `confirming`
        says (yes unless a test says otherwise)."""
        page = await self.browser.new_page()
        self.pages.append(page)
        page.set_default_timeout(WAIT_MS)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", self._console)
        page.on("dialog", self._answer)
        page.on("response", lambda response: self.responses.append((response.url, response.status)))
        await page.goto(self.service.url + "/dashboard")
        return page

    async def close(self) -> None:
        for page in self.pages:
            await page.close()

    async def open(self, token: str | None = TOKEN) -> Page:
        """Load the dashboard, give it `token` and wait for it to have read everything."""
        page = await self.new()
        if token is not None:
            await login(page)
        await expect(page.locator("#status")).to_have_text(_UPDATED)
        return page

    async def _answer(self, dialog: Dialog) -> None:
        self.asked.append(dialog.message)
        await (dialog.accept() if self.confirming else dialog.dismiss())

    def _console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Trusted Type" in message.text:
            self.errors.append(message.text)


@fixture
async def tabs(browser: Browser, service: Service) -> AsyncIterator[Tabs]:
    opened = Tabs(browser, service)
    yield opened
    await opened.close()
    assert opened.errors == []


@fixture
async def open_tabs(browser: Browser, open_service: Service) -> AsyncIterator[Tabs]:
    opened = Tabs(browser, open_service)
    yield opened
    await opened.close()
    assert opened.errors == []


async def login(page: Page, token: str = TOKEN) -> None:
    await page.fill("#token", token)
    await page.click("#login button[type=submit]")


def _row(page: Page, table: str, row_id: str) -> Locator:
    return page.locator(f"#{table} tr[data-id='{row_id}']")


async def _click(page: Page, table: str, row_id: str, name: str) -> None:
    await _row(page, table, row_id).get_by_role("button", name=name, exact=True).click()


async def _state(page: Page, table: str, row_id: str) -> Locator:
    """The cell of the row `row_id` under the table's "state" header.

    A state is awaited in its own cell, never in the row's text: that runs the cells together
    with nothing between them, so the row of timer ``a-pause`` in queue ``default`` reads
    "a-pausedefault…" and contains "paused" before any click."""
    headers = await page.locator(f"table:has(> #{table}) > thead th").all_text_contents()
    return _row(page, table, row_id).locator("td").nth(headers.index("state"))


async def test_without_a_token_the_page_asks_for_it_and_the_api_refuses_until_given(
    tabs: Tabs, service: Service
) -> None:
    await service.create("t-1")
    page = await tabs.new()
    await expect(page.locator("#status")).to_have_text(NEEDS_TOKEN)
    api_calls = {status for url, status in tabs.responses if "/v1/" in url or "/metrics" in url}
    assert api_calls == {401}
    await expect(page.locator("#timers tr")).to_have_count(0)

    await login(page)
    await expect(_row(page, "timers", "t-1")).to_be_visible()
    await expect(page.locator("#status")).to_have_text(_UPDATED)
    assert all(TOKEN not in url for url, _ in tabs.responses)
    assert await page.input_value("#token") == ""  # not left in the page
    assert await page.evaluate("sessionStorage.getItem('tickwheel-token')") == TOKEN

    await page.reload()  # the tab keeps it
    await expect(_row(page, "timers", "t-1")).to_be_visible()
    await page.click("#forget")
    await expect(page.locator("#status")).to_have_text(NEEDS_TOKEN)
    await expect(page.locator("#timers tr")).to_have_count(0)  # what it showed is gone too
    assert await page.evaluate("sessionStorage.getItem('tickwheel-token')") is None


async def test_a_service_without_a_token_shows_its_timers_at_once(
    open_tabs: Tabs, open_service: Service
) -> None:
    await open_service.create("plain-1", payload={"x": "y"})
    await open_service.create("plain-2", queue="mail")
    page = await open_tabs.open(token=None)
    await expect(await _state(page, "timers", "plain-1")).to_have_text("scheduled")
    await expect(_row(page, "timers", "plain-2")).to_contain_text("mail")
    await expect(_row(page, "queues", "mail")).to_be_visible()


async def test_timer_actions_change_the_store_as_the_api_would(
    tabs: Tabs, service: Service
) -> None:
    for timer_id in ("a-pause", "a-cancel", "a-move", "a-paused-cancel", "a-paused-move"):
        await service.create(timer_id)
    page = await tabs.open()

    # the page shows a state only from a read that followed the change: once its cell says so,
    # the action's request has been answered, and the API reads the same
    state = await _state(page, "timers", "a-pause")
    await expect(state).to_have_text("scheduled")
    await _click(page, "timers", "a-pause", "Pause")
    await expect(state).to_have_text("paused")
    assert await service.state("a-pause") == "paused"
    await _click(page, "timers", "a-pause", "Resume")
    await expect(state).to_have_text("scheduled")
    assert await service.state("a-pause") == "scheduled"

    await _click(page, "timers", "a-cancel", "Cancel")
    await expect(_row(page, "timers", "a-cancel")).to_have_count(0)
    assert (await service.api.get("/v1/timers/a-cancel")).status_code == 404
    await _click(page, "timers", "a-paused-cancel", "Pause")
    await expect(await _state(page, "timers", "a-paused-cancel")).to_have_text("paused")
    await _click(page, "timers", "a-paused-cancel", "Cancel")
    await expect(_row(page, "timers", "a-paused-cancel")).to_have_count(0)
    assert (await service.api.get("/v1/timers/a-paused-cancel")).status_code == 404

    before = (await service.api.get("/v1/timers/a-move")).json()["due_ms"]
    await _click(page, "timers", "a-move", "Details")
    await expect(page.locator("#details-json")).to_contain_text('"id": "a-move"')
    await page.fill("#reschedule-delay", "60")
    await page.click("#reschedule button[type=submit]")
    await expect(page.locator("#notice")).to_have_text("rescheduled a-move to run in 60 s")
    after = (await service.api.get("/v1/timers/a-move")).json()
    assert after["state"] == "scheduled"
    assert before - 3_600_000 < after["due_ms"] < before - 3_400_000  # due in a minute, not an hour

    await _click(page, "timers", "a-paused-move", "Pause")
    await expect(await _state(page, "timers", "a-paused-move")).to_have_text("paused")
    await _click(page, "timers", "a-paused-move", "Details")
    await expect(page.locator("#details-json")).to_contain_text('"state": "paused"')
    await page.fill("#reschedule-delay", "60")
    await page.click("#reschedule button[type=submit]")
    await expect(page.locator("#notice")).to_have_text("rescheduled a-paused-move to run in 60 s")
    moved = (await service.api.get("/v1/timers/a-paused-move")).json()
    assert moved["state"] == "paused"
    assert before - 3_600_000 < moved["due_ms"] < before - 3_300_000


async def test_a_refused_action_shows_the_api_error(tabs: Tabs, service: Service) -> None:
    await service.create("gone-soon")
    page = await tabs.open()
    await expect(_row(page, "timers", "gone-soon")).to_be_visible()
    assert (await service.api.delete("/v1/timers/gone-soon")).status_code == 204
    await _click(page, "timers", "gone-soon", "Pause")
    await expect(page.locator("#notice")).to_contain_text("gone-soon")
    await expect(page.locator("#notice")).to_have_class("error")
    await expect(_row(page, "timers", "gone-soon")).to_have_count(0)


async def test_queue_pause_resume_and_dead_letter_replay(tabs: Tabs, service: Service) -> None:
    await service.create("q-1", queue="mail")
    await service.dead_letter("dead-1", "mail", "HTTP 500", {"n": 1})
    await service.dead_letter("dead-2", "mail", "HTTP 500", {"n": 2})
    await service.dead_letter("dead-3", "other", "HTTP 500", {"n": 3})
    page = await tabs.open()
    queue = await _state(page, "queues", "mail")
    await expect(queue).to_have_text("active")

    await _click(page, "queues", "mail", "Pause")
    await expect(queue).to_have_text("paused")
    assert (await service.api.get("/v1/queues/mail")).json()["paused"] is True
    await _click(page, "queues", "mail", "Resume")
    await expect(queue).to_have_text("active")
    assert (await service.api.get("/v1/queues/mail")).json()["paused"] is False

    await _click(page, "dead", "dead-3", "Replay")
    await expect(_row(page, "dead", "dead-3")).to_have_count(0)
    assert await service.state("dead-3") == "scheduled"

    await _click(page, "queues", "mail", "Replay 2 dead")
    await expect(page.locator("#notice")).to_have_text("replayed 2 timers of queue mail")
    assert [await service.state(t) for t in ("dead-1", "dead-2")] == ["scheduled", "scheduled"]
    await expect(page.locator("#dead tr")).to_have_count(0)


async def test_filters_narrow_the_timers_by_queue_state_and_id_prefix(
    tabs: Tabs, service: Service
) -> None:
    await service.create("order-1", queue="orders")
    await service.create("order-2", queue="orders")
    await service.create("mail-1", queue="mail")
    assert (await service.api.post("/v1/timers/order-2/pause")).status_code == 200
    page = await tabs.open()
    rows = page.locator("#timers tr")
    await expect(rows).to_have_count(3)

    await page.select_option("#filter-queue", "orders")
    await expect(rows).to_have_count(2)
    await page.select_option("#filter-state", "paused")
    await expect(rows).to_have_count(1)
    await expect(_row(page, "timers", "order-2")).to_be_visible()

    await page.select_option("#filter-queue", "")
    await page.select_option("#filter-state", "")
    await page.fill("#filter-prefix", "mail")
    await expect(rows).to_have_count(1)
    await expect(_row(page, "timers", "mail-1")).to_be_visible()


async def test_hostile_text_from_the_store_is_shown_as_text(tabs: Tabs, service: Service) -> None:
    await service.create("hostile-1", payload={"html": HOSTILE})
    await service.dead_letter("hostile-2", "default", HOSTILE, {HOSTILE: [HOSTILE]})
    page = await tabs.new()
    await login(page)
    await expect(_row(page, "dead", "hostile-2")).to_contain_text(HOSTILE)  # as written
    await _click(page, "dead", "hostile-2", "Details")
    await expect(page.locator("#details-json")).to_contain_text("onerror")
    await _click(page, "timers", "hostile-1", "Details")
    await expect(page.locator("#details-json")).to_contain_text("window.pwned=2")
    assert await page.evaluate("window.pwned") is None
    assert await page.locator("img, body script:not([src])").count() == 0


async def test_the_chart_reads_what_fired_and_how_late_from_the_metrics(
    tabs: Tabs, service: Service
) -> None:
    await service.create("mail-1", queue="mail")
    page = await tabs.open()
    for late_s in (0.04, 0.05, 0.06) * 4:
        service.metrics.observe_fired("default", late_s)
    summary = page.locator("#chart-now")
    await expect(summary).to_have_text("last minute: 12 fired, mean lateness 50.0 ms")

    await page.select_option("#filter-queue", "mail")  # the chart starts afresh for one queue
    await expect(summary).to_have_text("last minute: waiting for a second reading")
    service.metrics.observe_fired("mail", 1.5)
    service.metrics.observe_fired("default", 0.01)
    await expect(summary).to_have_text("last minute: 1 fired, mean lateness 1500.0 ms")


async def test_queue_and_host_limits_are_shown(tabs: Tabs, service: Service) -> None:
    limit = {"rate": 5, "burst": None, "concurrency": 2}
    queue = await service.api.put("/v1/queues/mail", json={"paused": False, "limit": limit})
    host = await service.api.put("/v1/limits/api.example.com:8443", json={"rate": 50, "burst": 10})
    assert (queue.status_code, host.status_code) == (200, 200), queue.text + host.text
    page = await tabs.open()
    await expect(_row(page, "queues", "mail")).to_contain_text("5/s, ≤ 2 at once")
    cells = ["api.example.com:8443", "50/s", "10", "\N{EN DASH}", "Remove"]  # no concurrency
    await expect(page.locator("#limits td")).to_have_text(cells)


async def test_limits_are_set_and_removed_from_the_page(tabs: Tabs, service: Service) -> None:
    await service.create("q-1", queue="mail")
    page = await tabs.open()
    await expect(_row(page, "queues", "mail")).to_be_visible()

    await page.fill("#limit-name", "api.example.com:8443")
    await page.fill("#limit-rate", "50")
    await page.fill("#limit-concurrency", "4")
    await page.click("#limit-form button[type=submit]")
    await expect(_row(page, "limits", "api.example.com:8443")).to_contain_text("50/s")
    found = (await service.api.get("/v1/limits")).json()["limits"]
    assert found == [{"host": "api.example.com:8443", "rate": 50, "burst": None, "concurrency": 4}]

    await page.select_option("#limit-kind", "queue")
    await page.fill("#limit-name", "mail")
    await page.fill("#limit-rate", "")
    await page.fill("#limit-concurrency", "2")
    await page.click("#limit-form button[type=submit]")
    await expect(_row(page, "queues", "mail")).to_contain_text("≤ 2 at once")
    assert (await service.api.get("/v1/queues/mail")).json()["limit"]["concurrency"] == 2

    # a limit the API refuses is shown as its error, and nothing changes
    await page.fill("#limit-concurrency", "0")
    await page.fill("#limit-burst", "3")
    await page.evaluate("document.getElementById('limit-form').noValidate = true")
    await page.click("#limit-form button[type=submit]")
    await expect(page.locator("#notice")).to_have_class("error")
    assert (await service.api.get("/v1/queues/mail")).json()["limit"]["concurrency"] == 2

    await _click(page, "limits", "api.example.com:8443", "Remove")
    await expect(_row(page, "limits", "api.example.com:8443")).to_have_count(0)
    assert (await service.api.get("/v1/limits")).json()["limits"] == []
    await _click(page, "queues", "mail", "Remove limit")
    await expect(_row(page, "queues", "mail")).not_to_contain_text("at once")
    assert (await service.api.get("/v1/queues/mail")).json()["limit"] is None


async def test_a_schedule_s_occurrence_offers_no_action_its_schedule_owns(
    tabs: Tabs, service: Service
) -> None:
    created = await service.api.post(
        "/v1/schedules", json={"id": "hourly", "every": 3600, "payload": {"n": 1}}
    )
    assert created.status_code == 201, created.text
    [occurrence] = (await service.api.get("/v1/timers")).json()["timers"]
    assert occurrence["id"].startswith("hourly@")
    page = await tabs.open()
    row = _row(page, "timers", occurrence["id"])
    await expect(row.get_by_role("button")).to_have_text(["Details"])
    await row.get_by_role("button", name="Details").click()
    await expect(page.locator("#details-json")).to_contain_text('"state": "scheduled"')
    await expect(page.locator("#reschedule")).to_be_hidden()


async def test_the_id_prefix_is_sought_past_the_first_page(tabs: Tabs, service: Service) -> None:
    bulk = [{"id": f"bulk-{n:03d}", "delay": 3600, "payload": n} for n in range(250)]
    created = await service.api.post("/v1/timers/batch", json={"timers": bulk})
    assert created.status_code == 200, created.text
    await service.create("zz-last")  # after 250 others in id order
    page = await tabs.open()
    await expect(page.locator("#timers tr")).to_have_count(100)
    await expect(page.locator("#shown")).to_have_text(
        "100 shown of the first 100; narrow the filters to see the others"
    )
    await page.fill("#filter-prefix", "zz")
    await expect(page.locator("#timers tr")).to_have_count(1)
    await expect(_row(page, "timers", "zz-last")).to_be_visible()
    await expect(page.locator("#shown")).to_have_text("1 shown")


async def test_host_limits_are_shown_a_page_at_a_time(tabs: Tabs, service: Service) -> None:
    """With many limits the page fetches 50 a poll (not the whole table) and pages through."""
    hosts = [f"h{n:03}.example.com" for n in range(120)]
    for host in hosts:
        await service.store.set_limit(host, Limit(rate=1.0))
    page = await tabs.open()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    rows = page.locator("#limits tr")
    await expect(rows).to_have_count(50)
    await expect(page.locator("#limits-pages")).to_contain_text("1\N{EN DASH}50, more after")
    await page.locator("#limits-pages").get_by_role("button", name="Next page").click()
    await expect(_row(page, "limits", hosts[50])).to_be_visible()
    await expect(rows).to_have_count(50)
    await page.locator("#limits-pages").get_by_role("button", name="Next page").click()
    await expect(page.locator("#limits-pages")).to_have_text(
        "101\N{EN DASH}120First pagePrevious page", use_inner_text=False
    )
    await expect(rows).to_have_count(20)
    await page.locator("#limits-pages").get_by_role("button", name="Previous page").click()
    await expect(_row(page, "limits", hosts[99])).to_be_visible()
    await page.locator("#limits-pages").get_by_role("button", name="First page").click()
    await expect(_row(page, "limits", hosts[0])).to_be_visible()
    reads = [url for url in asked if "/v1/limits" in url]
    assert reads, "the page polls the limits"
    assert all("limit=50" in url for url in reads), reads


async def test_a_tenant_s_token_shows_its_queues_and_notes_what_it_may_not_read(
    browser: Browser, tenant_service: Service
) -> None:
    await tenant_service.create("mine", queue="billing-eu")
    await tenant_service.create("theirs", queue="shipping")
    await tenant_service.api.put("/v1/limits/api.example.com", json={"rate": 5})
    tabs = Tabs(browser, tenant_service)
    try:
        page = await tabs.new()
        await login(page, TENANT)
        await expect(page.locator("#status")).to_have_text(_UPDATED)
        await expect(_row(page, "timers", "mine")).to_be_visible()
        await expect(_row(page, "timers", "theirs")).to_have_count(0)
        await expect(_row(page, "queues", "shipping")).to_have_count(0)
        await expect(page.locator("#limits td")).to_have_text(
            ["not shown to this token: token 'billing' has role write: /v1/limits needs admin"]
        )
        await expect(page.locator("#chart-now")).to_contain_text("not shown to this token")
        await _click(page, "timers", "mine", "Pause")
        await expect(await _state(page, "timers", "mine")).to_have_text("paused")
    finally:
        await tabs.close()
    assert tabs.errors == []


async def test_the_docs_page_renders_with_no_request_leaving_the_machine(
    browser: Browser, service: Service
) -> None:
    page = await browser.new_page()
    requested: list[str] = []
    refused: list[str] = []

    async def only_the_service(route: Any) -> None:
        requested.append(route.request.url)
        if route.request.url.startswith(service.url + "/"):
            await route.continue_()
        else:  # what would have left the machine
            refused.append(route.request.url)
            await route.abort()

    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.route("**/*", only_the_service)
    try:
        await page.goto(service.url + "/docs")
        await expect(page.locator(".swagger-ui .info .title")).to_contain_text("tickwheel")
        await expect(page.locator(".opblock-summary-path").first).to_be_visible()
    finally:
        await page.close()
    assert refused == []
    assert errors == []
    assert f"{service.url}/docs/swagger-ui-bundle.js" in requested
    assert f"{service.url}/openapi.json" in requested


async def test_a_queue_is_purged_from_the_page_after_a_confirm(
    tabs: Tabs, service: Service
) -> None:
    for n in range(3):
        await service.create(f"r-{n}", queue="reports")
    await service.dead_letter("r-dead", "reports", "HTTP 500", {"n": 1})
    now_ms = service.store.now_ms()
    await service.store.add(Timer(id="r-held", due_ms=now_ms, queue="reports", payload=1))
    [lease] = await service.store.claim("reports", now_ms, 1, 60_000)
    assert lease.timer.id == "r-held"
    defaults = {"retry": {"max_attempts": 2, "timeout": 3}, "headers": {"Authorization": "x"}}
    assert (await service.api.put("/v1/queues/reports/defaults", json=defaults)).status_code == 200
    page = await tabs.open()
    row = _row(page, "queues", "reports")
    await expect(row).to_contain_text("2 attempts, 3 s each; Authorization")

    # a confirmation answered no deletes nothing
    tabs.confirming = False
    await _click(page, "queues", "reports", "Purge 3 scheduled")
    for _ in range(50):  # the dialog is answered on the page's own time
        if tabs.asked:
            break
        await asyncio.sleep(0.05)
    assert tabs.asked == ["Delete the 3 scheduled timers of queue reports? They are gone for good."]
    counts = (await service.api.get("/v1/queues/reports")).json()["counts"]
    assert counts["scheduled"] == 3

    tabs.confirming = True
    await _click(page, "queues", "reports", "Purge 3 scheduled")
    await expect(page.locator("#notice")).to_have_text("purged 3 scheduled timers of queue reports")
    await _click(page, "queues", "reports", "Purge 1 dead")
    await expect(page.locator("#notice")).to_have_text("purged 1 dead timers of queue reports")
    counts = (await service.api.get("/v1/queues/reports")).json()["counts"]
    assert (counts["scheduled"], counts["dead"], counts["leased"]) == (0, 0, 1)
    # the leased timer is its worker's: no button offers to purge it, and its ack lands
    await expect(row.get_by_role("button", name=re.compile(r"^Purge"))).to_have_count(0)
    await service.store.ack(lease)


async def test_the_details_show_the_attempts_and_a_schedule_s_runs_lead_to_them(
    tabs: Tabs, service: Service
) -> None:
    store = service.store
    await service.create("tried")
    [lease] = await store.claim("default", store.now_ms() + 3_600_000, 1, 60_000)
    now_ms = store.now_ms()
    await store.retry(
        lease,
        now_ms + 60_000,
        "HTTP 503",
        Attempt(
            attempt=1,
            at_ms=now_ms,
            worker="host-a:42",
            outcome="retry",
            status=503,
            latency_ms=12.5,
            body=HOSTILE,
            next_due_ms=now_ms + 60_000,
        ),
    )
    page = await tabs.open()
    await _click(page, "timers", "tried", "Details")
    attempts = page.locator("#details-attempts tr")
    await expect(attempts).to_have_count(1)
    await expect(attempts.first).to_contain_text("503")
    await expect(attempts.first).to_contain_text("host-a:42")
    await expect(attempts.first).to_contain_text(HOSTILE)  # as text, never as markup
    assert await page.evaluate("window.pwned") is None

    # a schedule's occurrence: its run leads to its timer's attempts
    schedule = {"id": "daily", "every": 86_400, "queue": "daily", "payload": {"n": 1}}
    created = await service.api.post("/v1/schedules", json=schedule)
    assert created.status_code == 201, created.text
    [run] = (await service.api.get("/v1/schedules/daily/runs")).json()["runs"]
    assert run["attempts"] == f"/v1/timers/{run['timer_id']}/attempts"
    [lease] = await store.claim("daily", store.now_ms() + 86_400_000, 1, 60_000)
    assert lease.timer.id == run["timer_id"]
    await store.ack(
        lease,
        Attempt(attempt=1, at_ms=store.now_ms(), worker="host-b:7", outcome="ack", status=204),
    )
    await page.reload()  # the schedule was made beside the page: no change event told it
    await page.locator("#schedules tr[data-id='daily']").get_by_role("button", name="Runs").click()
    await _click(page, "runs-list", run["timer_id"], "Attempts")
    await expect(page.locator("#details-id")).to_have_text(run["timer_id"])
    await expect(attempts).to_have_count(1)
    await expect(attempts.first).to_contain_text("host-b:7")
    await expect(attempts.first).to_contain_text("ack")


async def test_the_page_follows_the_event_stream_and_reads_the_api_when_a_change_comes(
    tabs: Tabs, service: Service
) -> None:
    page = await tabs.open()
    await expect(page.locator("#status")).to_have_text(re.compile(r"· live$"))
    streams = [status for url, status in tabs.responses if url.endswith("/v1/events")]
    assert 200 in streams  # read with fetch and the bearer token, never a token in the URL
    assert all(TOKEN not in url for url, _ in tabs.responses)
    # a change streamed in: the page reads the API about a second later, not in 15 s
    await service.api.post("/v1/timers", json={"id": "streamed", "delay": 600, "payload": 1})
    await expect(_row(page, "timers", "streamed")).to_be_visible(timeout=WAIT_MS)
