"""``tickwheel get`` shows a timer's attempts after it, in a table that fits 100 columns, and
``--json`` prints them with the timer; against a real ``tickwheel serve`` on SQLite whose
worker calls the service's own routes."""

from __future__ import annotations

import json

import pytest

from .cli_support import Run, Service, sqlite_service, wait_until

pytestmark = pytest.mark.timeout(120)

service = sqlite_service("attempts")


def state_of(tw: Run, timer_id: str) -> str:
    return str(json.loads(tw("get", timer_id, "--json").stdout)["state"])


def test_get_shows_the_attempts_newest_first(tw: Run, service: Service) -> None:
    # the service's own 404 for an unknown timer: a dead letter at the first attempt
    url = f"{service.url}/v1/timers/nobody-{'w' * 60}"
    added = tw("add", "--in", "10ms", "--url", url, "--method", "get", "--id", "cli-dead")
    assert added.exit_code == 0, added.output
    wait_until(lambda: state_of(tw, "cli-dead") == "dead")

    shown = tw("get", "cli-dead")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines), shown.stdout
    header = next(n for n, line in enumerate(lines) if line.lstrip().startswith("#"))
    assert lines[header - 1] == "attempts, newest first"
    assert lines[header].split() == [
        "#", "SENT", "OUTCOME", "RESULT", "MS", "RETRY", "WORKER", "BODY"
    ]  # fmt: skip
    row = lines[header + 1].split()
    assert row[:4] == ["1", row[1], "dead", "404"]
    assert row[5] == "-"

    whole = json.loads(tw("get", "cli-dead", "--json").stdout)
    assert whole["state"] == "dead"
    [attempt] = whole["attempts"]
    assert (attempt["attempt"], attempt["outcome"], attempt["status"]) == (1, "dead", 404)
    assert json.loads(attempt["body"])["error"]["code"] == "not_found"
    assert attempt["next_due"] is None


def test_a_timer_not_yet_fired_has_no_attempts(tw: Run, service: Service) -> None:
    added = tw("add", "--in", "1h", "--url", f"{service.url}/healthz", "--id", "cli-later")
    assert added.exit_code == 0, added.output
    shown = tw("get", "cli-later")
    assert shown.stdout.rstrip().endswith("no attempts recorded")
    assert json.loads(tw("get", "cli-later", "--json").stdout)["attempts"] == []
