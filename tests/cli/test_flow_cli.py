"""The flow-control commands (pause, resume, limit, queues, reschedule, ls filters and --watch)
against a real ``tickwheel serve`` process on a SQLite file.

Commands run in process (typer's `CliRunner`) as in test_cli.py; ``ls --watch`` runs as a real
process, so that Ctrl-C is a real SIGINT.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner

from tickwheel.cli import app
from tickwheel.cli.parse import describe_rate, parse_instant, parse_rate

from .cli_support import Run, ok_json, sqlite_service, wait_until
from .test_cli import Process, Service

pytestmark = pytest.mark.timeout(120)

service = sqlite_service("flow-cli")


def free_api() -> str:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def add(tw: Run, timer_id: str, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = ok_json(tw("add", "--id", timer_id, "--json", *args))
    return found


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "per_s"),
    [("50/s", 50), ("3000/m", 50), ("10/h", 10 / 3600), ("50", 50), ("0.5/s", 0.5),
     (" 2 / S ", 2), ("1/d", 1 / 86400), ("100000/s", 100_000)],
)  # fmt: skip
def test_rates(text: str, per_s: float) -> None:
    assert parse_rate(text) == pytest.approx(per_s)


@pytest.mark.parametrize(
    ("text", "message"),
    [("0/s", "out of range"), ("0", "out of range"), ("100001/s", "out of range"),
     ("0.5/d", "out of range"),
     ("6000001/m", "out of range"), ("9" * 400, "out of range"), ("-1", "not a rate"),
     ("1e999/s", "not a rate"), ("50/fortnight", "not a rate"), ("50/ms", "not a rate"),
     ("", "not a rate"), ("/s", "not a rate"), ("50/", "not a rate"), ("nan", "not a rate"),
     ("inf/s", "not a rate"), ("5/s/s", "not a rate"), ("0x10/s", "not a rate")],
)  # fmt: skip
def test_bad_rates(text: str, message: str) -> None:
    with pytest.raises(typer.BadParameter, match=message) as caught:
        parse_rate(text)
    assert len(str(caught.value)) < 150  # a long text is not echoed whole


def test_rates_shown_in_the_unit_that_reads_best() -> None:
    assert [describe_rate(r) for r in (50, 0.5, 10 / 3600, 1.5)] == [
        "50/s",
        "30/m",
        "10/h",
        "1.5/s",
    ]


def test_instants_for_a_due_range() -> None:
    assert parse_instant("2030-01-01T10:00:00+01:00") == "2030-01-01T09:00:00.000Z"
    assert parse_instant("0") == "1970-01-01T00:00:00.000Z"
    with pytest.raises(typer.BadParameter, match="too far a time"):
        parse_instant("1" + "0" * 30)
    with pytest.raises(typer.BadParameter, match="not a time"):
        parse_instant("tomorrow")


# --- reschedule ------------------------------------------------------------------------------


def test_reschedule_in_and_at(tw: Run, service: Service) -> None:
    add(tw, "rs-1", "--in", "1h", "--url", f"{service.url}/healthz")
    moved = tw("reschedule", "rs-1", "--in", "5m")
    assert moved.exit_code == 0, moved.output
    assert moved.stdout.startswith("rescheduled rs-1 · due ")
    due_ms = ok_json(tw("get", "rs-1", "--json"))["due_ms"]
    assert 295_000 < due_ms - time.time() * 1000 <= 300_000
    at = ok_json(tw("reschedule", "rs-1", "--at", "2030-01-01T10:00:00+01:00", "--json"))
    assert (at["id"], at["state"], at["due"]) == ("rs-1", "scheduled", "2030-01-01T09:00:00.000Z")
    tw("cancel", "rs-1")


def test_reschedule_a_paused_timer_keeps_it_paused(tw: Run, service: Service) -> None:
    add(tw, "rs-p", "--in", "1h", "--url", f"{service.url}/healthz")
    assert tw("pause", "rs-p").exit_code == 0
    moved = tw("reschedule", "rs-p", "--at", "2030-01-01T10:00:00Z")
    assert moved.exit_code == 0, moved.output
    assert moved.stdout == "rescheduled rs-p · due 2030-01-01T10:00:00.000Z\n"
    found = ok_json(tw("get", "rs-p", "--json"))
    assert (found["state"], found["due"]) == ("paused", "2030-01-01T10:00:00.000Z")
    resumed = ok_json(tw("resume", "rs-p", "--json"))
    assert (resumed["state"], resumed["due"]) == ("scheduled", "2030-01-01T10:00:00.000Z")
    tw("cancel", "rs-p")


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["rs-x", "--in", "5m"], 1, "error: no timer 'rs-x' (id) [HTTP 404 not_found]"),
        (["rs-x"], 2, "exactly one of --in and --at"),
        (["rs-x", "--in", "5m", "--at", "0"], 2, "exactly one of --in and --at"),
        (["rs-x", "--in", "5 fortnights"], 2, "not a duration"),
        (["rs-x", "--in", "-5m"], 2, "not a duration"),
        (["rs-x", "--in", "1e999s"], 2, "not a duration"),
        (["rs-x", "--at", "tomorrow"], 2, "not a time"),
        (["rs-x", "--in", "99999999d"], 2, "[HTTP 422 invalid]"),
    ],
)
def test_reschedule_refusals(tw: Run, args: list[str], status: int, message: str) -> None:
    if "99999999d" in args:  # past the store's horizon: the API names the field
        add(tw, "rs-x", "--in", "1h", "--url", "http://127.0.0.1:9/x")
    result = tw("reschedule", *args)
    tw("cancel", "rs-x")
    assert result.exit_code == status, result.output
    assert message in result.stderr
    assert result.stdout == ""


# --- pause and resume ------------------------------------------------------------------------


def test_pause_and_resume_a_timer(tw: Run, service: Service) -> None:
    add(tw, "pr-1", "--in", "1h", "--url", f"{service.url}/healthz")
    paused = tw("pause", "pr-1")
    assert paused.exit_code == 0, paused.output
    assert paused.stdout.startswith("paused pr-1 · due ")
    assert ok_json(tw("get", "pr-1", "--json"))["state"] == "paused"
    assert ok_json(tw("pause", "pr-1", "--json"))["state"] == "paused"  # again: no error
    listed = tw("ls", "--state", "paused")
    assert re.search(r"^ *pr-1 +paused ", listed.stdout, re.MULTILINE), listed.stdout
    resumed = tw("resume", "pr-1")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.startswith("resumed pr-1 · due ")
    assert ok_json(tw("resume", "pr-1", "--json"))["state"] == "scheduled"
    tw("cancel", "pr-1")


def test_a_paused_timer_due_now_fires_on_resume(tw: Run, service: Service) -> None:
    add(tw, "pr-2", "--in", "2s", "--url", f"{service.url}/healthz", "--method", "get")
    assert tw("pause", "pr-2").exit_code == 0
    time.sleep(2.5)
    assert ok_json(tw("get", "pr-2", "--json"))["state"] == "paused"
    assert tw("resume", "pr-2").exit_code == 0
    wait_until(lambda: ok_json(tw("get", "pr-2", "--json"))["state"] == "done")
    refused = tw("pause", "pr-2")  # done: it cannot be paused any more
    assert refused.exit_code == 2
    assert "[HTTP 409 not_scheduled]" in refused.stderr
    assert "[HTTP 409 not_paused]" in tw("resume", "pr-2").stderr
    missing = tw("pause", "pr-never")
    assert missing.exit_code == 1
    assert "[HTTP 404 not_found]" in missing.stderr


def test_pause_a_queue_then_resume_it(tw: Run, service: Service) -> None:
    paused = tw("pause", "--queue", "flow-q")
    assert paused.exit_code == 0, paused.output
    assert paused.stdout == "paused queue flow-q · 0 scheduled, 0 leased, 0 paused\n"
    time.sleep(1.5)  # workers read queue settings every second
    add(
        tw,
        "fq-1",
        "--in",
        "0s",
        "--queue",
        "flow-q",
        "--url",
        f"{service.url}/healthz",
        "--method",
        "get",
    )
    time.sleep(1.0)
    assert ok_json(tw("get", "fq-1", "--json"))["state"] == "scheduled"  # not fired
    shown = tw("queues")
    assert re.search(r"^ *flow-q +paused +1 +0 +0 +0 +0 +\d+\.\ds +- *$", shown.stdout, re.M), (
        shown.stdout
    )
    queues = ok_json(tw("queues", "--json"))["queues"]
    (found,) = [queue for queue in queues if queue["name"] == "flow-q"]
    assert (found["paused"], found["counts"]["scheduled"]) == (True, 1)
    assert found["oldest_overdue_s"] >= 1.0
    resumed = tw("resume", "--queue", "flow-q", "--json")
    assert ok_json(resumed)["paused"] is False
    wait_until(lambda: ok_json(tw("get", "fq-1", "--json"))["state"] == "done")


def test_a_schedule_occurrence_is_left_to_its_schedule(tw: Run, service: Service) -> None:
    url = f"{service.url}/healthz"
    added = tw("schedule", "add", "--every", "1h", "--url", url, "--id", "flow-sched")
    assert added.exit_code == 0, added.output
    (run,) = ok_json(tw("schedule", "runs", "flow-sched", "--json"))["runs"]
    for args in (["pause"], ["resume"], ["reschedule", "--in", "5m"]):
        refused = tw(args[0], run["timer_id"], *args[1:])
        assert refused.exit_code == 2, refused.output
        assert "[HTTP 409 schedule_occurrence]" in refused.stderr
    assert ok_json(tw("get", run["timer_id"], "--json"))["state"] == "scheduled"
    tw("schedule", "rm", "flow-sched")


@pytest.mark.parametrize("command", ["pause", "resume"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one of ID and --queue Q"),
        (["t-1", "--queue", "q"], "give exactly one of ID and --queue Q"),
        (["--queue", ""], "'--queue': must not be empty"),
        ([""], "'ID': must not be empty"),
    ],
)
def test_pause_resume_usage(tw: Run, command: str, args: list[str], message: str) -> None:
    result = tw(command, *args)
    assert result.exit_code == 2
    assert message in " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stderr).split())


def test_a_bad_queue_name_is_refused_by_the_api(tw: Run) -> None:
    result = tw("pause", "--queue", "no such queue!")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.rstrip().endswith("[HTTP 422 invalid]")


def test_replay_the_dead_timers_of_a_queue(tw: Run, service: Service) -> None:
    # the API answers 404 to these callbacks: a permanent failure, dead-lettered at once
    for n in range(2):
        add(tw, f"dq-{n}", "--in", "0s", "--queue", "dead-q", "--url", f"{service.url}/nowhere")
    add(tw, "dq-other", "--in", "0s", "--queue", "dead-r", "--url", f"{service.url}/nowhere")

    def dead(queue: str) -> list[dict[str, Any]]:
        timers = ok_json(tw("ls", "--json", "--queue", queue, "--state", "dead"))["timers"]
        return list(timers)

    wait_until(lambda: len(dead("dead-q")) == 2 and len(dead("dead-r")) == 1)
    replayed = tw("dead", "replay", "--queue", "dead-q")
    assert (replayed.exit_code, replayed.stdout) == (0, "replayed 2 dead timers of queue dead-q\n")
    wait_until(lambda: {t["attempt"] for t in dead("dead-q")} == {2})  # and they die again
    assert [t["attempt"] for t in dead("dead-r")] == [1]
    assert ok_json(tw("dead", "replay", "--queue", "dead-none", "--json")) == {"replayed": 0}
    for args, message in [
        ([], "give exactly one of ID and --queue Q"),
        (["dq-0", "--queue", "dead-q"], "give exactly one of ID and --queue Q"),
        (["--queue", "bad queue"], "(queue) [HTTP 422 invalid]"),
    ]:
        result = tw("dead", "replay", *args)
        assert result.exit_code == 2, result.output
        assert message in " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stderr).split())


# --- limits ----------------------------------------------------------------------------------


def test_limits_on_hosts(tw: Run) -> None:
    assert tw("limit", "ls").stdout == "no limits\n"
    set_ = tw(
        "limit", "set", "api.example.com", "--rate", "50/s", "--burst", "100", "--concurrency", "10"
    )
    assert set_.exit_code == 0, set_.output
    assert set_.stdout == "limit on api.example.com: 50/s burst 100, 10 at once\n"
    hourly = ok_json(tw("limit", "set", "[::1]:8080", "--rate", "10/h", "--json"))
    assert hourly == {"host": "[::1]:8080", "rate": pytest.approx(10 / 3600), "burst": None,
                      "concurrency": None}  # fmt: skip
    per_minute = ok_json(tw("limit", "set", "b.example.com:8443", "--rate", "3000/m", "--json"))
    assert per_minute["rate"] == 50
    only_concurrency = tw("limit", "set", "c.example.com", "--concurrency", "2")
    assert only_concurrency.stdout == "limit on c.example.com: 2 at once\n"

    listed = tw("limit", "ls")
    assert listed.exit_code == 0, listed.output
    assert re.search(r"^ *api\.example\.com +50/s +100 +10 *$", listed.stdout, re.M), listed.stdout
    assert re.search(r"^ *\[::1\]:8080 +10/h +- +- *$", listed.stdout, re.M), listed.stdout
    found = ok_json(tw("limit", "ls", "--json"))
    assert [limit["host"] for limit in found["limits"]] == [
        "[::1]:8080", "api.example.com", "b.example.com:8443", "c.example.com",
    ]  # fmt: skip
    for host in ("[::1]:8080", "api.example.com", "b.example.com:8443", "c.example.com"):
        removed = tw("limit", "rm", host)
        assert (removed.exit_code, removed.stdout) == (0, f"removed the limit on {host}\n")
    again = tw("limit", "rm", "api.example.com")
    assert again.exit_code == 1
    assert "no limit on host 'api.example.com' (host) [HTTP 404 not_found]" in again.stderr
    assert ok_json(tw("limit", "ls", "--json")) == {"limits": [], "queue_limits": []}


def test_a_queue_limit_keeps_the_queue_paused(tw: Run) -> None:
    assert tw("pause", "--queue", "lim-q").exit_code == 0
    set_ = tw("limit", "set", "--queue", "lim-q", "--rate", "5", "--concurrency", "3")
    assert set_.exit_code == 0, set_.output
    assert set_.stdout == "limit on queue lim-q: 5/s, 3 at once\n"
    queues = ok_json(tw("queues", "--json"))["queues"]
    (found,) = [queue for queue in queues if queue["name"] == "lim-q"]
    assert found["paused"] is True
    assert found["limit"] == {"rate": 5.0, "burst": None, "concurrency": 3}
    assert re.search(r"^ *lim-q +paused .* 5/s, 3 at once *$", tw("queues").stdout, re.M)
    listed = tw("limit", "ls")
    assert "limits on queues" in listed.stdout
    assert re.search(r"^ *lim-q +5/s +- +3 *$", listed.stdout, re.M), listed.stdout
    assert ok_json(tw("limit", "ls", "--json"))["queue_limits"] == [
        {"queue": "lim-q", "rate": 5.0, "burst": None, "concurrency": 3}
    ]
    removed = tw("limit", "rm", "--queue", "lim-q")
    assert (removed.exit_code, removed.stdout) == (0, "removed the limit on queue lim-q\n")
    queues = ok_json(tw("queues", "--json"))["queues"]
    (found,) = [queue for queue in queues if queue["name"] == "lim-q"]
    assert (found["paused"], found["limit"]) == (True, None)
    again = tw("limit", "rm", "--queue", "lim-q")
    assert again.exit_code == 1
    assert "queue 'lim-q' has no limit" in again.stderr
    tw("resume", "--queue", "lim-q")


def _queue_requests(service: Service) -> dict[tuple[str, str], float]:
    """The service's count of answered requests to the queue routes, by (method, route)."""
    counted: dict[tuple[str, str], float] = {}
    text = httpx.get(f"{service.url}/metrics").text
    for method, route, n in re.findall(
        r'^tickwheel_http_requests_total\{method="(\w+)",route="(/v1/queues[^"]*)",'
        r'status="\d+"\} (\S+)$',
        text,
        re.M,
    ):
        counted[method, route] = counted.get((method, route), 0.0) + float(n)
    return counted


