"""``tickwheel schedule`` against a real ``tickwheel serve`` process on a SQLite file.

The commands run in process (typer's `CliRunner`), as in test_cli.py; the service fires the
occurrences of a schedule at its own /healthz, so a run can be watched end to end.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .cli_support import Run, ok_json, sqlite_service, wait_until
from .test_cli import Service

pytestmark = pytest.mark.timeout(120)

service = sqlite_service("schedule-cli")


def test_add_get_ls_pause_resume_rm(tw: Run, service: Service) -> None:
    url = f"{service.url}/healthz"
    args = [
        "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--url", url, "--id", "cli-s",
        "-H", "X-Key:abc", "--misfire", "skip", "--jitter", "30s", "--max-runs", "100",
    ]  # fmt: skip
    added = tw("schedule", "add", *args)
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith("created cli-s · cron 0 9 * * 1-5 (Europe/Berlin) · next run ")
    assert added.stdout.rstrip().endswith(f"POST {url}")
    again = tw("schedule", "add", *args)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("exists (unchanged) cli-s")

    schedule = ok_json(tw("schedule", "get", "cli-s", "--json"))
    assert (schedule["misfire"], schedule["jitter"], schedule["max_runs"]) == ("skip", 30, 100)
    assert schedule["callback"]["headers"] == {"X-Key": "***"}
    assert len(schedule["upcoming"]) == 5
    shown = tw("schedule", "get", "cli-s")
    assert shown.exit_code == 0, shown.output
    assert re.search(r"rule\s+cron 0 9 \* \* 1-5 \(Europe/Berlin\)", shown.stdout)
    assert re.search(r"state\s+active", shown.stdout)
    assert schedule["upcoming"][4] in shown.stdout
    assert "X-Key: ***" in shown.stdout

    listed = tw("schedule", "ls")
    assert listed.exit_code == 0, listed.output
    assert re.search(r"^ *cli-s +cron 0 9 .* active ", listed.stdout, re.MULTILINE), listed.stdout
    assert "cli-s" in {item["id"] for item in ok_json(tw("schedule", "ls", "--json"))["schedules"]}

    paused = tw("schedule", "pause", "cli-s")
    assert (paused.exit_code, paused.stdout) == (0, "paused cli-s\n")
    assert re.search(r"^ *cli-s .* paused ", tw("schedule", "ls").stdout, re.MULTILINE)
    resumed = tw("schedule", "resume", "cli-s")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout == f"resumed cli-s · next run {schedule['next_run']}\n"

    runs = tw("schedule", "runs", "cli-s")
    assert runs.exit_code == 0, runs.output
    assert re.search(rf"cli-s@{schedule['next_run_ms']} +scheduled +0", runs.stdout)

    removed = tw("schedule", "rm", "cli-s")
    assert (removed.exit_code, removed.stdout) == (0, "deleted cli-s\n")
    missing = tw("schedule", "rm", "cli-s")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "error: no schedule 'cli-s' (id) [HTTP 404 not_found]"
    for command in ("get", "pause", "resume", "runs"):
        assert tw("schedule", command, "cli-s").exit_code == 1


def test_every_fires_and_its_runs_show(tw: Run, service: Service) -> None:
    added = tw(
        "schedule", "add", "--every", "1s", "--url", f"{service.url}/healthz", "--method", "get",
        "--id", "cli-every", "--json",
    )  # fmt: skip
    schedule = ok_json(added)
    assert (schedule["every"], schedule["callback"]["method"]) == (1, "GET")

    def fired() -> list[dict[str, Any]]:
        runs = ok_json(tw("schedule", "runs", "cli-every", "--json"))["runs"]
        return [run for run in runs if not run["pending"] and run["state"] == "done"]

    wait_until(lambda: len(fired()) >= 2)
    done = fired()
    assert done[0]["nominal_ms"] - done[1]["nominal_ms"] == 1000  # newest first, a second apart
    assert done[-1]["nominal_ms"] == schedule["next_run_ms"]
    shown = tw("schedule", "runs", "cli-every")
    assert re.search(r"cli-every@\d+ +done +1", shown.stdout), shown.stdout
    assert tw("schedule", "pause", "cli-every").exit_code == 0
    assert ok_json(tw("schedule", "get", "cli-every", "--json"))["runs"] >= 2
    assert tw("schedule", "rm", "cli-every").exit_code == 0


def test_a_payload_schedule_for_a_queue(tw: Run) -> None:
    args = [
        "--every", "1h", "--queue", "reports", "--payload", '{"n": 1}', "--id", "cli-q",
        "--start", "2030-01-01T10:00:00+01:00", "--end", "2031-01-01T00:00:00Z",
    ]  # fmt: skip
    schedule = ok_json(tw("schedule", "add", *args, "--json"))
    assert (schedule["queue"], schedule["payload"]) == ("reports", {"n": 1})
    assert schedule["callback"] is None
    assert schedule["start"] == "2030-01-01T09:00:00.000Z"
    assert schedule["end"] == "2031-01-01T00:00:00.000Z"
    assert "queue reports" in tw("schedule", "ls").stdout
    tw("schedule", "rm", "cli-q")


def test_an_occurrence_timer_cannot_be_cancelled(tw: Run, service: Service) -> None:
    schedule = ok_json(
        tw(
            "schedule",
            "add",
            "--every",
            "1h",
            "--url",
            f"{service.url}/x",
            "--id",
            "cli-o",
            "--json",
        )
    )
    occurrence = f"cli-o@{schedule['next_run_ms']}"
    assert re.search(r"state\s+scheduled", tw("get", occurrence).stdout)
    refused = tw("cancel", occurrence)
    assert refused.exit_code == 2
    assert "pause, change or delete the schedule instead" in refused.stderr
    assert "[HTTP 409 schedule_occurrence]" in refused.stderr
    tw("schedule", "rm", "cli-o")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1/x"], "exactly one of --cron and --every"),
        (["--cron", "* * * * *", "--every", "1m", "--url", "http://x/"], "exactly one of"),
        (["--every", "1m"], "give --url (an HTTP callback) or --payload"),
        (["--every", "soon", "--url", "http://127.0.0.1/x"], "not a duration"),
        (["--every", "1m", "--payload", "{nope"], "is not JSON"),
        (["--every", "1m", "--url", "http://x/", "--misfire", "later"], "--misfire"),
        (["--every", "1m", "--url", "http://x/", "--start", "tomorrow"], "not a time"),
        (["--every", "1m", "--url", "http://x/", "--max-runs", "0"], "--max-runs"),
    ],
)
def test_bad_input_exits_2(tw: Run, args: list[str], message: str) -> None:
    result = tw("schedule", "add", *args)
    assert result.exit_code == 2
    # click's error box wraps long lines
    assert message in " ".join(result.stderr.replace("│", " ").split())


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--cron", "61 * * * *"], "(cron)"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Olympus"], "(timezone)"),
        (["--every", "500ms"], "(every)"),
        (["--every", "1m", "--jitter", "2h"], "(jitter)"),
        (["--every", "1m", "--id", "a@b"], "(id)"),
    ],
)
def test_api_refusals_name_the_field_and_exit_2(tw: Run, args: list[str], field: str) -> None:
    result = tw("schedule", "add", *args, "--url", "http://127.0.0.1/x")
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line
    assert line.endswith(f"{field} [HTTP 422 invalid]"), line


def test_no_schedules_and_a_conflict(tw: Run, service: Service) -> None:
    url = f"{service.url}/x"
    assert tw("schedule", "add", "--every", "1h", "--url", url, "--id", "cli-c").exit_code == 0
    clash = tw("schedule", "add", "--every", "2h", "--url", url, "--id", "cli-c")
    assert clash.exit_code == 2
    assert "[HTTP 409 conflict]" in clash.stderr
    assert tw("schedule", "rm", "cli-c").exit_code == 0
    runs = tw("schedule", "runs", "never-was")
    assert runs.exit_code == 1
