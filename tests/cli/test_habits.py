"""What a user of the command expects without reading its help: global options anywhere, one
line for a usage error, a refused typo in a JSON body, tables that fit 100 columns."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tickwheel.cli import app

from .cli_support import Run, Service, ok_json, sqlite_service, wait_until

pytestmark = pytest.mark.timeout(120)

service = sqlite_service("habits")
ROOT = Path(__file__).resolve().parents[2]


def test_global_options_before_or_after_the_command(service: Service) -> None:
    runner = CliRunner()
    before = runner.invoke(app, ["--api", service.url, "--json", "stats"])
    after = runner.invoke(app, ["stats", "--json", "--api", service.url])
    joined = runner.invoke(app, ["schedule", "ls", f"--api={service.url}", "--json"])
    for result in (before, after, joined):
        assert result.exit_code == 0, result.output
    assert set(json.loads(before.stdout)) == set(json.loads(after.stdout))
    assert json.loads(joined.stdout)["schedules"] == []


def test_a_value_that_looks_like_a_global_option_stays_a_value(tw: Run, service: Service) -> None:
    url = f"{service.url}/healthz"
    added = ok_json(
        tw("add", "--in", "1h", "--url", url, "--id", "h-text", "--text", "--json", "--json")
    )
    assert added["callback"]["body"] == "--json"
    tw("cancel", "h-text")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ls", "--bogus"], "error: No such option: --bogus (see tickwheel ls --help)"),
        (["add", "--in", "1s"], "error: Missing option '--url'. (see tickwheel add --help)"),
        (["schedule", "nope"], "error: No such command 'nope'. (see tickwheel schedule --help)"),
        (["ls", "--api"], "error: Option '--api' requires an argument."),
    ],
)
def test_a_usage_error_is_one_line_with_status_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message + "\n")


def test_data_must_be_json_and_text_goes_as_it_is(tw: Run, service: Service) -> None:
    url = f"{service.url}/healthz"
    typo = tw("add", "--in", "1h", "--url", url, "-d", '{"order": 42')
    assert typo.exit_code == 2
    [line] = typo.stderr.splitlines()
    assert "is not JSON" in line
    assert "give --text for a text body" in line
    both = tw("add", "--in", "1h", "--url", url, "-d", "{}", "--text", "x")
    assert both.exit_code == 2
    assert "give --data or --text, not both" in both.stderr
    text = ok_json(
        tw("add", "--in", "1h", "--url", url, "--id", "h-t", "--text", "order 42", "--json")
    )
    assert text["callback"]["body"] == "order 42"
    assert "content-type" not in {name.lower() for name in text["callback"]["headers"]}
    sent = ok_json(
        tw("add", "--in", "1h", "--url", url, "--id", "h-j", "-d", '{"order": 42}', "--json")
    )
    assert sent["callback"]["headers"] == {"content-type": "***"}
    for timer_id in ("h-t", "h-j"):
        tw("cancel", timer_id)


def test_tables_fit_100_columns_without_trailing_spaces(tw: Run, service: Service) -> None:
    long_url = f"{service.url}/no-such-hook/" + "x" * 150
    long_id = "h-" + "i" * 80
    ok_json(
        tw(
            "add",
            "--in",
            "0s",
            "--url",
            long_url,
            "--id",
            long_id,
            "--queue",
            "h-" + "q" * 60,
            "--json",
        )
    )
    ok_json(
        tw("add", "--in", "1h", "--url", long_url, "--id", "h-wide", "--queue", "h-wide", "--json")
    )
    ok_json(
        tw("schedule", "add", "--every", "1h", "--url", long_url, "--id", "h-" + "s" * 70, "--json")
    )
    host = "h-" + "l" * 60 + ".limits." + "l" * 30 + ".example"
    ok_json(tw("limit", "set", host, "--rate", "5/s", "--json"))
    # the dead letter, with its long last error, is among the rows shown
    wait_until(lambda: long_id in {t["id"] for t in ok_json(tw("dead", "--json"))["timers"]})
    listings = (["ls"], ["dead"], ["queues"], ["schedule", "ls"], ["limit", "ls"], ["stats"])
    views = [tw(*args) for args in listings] + [tw("get", "h-wide")]
    assert "LAST ERROR" in views[1].stdout
    for shown in views:
        assert shown.exit_code == 0, shown.output
        for line in shown.stdout.splitlines():
            assert len(line) <= 100, line
            assert line == line.rstrip(), repr(line)
    listed = tw("ls", "--queue", "h-wide").stdout
    assert "…" in listed  # the long URL is cut in the table
    assert long_url in tw("ls", "--queue", "h-wide", "--json").stdout  # and whole in JSON


def test_make_run_takes_a_port_and_a_store() -> None:
    done = subprocess.run(
        ["make", "-n", "run", "PORT=9090", "STORE=sqlite:///tmp/run.db"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [command] = [line for line in done.stdout.splitlines() if "tickwheel serve" in line]
    assert command.split()[1:] == [
        "serve",
        "--allow-private-targets",
        "--port",
        "'9090'",
        "--store",
        "'sqlite:///tmp/run.db'",
    ]


@pytest.mark.parametrize("command", [["ls"], ["dead", "replay"], ["schedule", "add"], ["import"]])
def test_a_client_command_s_help_names_the_global_options(command: list[str]) -> None:
    shown = CliRunner().invoke(app, [*command, "--help"])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())
    assert "Global options, before or after the command: --api URL" in text
    assert "--json" in text


def test_the_service_s_help_keeps_its_own_token() -> None:
    shown = CliRunner().invoke(app, ["serve", "--help"])
    assert "Global options" not in shown.stdout
    assert "--token" in shown.stdout