def test_a_queue_limit_is_set_and_removed_without_reading_the_queue(
    tw: Run, service: Service
) -> None:
    """`limit set|rm --queue` send the limit alone (PUT and DELETE of /limit): no read of the
    queue and no write of its pause, so a pause sent meanwhile by someone else is kept."""
    assert tw("pause", "--queue", "lim-r").exit_code == 0
    before = _queue_requests(service)
    assert tw("limit", "set", "--queue", "lim-r", "--concurrency", "2").exit_code == 0
    assert tw("limit", "rm", "--queue", "lim-r").exit_code == 0
    assert tw("limit", "rm", "--queue", "lim-r").exit_code == 1  # none left
    after = _queue_requests(service)
    sent = {key: n - before.get(key, 0.0) for key, n in after.items() if n != before.get(key)}
    assert sent == {
        ("PUT", "/v1/queues/{queue}/limit"): 1.0,
        ("DELETE", "/v1/queues/{queue}/limit"): 2.0,
    }
    (found,) = [q for q in ok_json(tw("queues", "--json"))["queues"] if q["name"] == "lim-r"]
    assert (found["paused"], found["limit"]) == (True, None)
    tw("resume", "--queue", "lim-r")


def test_limit_rm_of_a_bad_queue_name_is_refused_by_the_api(tw: Run) -> None:
    """Only the API's 404 naming the queue means "no limit"; a name with a slash finds no
    route at all (404 too), and other bad names are invalid (422)."""
    for queue, status, answer in (
        ("bad queue", 2, "(queue) [HTTP 422 invalid]"),
        ("x" * 65, 2, "(queue) [HTTP 422 invalid]"),
        ("a/b", 1, "Not Found [HTTP 404 not_found]"),
    ):
        result = tw("limit", "rm", "--queue", queue)
        assert result.exit_code == status, (queue, result.output)
        assert answer in result.stderr
        assert "has no limit" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["h.example", "--rate", "0/s"], "out of range"),
        (["h.example", "--rate", "-1"], "not a rate"),
        (["h.example", "--rate", "1e999/s"], "not a rate"),
        (["h.example", "--rate", "50/fortnight"], "not a rate"),
        (["h.example"], "give --rate, --concurrency or both"),
        (["h.example", "--burst", "5", "--concurrency", "2"], "needs a --rate"),
        (["h.example", "--rate", "5", "--burst", "0"], "--burst"),
        (["h.example", "--rate", "5", "--burst", "100001"], "--burst"),
        (["h.example", "--rate", "5", "--burst", "1e999"], "--burst"),
        (["h.example", "--concurrency", "0"], "--concurrency"),
        (["h.example", "--concurrency", "10001"], "--concurrency"),
        (["--rate", "5"], "give exactly one of HOST and --queue Q"),
        (["h.example", "--queue", "q", "--rate", "5"], "give exactly one of HOST and --queue Q"),
        (["https://h.example/hook", "--rate", "5"], "(host) [HTTP 422 invalid]"),
        (["H.Example", "--rate", "5"], "(host) [HTTP 422 invalid]"),
        (["h.example:0", "--rate", "5"], "(host) [HTTP 422 invalid]"),
        (["h" * 300, "--rate", "5"], "(host) [HTTP 422 invalid]"),
        (["--queue", "bad queue", "--rate", "5"], "[HTTP 422 invalid]"),
    ],
)
def test_limit_set_refusals(tw: Run, args: list[str], message: str) -> None:
    result = tw("limit", "set", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stderr).split())
    assert ok_json(tw("limit", "ls", "--json"))["limits"] == []


