"""Property tests from the API's own OpenAPI document (schemathesis, in process over ASGI).

Whatever the schema allows — and much it does not, in the negative cases — must never get a 5xx,
and every answer, errors included, must match the schema. Bounded to about a minute in all.
"""

from __future__ import annotations

import schemathesis
from budget import examples
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tickwheel.service.api import create_app
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.memory import MemoryStore

TOKEN = "schemathesis-token"


# built at collection: schemathesis makes one test per operation from the loaded schema; the
# event stream answers for as long as it is read (tests/hostile/test_events.py holds it)
schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    create_app(
        ServiceSettings(
            store_url="memory://",
            token=TOKEN,
            allowed_hosts=("testserver",),  # schemathesis's Host
        ),
        MemoryStore(),
    ),
).exclude(path="/v1/events")


@schema.parametrize()
@settings(
    max_examples=examples(full=25, ci=10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_server_error_and_responses_match_the_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {TOKEN}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
