"""The ``tickwheel`` command against a real ``tickwheel serve`` process on a SQLite file.

Client commands run in process (typer's `CliRunner`) so the module stays quick; ``--help``,
``python -m tickwheel`` and the service itself run as real processes.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tickwheel.callbacks.signing import sign
from tickwheel.cli import app, parse_duration, parse_time
from tickwheel.stores.redaction import redact

from .cli_support import Process, Run, Service, sqlite_service, wait_until

pytestmark = pytest.mark.timeout(120)

COMMANDS = (
    "serve", "worker", "receiver", "add", "get", "reschedule", "cancel", "ls", "dead", "stats",
    "pause", "resume", "queues", "limit", "import", "schedule", "bench",
)  # fmt: skip


service = sqlite_service("cli")


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("1h30m", 5400),
     ("1.5s", 1.5), ("0s", 0), ("45", 45), (" 2m 5s ", 125)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5x", "-1s", "s", "1h-5m", "nan", "inf", "1e3s", "5 minutes"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="not a duration"):
        parse_duration(text)


def test_times() -> None:
    assert parse_time("2030-01-01T10:00:00+01:00") == "2030-01-01T09:00:00.000Z"
    assert parse_time("2030-01-01T09:00:00.5Z") == "2030-01-01T09:00:00.500Z"
    assert parse_time("1893488400") == 1893488400.0
    for bad in ("2030-01-01T09:00:00", "tomorrow", "2030-13-01T00:00:00Z"):
        with pytest.raises(typer.BadParameter, match="not a time"):
            parse_time(bad)


def test_redact_hides_the_password_only() -> None:
    assert redact("redis://:hunter2@10.0.0.1:6380/0") == "redis://:***@10.0.0.1:6380/0"
    assert redact("redis://ada:hunter2@host/0") == "redis://ada:***@host/0"
    assert redact("redis://:p/a@ss@host:1/0") == "redis://:***@host:1/0"
    assert redact("redis+cluster://h:7000") == "redis+cluster://h:7000"
    assert redact("sqlite:///./tickwheel.db") == "sqlite:///./tickwheel.db"


# --- processes -------------------------------------------------------------------------------


def test_help_lists_every_command_from_the_script_and_the_module() -> None:
    script = Path(sys.executable).with_name("tickwheel")
    for command in ([str(script), "--help"], [sys.executable, "-m", "tickwheel", "--help"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        for name in COMMANDS:
            assert re.search(rf"^\W*{name}\s", done.stdout, re.MULTILINE), (name, done.stdout)


def test_startup_line_names_url_store_and_worker(service: Service) -> None:
    assert service.first_line.startswith(f"tickwheel serving {service.url} · store sqlite:///")
    assert service.first_line.rstrip().endswith("· worker on · queues all")


# --- client commands -------------------------------------------------------------------------


def test_add_get_ls_cancel(tw: Run, service: Service) -> None:
    url = f"{service.url}/healthz"
    added = tw("add", "--in", "1h", "--url", url, "--id", "cli-a", "-H", "X-Key:abc", "-d", "{}")
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith("created cli-a · due ")
    again = tw("add", "--in", "1h", "--url", url, "--id", "cli-a", "-H", "X-Key:abc", "-d", "{}")
    assert again.exit_code == 0, again.output
    assert "exists" in again.stdout

    shown = tw("get", "cli-a")
    assert shown.exit_code == 0, shown.output
    assert re.search(r"state\s+scheduled", shown.stdout)
    assert "X-Key: ***" in shown.stdout  # header values stay secret
    timer = json.loads(tw("get", "cli-a", "--json").stdout)
    assert timer["callback"] == {
        "url": url,
        "method": "POST",
        "headers": {"X-Key": "***", "content-type": "***"},
        "body": "{}",
    }
    assert 3_590_000 < timer["due_ms"] - int(time.time() * 1000) <= 3_600_000

    listed = tw("ls", "--state", "scheduled")
    assert listed.exit_code == 0, listed.output
    assert re.search(r"^ *cli-a +scheduled ", listed.stdout, re.MULTILINE), listed.stdout
    page = json.loads(tw("ls", "--json", "--limit", "1000").stdout)
    assert "cli-a" in {t["id"] for t in page["timers"]}

    cancelled = tw("cancel", "cli-a")
    assert (cancelled.exit_code, cancelled.stdout) == (0, "cancelled cli-a\n")
    missing = tw("cancel", "cli-a")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "error: no timer 'cli-a' (id) [HTTP 404 not_found]"
    assert tw("get", "cli-a").exit_code == 1


def test_add_fires_and_is_done(tw: Run, service: Service) -> None:
    added = tw(
        "add", "--in", "100ms", "--url", f"{service.url}/healthz", "--method", "get", "--json"
    )
    assert added.exit_code == 0, added.output
    timer = json.loads(added.stdout)
    assert (timer["state"], timer["callback"]["method"]) == ("scheduled", "GET")
    wait_until(lambda: json.loads(tw("get", timer["id"], "--json").stdout)["state"] == "done")


def test_add_at_a_time(tw: Run, service: Service) -> None:
    added = tw("add", "--at", "2030-01-01T10:00:00+01:00", "--url", f"{service.url}/x", "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["due"] == "2030-01-01T09:00:00.000Z"
    tw("cancel", json.loads(added.stdout)["id"])


def test_dead_letters_and_replay(tw: Run, service: Service) -> None:
    # the API answers 404 to this callback: a permanent failure, dead-lettered at once
    added = tw("add", "--in", "0s", "--url", f"{service.url}/no-such-hook", "--id", "cli-dead")
    assert added.exit_code == 0, added.output

    def dead_ids() -> set[str]:
        return {t["id"] for t in json.loads(tw("dead", "--json").stdout)["timers"]}

    wait_until(lambda: "cli-dead" in dead_ids())
    listed = tw("dead")
    assert re.search(r"^ *cli-dead +dead ", listed.stdout, re.MULTILINE), listed.stdout
    assert "404" in listed.stdout  # the last error
    replayed = tw("dead", "replay", "cli-dead")
    assert replayed.exit_code == 0, replayed.output
    assert replayed.stdout.startswith("replayed cli-dead · due ")
    wait_until(lambda: "cli-dead" in dead_ids())  # and it fails again
    assert json.loads(tw("get", "cli-dead", "--json").stdout)["attempt"] == 2
    assert tw("dead", "replay", "never-was").exit_code == 1


def test_stats(tw: Run) -> None:
    found = json.loads(tw("stats", "--json").stdout)
    assert set(found["counts"]) == {"scheduled", "leased", "paused", "done", "dead"}
    shown = tw("stats")
    assert shown.exit_code == 0
    assert re.search(r"scheduled\s+\d+", shown.stdout)
    assert "earliest due:" in shown.stdout


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "--in", "5x", "--url", "http://127.0.0.1/x"], "not a duration"),
        (["add", "--at", "tomorrow", "--url", "http://127.0.0.1/x"], "not a time"),
        (["add", "--url", "http://127.0.0.1/x"], "exactly one of --in and --at"),
        (["add", "--in", "1s", "--at", "0", "--url", "http://127.0.0.1/x"], "exactly one of"),
        (["add", "--in", "1s", "--url", "http://127.0.0.1/x", "-H", "nocolon"], "not a header"),
        (["ls", "--state", "sleeping"], "must be one of"),
        (["ls", "--limit", "0"], "--limit"),
    ],
)
def test_bad_input_exits_2(tw: Run, args: list[str], message: str) -> None:
    result = tw(*args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_api_refusal_is_one_line_and_exit_2(tw: Run) -> None:
    result = tw("add", "--in", "1s", "--url", "ftp://example.com/x")
    assert result.exit_code == 2
    assert result.stdout == ""
    line = result.stderr.strip()
    assert "\n" not in line
    assert line.startswith("error: ")
    assert line.endswith("(callback.url) [HTTP 422 invalid]")


def test_unreachable_api_is_a_clear_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        api = f"http://127.0.0.1:{probe.getsockname()[1]}"
    result = CliRunner().invoke(app, ["ls", "--api", api])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: cannot reach the tickwheel API at {api} (connection refused): "
        f"is `tickwheel serve` running at {api}?"
    )


def test_token_from_flag_or_environment_and_sigint(tmp_path: Path) -> None:
    secured = Service(tmp_path, "--store", "memory://", "--token", "s3cret", "--no-worker")
    try:
        assert secured.first_line.rstrip().endswith("· worker off")
        runner = CliRunner()
        refused = runner.invoke(app, ["stats", "--api", secured.url], env={"TICKWHEEL_TOKEN": ""})
        assert refused.exit_code == 1
        assert "[HTTP 401 unauthorized]" in refused.stderr
        by_flag = runner.invoke(app, ["stats", "--api", secured.url, "--token", "s3cret"])
        assert by_flag.exit_code == 0, by_flag.output
        by_env = runner.invoke(
            app,
            ["stats", "--json"],
            env={"TICKWHEEL_TOKEN": "s3cret", "TICKWHEEL_API": secured.url},
        )
        assert by_env.exit_code == 0, by_env.output
    finally:
        assert secured.stop(signal.SIGINT) == 0, secured.stderr()


def test_serve_errors(tmp_path: Path, service: Service) -> None:
    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tickwheel", "serve", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    bad_store = serve("--store", "bogus://x", "--port", "0")
    assert bad_store.returncode == 2
    assert "is not a store URL" in bad_store.stderr
    port = service.url.rsplit(":", 1)[1]
    taken = serve("--store", "memory://", "--port", port)
    assert taken.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr


def test_bench_runs_the_engine_benchmark_with_its_arguments(tmp_path: Path) -> None:
    script = tmp_path / "engine.py"
    script.write_text(
        "import sys\n"
        "print('[1/2] warming up', file=sys.stderr)\n"
        "print('args', sys.argv[1:])\n"
        "print('a note', file=sys.stderr)\n"
        "print('| table |')\n"
        "sys.exit(3)\n"
    )
    result = CliRunner().invoke(app, ["bench", "--quick", "--bench-dir", str(tmp_path), "-q"])
    assert result.exit_code == 3  # the benchmark's own status
    assert result.stdout.splitlines() == ["args ['--quick', '-q']", "| table |"]
    # not on a terminal there is no bar: progress lines pass through with the rest of stderr
    assert result.stderr.splitlines() == ["[1/2] warming up", "a note"]


def test_bench_finds_the_checkout_around_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "engine.py").write_text("print('ran')\n")
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")
    result = CliRunner().invoke(app, ["bench"])
    assert (result.exit_code, result.stdout) == (0, "ran\n")


@pytest.mark.parametrize("given", [False, True])
def test_bench_outside_a_checkout_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["bench", "--bench-dir", str(tmp_path)] if given else ["bench"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert "not found" in result.stderr
    assert ("--bench-dir names" if given else "tickwheel checkout") in result.stderr


def test_receiver_without_the_testing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if aiohttp were not installed
    for name in ("tickwheel.testing", "tickwheel.testing.receiver"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    result = CliRunner().invoke(app, ["receiver", "--port", "0"])
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert "pip install 'tickwheel[testing]'" in result.stderr


@pytest.mark.parametrize("args", [[], ["ls"], ["serve", "--help"]])
def test_the_command_without_the_service_extra_names_it(args: list[str]) -> None:
    # a fresh interpreter in which typer, and so the command line, cannot be imported
    code = (
        "import sys\n"
        "sys.modules['typer'] = None\n"
        f"sys.argv = ['tickwheel', *{args!r}]\n"
        "from tickwheel.cli import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "pip install 'tickwheel[service]'" in result.stderr


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"tickwheel {version('tickwheel')}\n")


def test_receiver_prints_signed_callbacks_from_serve(tmp_path: Path) -> None:
    receiver = Process(tmp_path, "receiver", "--port", "0", "--secret", "s3cret")
    signer = None
    try:
        found = re.fullmatch(r"receiving on (http://\S+)", receiver.first_line)
        assert found, receiver.first_line
        signer = Service(
            tmp_path,
            "--store",
            "memory://",
            "--signing-secret",
            "s3cret",
            "--allow-private-targets",
        )
        added = CliRunner().invoke(
            app,
            [
                "add",
                "--in",
                "0s",
                "--url",
                f"{found[1]}/hook",
                "--id",
                "signed",
                "--api",
                signer.url,
            ],
        )
        assert added.exit_code == 0, added.output
        line = receiver.read_line(15)
        assert re.fullmatch(r"POST /hook timer=signed attempt=1 late_ms=\d+\.\d signature=ok", line)
    finally:
        if signer is not None:
            assert signer.stop() == 0, signer.stderr()
        receiver.stop()


@pytest.mark.parametrize(("flags", "verdict"), [((), "BAD"), (("--accept-v1",), "ok")])
def test_receiver_refuses_v1_alone_unless_told_to_accept_it(
    tmp_path: Path, flags: tuple[str, ...], verdict: str
) -> None:
    receiver = Process(tmp_path, "receiver", "--port", "0", "--secret", "s3cret", *flags)
    try:
        found = re.fullmatch(r"receiving on (http://\S+)", receiver.first_line)
        assert found, receiver.first_line
        v1_only = sign("s3cret", b"{}", int(time.time()))  # no method, target: no v2
        request = urllib.request.Request(
            f"{found[1]}/hook",
            data=b"{}",
            headers={"Tickwheel-Signature": v1_only, "Tickwheel-Timer-Id": "t-1"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
        line = receiver.read_line(15)
        assert line.endswith(f"signature={verdict}"), line
    finally:
        receiver.stop()


def test_user_text_is_printed_as_is(tw: Run, service: Service) -> None:
    url = f"{service.url}/[b]"
    added = tw(
        "add", "--in", "1h", "--url", url, "--id", "cli-markup", "--queue", "markup",
        "--text", "[/bold] [red]x",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    shown = tw("get", "cli-markup")
    assert shown.exit_code == 0, shown.output
    assert "[/bold] [red]x" in shown.stdout
    # its own queue and a short URL: a table cuts a long field to fit its width
    assert f"POST {url}" in tw("ls", "--queue", "markup").stdout
    tw("cancel", "cli-markup")


def test_add_replace_and_retry_options(tw: Run, service: Service) -> None:
    url = f"{service.url}/healthz"
    first = tw("add", "--in", "1h", "--url", url, "--id", "cli-r", "--max-attempts", "3")
    assert first.exit_code == 0, first.output
    clash = tw("add", "--in", "2h", "--url", url, "--id", "cli-r")
    assert clash.exit_code == 2
    assert "[HTTP 409 conflict]" in clash.stderr
    replaced = tw(
        "add", "--in", "2h", "--url", url, "--id", "cli-r", "--replace", "--timeout", "2m", "--json"
    )
    assert replaced.exit_code == 0, replaced.output
    timer = json.loads(replaced.stdout)
    assert (timer["retry"]["timeout"], timer["retry"]["max_attempts"]) == (120.0, 10)
    assert tw("add", "--in", "2h", "--url", url, "--replace").exit_code == 2
    tw("cancel", "cli-r")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "bogus://x"], "is not a store URL"),
        (["--store", "memory://", "--queue", ""], "invalid queue name"),
        (["--store", "memory://", "--concurrency", "0"], "--concurrency"),
    ],
)
def test_worker_bad_input_exits_2(args: list[str], message: str) -> None:
    command = [sys.executable, "-m", "tickwheel", "worker", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