# --- ls filters ------------------------------------------------------------------------------


def test_ls_by_queue_state_and_due_range(tw: Run, service: Service) -> None:
    url = f"{service.url}/healthz"
    for n, due in enumerate(
        ["2030-01-01T00:00:00Z", "2030-01-02T00:00:00Z", "2030-01-03T00:00:00Z"]
    ):
        add(tw, f"lsq-{n}", "--at", due, "--queue", "ls-a", "--url", url)
    add(tw, "lsq-other", "--at", "2030-01-02T00:00:00Z", "--queue", "ls-b", "--url", url)
    assert tw("pause", "lsq-2").exit_code == 0

    def ids(*args: str) -> list[str]:
        return [t["id"] for t in ok_json(tw("ls", "--json", *args))["timers"]]

    assert ids("--queue", "ls-a") == ["lsq-0", "lsq-1", "lsq-2"]
    assert ids("--queue", "ls-a", "--state", "scheduled") == ["lsq-0", "lsq-1"]
    assert ids("--queue", "ls-a", "--state", "paused") == ["lsq-2"]
    assert ids("--queue", "ls-a", "--due-from", "2030-01-02T00:00:00Z") == ["lsq-1", "lsq-2"]
    assert ids("--queue", "ls-a", "--due-to", "2030-01-02T00:00:00Z") == ["lsq-0"]
    in_range = ids("--due-from", "2030-01-01T12:00:00Z", "--due-to", "2030-01-02T12:00:00+00:00")
    assert sorted(in_range) == ["lsq-1", "lsq-other"]
    assert ids("--queue", "ls-a", "--limit", "2") == ["lsq-0", "lsq-1"]
    shown = tw("ls", "--queue", "ls-a", "--state", "scheduled")
    assert shown.stdout.splitlines()[0].rstrip() == "2 scheduled timers in queue ls-a"
    assert tw("ls", "--queue", "ls-none").stdout == "no timers in queue ls-none\n"
    for n in range(3):
        tw("cancel", f"lsq-{n}")
    tw("cancel", "lsq-other")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--state", "sleeping"], "must be one of scheduled, leased, paused, done, dead"),
        (["--queue", ""], "must not be empty"),
        (["--queue", "no such queue"], "(queue) [HTTP 422 invalid]"),
        (["--due-from", "tomorrow"], "not a time"),
        (["--due-to", "2030-01-01T00:00:00"], "not a time"),
        (["--due-from", "1e400"], "not a time"),
        (["--due-from", "9" * 30], "too far a time"),
        (["--due-from", "2030-01-02T00:00:00Z", "--due-to", "2030-01-01T00:00:00Z"], "before"),
        (["--due-from", "2030-01-01T00:00:00Z", "--due-to", "2030-01-01T01:00:00+01:00"], "before"),
        (["--watch", "--interval", "0s"], "--interval"),
        (["--watch", "--interval", "2h"], "--interval"),
        (["--watch", "--interval", "soon"], "not a duration"),
    ],
)
def test_ls_refusals(tw: Run, args: list[str], message: str) -> None:
    result = tw("ls", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stderr).split())


