"""The `otel` extra with OpenTelemetry's SDK configured: spans for create, claim, each attempt
(HTTP client semantic conventions) and settle, read from the SDK's in-memory exporter, and the
callback's ``traceparent`` naming its attempt's span."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CREATOR_SPAN = "00f067aa0ba902b7"


def _run() -> dict[str, Any]:
    # a fresh interpreter: the global tracer provider can be set once a process
    main = Path(__file__).with_name("otel_main.py")
    result = subprocess.run(
        [sys.executable, str(main)], capture_output=True, text=True, timeout=90, check=False
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return found


def test_spans_of_create_claim_attempts_and_settle_make_one_trace() -> None:
    found = _run()
    spans = found["spans"]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    (create,) = by_name["tickwheel create"]
    assert (create["trace_id"], create["parent"]) == (TRACE_ID, CREATOR_SPAN)
    first, second = by_name["POST"]
    for attempt in (first, second):
        assert attempt["kind"] == "CLIENT"
        assert attempt["trace_id"] == TRACE_ID
        assert attempt["parent"] == create["span_id"]
        attributes = attempt["attributes"]
        assert attributes["http.request.method"] == "POST"
        assert attributes["server.address"] == "127.0.0.1"
        assert attributes["url.full"].endswith("/hook")  # no query: it may hold a token
        assert "secret" not in json.dumps(attributes)
    assert first["attributes"]["http.response.status_code"] == 503
    assert first["error"]
    assert first["attributes"]["error.type"] == "503"
    assert second["attributes"]["http.response.status_code"] == 200
    assert not second["error"]
    # each callback names its own attempt's span as its parent, and keeps the tracestate
    sent = [(c["traceparent"].split("-")[2], c["tracestate"]) for c in found["callbacks"]]
    assert sent == [(first["span_id"], "a=1"), (second["span_id"], "a=1")]
    settles = by_name["tickwheel settle"]
    assert [s["attributes"]["tickwheel.outcome"] for s in settles] == ["retry", "ack"]
    assert {s["trace_id"] for s in settles} == {TRACE_ID}
    claims = by_name["tickwheel claim"]
    assert len(claims) == 2  # the first attempt and the retry
    assert all(claim["links"] == [TRACE_ID] for claim in claims)
