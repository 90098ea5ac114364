"""Schemathesis in stateful mode: sequences of API calls chained by the ids they return
(create, read, reschedule, replace, cancel, replay; schedules created, changed, paused,
resumed, deleted), with the token, on a real SQLite store.

Each step must answer without a 5xx and as the OpenAPI document says; the links between
operations are inferred from the document (a created timer's `id` feeds `{timer_id}`).
"""

from __future__ import annotations

import asyncio
import tempfile
from tempfile import mkstemp
from typing import Any

import schemathesis
from budget import examples
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.open import open_store

TOKEN = "stateful-token"
_FOLDER = tempfile.TemporaryDirectory(prefix="tickwheel-stateful-")
# built at collection, as schemathesis needs; each example gets a store of its own (`setup`)
app = create_app(
    ServiceSettings(
        store_url="memory://",
        token=TOKEN,
        allow_private_targets=True,
        allowed_hosts=("testserver",),  # the Host schemathesis sends
    )
)
# the event stream answers for as long as it is read (tests/hostile/test_events.py)
schema = schemathesis.openapi.from_asgi("/openapi.json", app).exclude(path="/v1/events")


def _plausible(body: Any) -> None:
    """Nudge a generated timer towards a valid one, so chains get past creation: the document
    cannot say "exactly one of due and delay" or "a callback or a payload"."""
    if not isinstance(body, dict):
        return
    if "due" in body and "delay" in body:
        del body["due"]
    if "due" not in body and "delay" not in body:
        body["delay"] = 60
    if body.get("callback") is None and body.get("payload") is None:
        body["payload"] = {"n": 1}


def _plausible_schedule(body: Any) -> None:
    """Nudge a generated schedule towards a valid one: a rule the document cannot describe
    (exactly one of cron and every, a cron expression, a time zone by name)."""
    if not isinstance(body, dict):
        return
    _plausible(body)
    for name in ("due", "delay"):
        body.pop(name, None)
    if body.get("cron") is not None:
        body["cron"] = "*/5 * * * *"
        body.pop("every", None)
    elif body.get("every") is None:
        body["every"] = 60
    body.pop("timezone", None)
    body.pop("start", None)
    body.pop("end", None)


class Workflow(schema.as_state_machine()):  # type: ignore[misc]
    def setup(self) -> None:
        # a fresh SQLite file: a sequence must not meet timers an earlier one left behind
        app.state.tickwheel.store = open_store(f"sqlite:///{mkstemp(dir=_FOLDER.name)[1]}")

    def teardown(self) -> None:
        asyncio.run(app.state.tickwheel.store.close())

    def before_call(self, case: schemathesis.Case) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {TOKEN}"}
        if case.method in {"POST", "PUT"} and case.path in {"/v1/timers", "/v1/timers/{timer_id}"}:
            _plausible(case.body)
        if case.method == "POST" and case.path == "/v1/schedules":
            _plausible_schedule(case.body)

    def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
        case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])


TestWorkflow = Workflow.TestCase
TestWorkflow.settings = settings(
    max_examples=examples(full=60, ci=15),
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