# --- ls --watch ------------------------------------------------------------------------------


def _watch(directory: Path, api: str, *args: str) -> Process:
    return Process(directory, "ls", "--watch", "--interval", "0.2", *args, "--api", api)


def _read_until(watch: Process, pattern: str, timeout_s: float = 15.0) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while not (lines and re.search(pattern, lines[-1])):
        lines.append(watch.read_line(max(0.1, deadline - time.monotonic())))
    return lines


def test_watch_refreshes_until_ctrl_c(tw: Run, service: Service, tmp_path: Path) -> None:
    watch = _watch(tmp_path, service.url, "--queue", "watch-q")
    try:
        assert re.fullmatch(
            rf"{re.escape(service.url)} · \d\d:\d\d:\d\d UTC · every 0.2s · Ctrl-C ends",
            watch.first_line.rstrip(),
        ), watch.first_line
        _read_until(watch, r"^no timers in queue watch-q$")
        add(tw, "watch-1", "--in", "1h", "--queue", "watch-q", "--url", f"{service.url}/x")
        seen = _read_until(watch, r"^ *watch-1 +scheduled ")
        assert any(line.startswith("1 timer in queue watch-q") for line in seen), seen
    finally:
        status = watch.stop(signal.SIGINT)
    assert status == 0
    assert watch.stderr() == ""
    tw("cancel", "watch-1")


def test_watch_json_is_one_page_a_line(service: Service, tmp_path: Path) -> None:
    watch = _watch(tmp_path, service.url, "--json", "--queue", "watch-json")
    try:
        pages = [json.loads(watch.first_line), json.loads(watch.read_line())]
    finally:
        status = watch.stop(signal.SIGINT)
    assert pages == [{"timers": [], "cursor": None}] * 2
    assert (status, watch.stderr()) == (0, "")


@pytest.mark.parametrize("as_json", [False, True])
def test_watch_outlives_the_service_going_away(tmp_path: Path, as_json: bool) -> None:
    gone = Service(tmp_path, "--store", "memory://", "--no-worker")
    watch = _watch(tmp_path, gone.url, *(["--json"] if as_json else []))
    try:
        if as_json:
            assert json.loads(watch.first_line) == {"timers": [], "cursor": None}
            gone.stop()
            failed = json.loads(_read_until(watch, r'^\{"error": ')[-1])
            assert failed["error"].startswith(f"cannot reach the tickwheel API at {gone.url} (")
            assert json.loads(watch.read_line())["error"] == failed["error"]  # and it goes on
        else:
            _read_until(watch, r"^no timers$")
            gone.stop()
            _read_until(watch, r"^error: cannot reach the tickwheel API at .* every 0.2s\)$")
            _read_until(watch, r"Ctrl-C ends$")  # and it goes on
    finally:
        status = watch.stop(signal.SIGINT)
        gone.stop()
    assert (status, watch.stderr()) == (0, "")


def test_watch_of_an_unreachable_service_fails_at_once() -> None:
    api = free_api()
    result = CliRunner().invoke(app, ["ls", "--watch", "--api", api])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"cannot reach the tickwheel API at {api}" in result.stderr


@pytest.mark.parametrize(
    "args",
    [["pause", "t-1"], ["resume", "--queue", "q"], ["queues"], ["limit", "ls"],
     ["limit", "set", "h.example", "--rate", "5"], ["limit", "rm", "--queue", "q"],
     ["reschedule", "t-1", "--in", "5m"]],
)  # fmt: skip
def test_an_unreachable_service_is_one_line(args: list[str]) -> None:
    api = free_api()
    result = CliRunner().invoke(app, [*args, "--api", api])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: cannot reach the tickwheel API at {api} (connection refused): "
        f"is `tickwheel serve` running at {api}?\n"
    )
