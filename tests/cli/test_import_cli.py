"""``tickwheel import`` against a real ``tickwheel serve`` process on a SQLite file.

The command runs in process (typer's `CliRunner`), as in test_cli.py; the service is real, on
loopback, and every count is checked against what the API then holds.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tickwheel.cli import app, importer
from tickwheel.service.schemas import MAX_BATCH

from .cli_support import Run, Service, sqlite_service

pytestmark = pytest.mark.timeout(120)

service = sqlite_service("import-cli", "--no-worker")


def timer(timer_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": timer_id, "delay": 3600, "payload": {"n": timer_id}, **fields}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def state_of(tw: Run, timer_id: str) -> str | None:
    shown = tw("get", timer_id, "--json")
    return json.loads(shown.stdout)["state"] if shown.exit_code == 0 else None


def test_the_route_bound_is_the_batch_size() -> None:
    assert importer.BATCH_TIMERS == MAX_BATCH


def test_good_lines_are_created_and_bad_ones_reported_by_number(tw: Run, tmp_path: Path) -> None:
    lines = [
        json.dumps(timer("imp-1")),
        "",  # blank lines are skipped, but still counted in the numbering
        "not json",
        "   ",
        json.dumps([timer("imp-list")]),
        '{"id": "imp-nan", "delay": NaN, "payload": 1}',
        '{"id": "imp-inf", "delay": 1e999, "payload": 1}',
        json.dumps(timer("imp-ftp", payload=None, callback={"url": "ftp://example.com/x"})),
        "{}",
        json.dumps(timer("imp-2", queue="emails")),
        '{"id": "imp-trunc", ',
        json.dumps(timer("imp-huge", payload="x" * (importer.MAX_LINE_BYTES + 10))),
        json.dumps(timer("imp-3")),
        "[" * 100_000 + "]" * 100_000,
    ]
    path = write_lines(tmp_path / "timers.jsonl", lines)
    path.write_bytes(
        path.read_bytes() + b'\xff{"id": "imp-latin"}\n' + json.dumps(timer("imp-4")).encode()
    )
    result = tw("import", str(path))
    assert result.exit_code == 2, result.output
    assert result.stdout == f"imported {path}: 4 created, 0 existing, 10 failed of 14 timers\n"
    reported = dict(line.split(": ", 1) for line in result.stderr.splitlines())
    assert list(reported) == [f"line {n}" for n in (3, 5, 6, 7, 8, 9, 11, 12, 14, 15)]  # in order
    assert set(reported) == {f"line {n}" for n in (3, 5, 6, 7, 8, 9, 11, 12, 14, 15)}
    assert reported["line 3"].startswith("not JSON: Expecting value")
    assert reported["line 5"] == "not a JSON object: write one timer object a line"
    assert reported["line 6"] == "not JSON: NaN is not a JSON number"
    assert reported["line 7"] == "not JSON: 1e999 is out of a number's range"
    assert reported["line 8"].endswith("(callback.url) [HTTP 422 invalid]")
    assert reported["line 9"].endswith("[HTTP 422 invalid]")
    assert reported["line 11"].startswith("not JSON: Expecting property name")
    assert reported["line 12"] == f"longer than {importer.MAX_LINE_BYTES} bytes"
    assert reported["line 14"] == "not JSON: nested too deeply"
    assert reported["line 15"] == "not UTF-8"
    for timer_id in ("imp-1", "imp-2", "imp-3", "imp-4"):
        assert state_of(tw, timer_id) == "scheduled"
    assert json.loads(tw("get", "imp-2", "--json").stdout)["queue"] == "emails"
    assert state_of(tw, "imp-ftp") is None

    again = tw("import", str(path), "--json")
    assert again.exit_code == 2
    assert json.loads(again.stdout) == {"timers": 14, "created": 0, "existing": 4, "failed": 10}


def test_several_batches_and_a_clash_with_a_stored_timer(tw: Run, tmp_path: Path) -> None:
    count = 2 * importer.BATCH_TIMERS + 500
    lines = [json.dumps(timer(f"many-{n}")) for n in range(count)]
    assert tw("add", "--in", "1h", "--url", "http://127.0.0.1:9/x", "--id", "many-7").exit_code == 0
    path = write_lines(tmp_path / "many.jsonl", lines)
    result = tw("import", str(path))
    assert result.exit_code == 2, result.output
    assert result.stdout.endswith(f"{count - 1} created, 0 existing, 1 failed of {count} timers\n")
    assert result.stderr.startswith("line 8: ")  # many-7 exists with another spec
    assert result.stderr.rstrip().endswith("[HTTP 409 conflict]")
    for n in (0, importer.BATCH_TIMERS - 1, importer.BATCH_TIMERS, count - 1):
        assert state_of(tw, f"many-{n}") == "scheduled"


def test_many_bad_lines_are_reported_in_order(tw: Run, tmp_path: Path) -> None:
    count = 2 * importer.BATCH_TIMERS + 500
    lines = [*(["{"] * count), json.dumps(timer("after-bad"))]
    lines[1500] = json.dumps(timer("among-bad"))
    path = write_lines(tmp_path / "bad.jsonl", lines)
    result = tw("import", str(path))
    assert result.exit_code == 2
    numbers = [int(line.split(":")[0].removeprefix("line ")) for line in result.stderr.splitlines()]
    assert numbers == [n for n in range(1, count + 1) if n != 1501]
    assert result.stdout.endswith(
        f"2 created, 0 existing, {count - 1} failed of {count + 1} timers\n"
    )
    assert state_of(tw, "among-bad") == state_of(tw, "after-bad") == "scheduled"


def test_a_progress_bar_on_a_terminal(service: Service, tmp_path: Path) -> None:
    lines = [json.dumps(timer(f"bar-{n}")) for n in range(1500)]
    lines[700] = "oops"
    path = write_lines(tmp_path / "bar.jsonl", lines)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "tickwheel", "import", str(path), "--api", service.url],
        env={**env, "FORCE_COLOR": "1"},  # rich draws on stderr as on a terminal
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == f"imported {path}: 1499 created, 0 existing, 1 failed of 1500 timers\n"
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stderr)
    assert "line 701: not JSON: Expecting value" in plain
    # the bar, full at the end, and the tally beside it
    assert re.search(r"\nimporting ━+ 1499 created, 0 existing, 1 failed of 1500 timers ", plain)


def test_stdin_with_a_byte_order_mark(tw: Run) -> None:
    text = "\n".join(json.dumps(timer(f"stdin-{n}")) for n in range(3))
    result = tw("import", "-", input=b"\xef\xbb\xbf" + text.encode())
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    assert result.stdout == "imported -: 3 created, 0 existing, 0 failed of 3 timers\n"
    assert state_of(tw, "stdin-2") == "scheduled"


def test_an_empty_file_imports_nothing(tw: Run, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "empty.jsonl", ["", "  ", ""])
    result = tw("import", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"timers": 0, "created": 0, "existing": 0, "failed": 0}


@pytest.mark.parametrize("name", ["missing.jsonl", "."])
def test_a_file_that_cannot_be_read(tw: Run, tmp_path: Path, name: str) -> None:
    result = tw("import", str(tmp_path / name))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: cannot read {tmp_path / name}: ")
    assert len(result.stderr.splitlines()) == 1


def test_an_unreachable_service_stops_at_the_first_line_not_sent(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        api = f"http://127.0.0.1:{probe.getsockname()[1]}"
    path = write_lines(tmp_path / "t.jsonl", ["oops", json.dumps(timer("never"))])
    result = CliRunner().invoke(app, ["import", str(path), "--api", api])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "line 1: not JSON: Expecting value: line 1 column 1 (char 0)",
        f"error: cannot reach the tickwheel API at {api} (connection refused): is `tickwheel "
        f"serve` running at {api}?; the import stopped at line 2: it and the lines after it "
        "were not sent (so far 0 created, 0 existing, 1 failed of 2 timers)",
    ]


def test_a_refused_token_stops_the_import(tmp_path: Path) -> None:
    secured = Service(tmp_path, "--store", "memory://", "--token", "s3cret", "--no-worker")
    try:
        path = write_lines(tmp_path / "t.jsonl", [json.dumps(timer("tok"))])
        result = CliRunner().invoke(
            app, ["import", str(path), "--api", secured.url], env={"TICKWHEEL_TOKEN": "wrong"}
        )
        assert result.exit_code == 1
        assert "[HTTP 401 unauthorized]; the import stopped at line 1" in result.stderr
    finally:
        secured.stop()


def test_batches_over_a_small_body_limit_are_split_to_the_line_at_fault(tmp_path: Path) -> None:
    # 64 KiB of body at most: a batch of these lines is refused whole (413) and split in
    # halves until each request fits; the one line too large alone is reported
    small = Service(
        tmp_path, "--store", "memory://", "--no-worker", env={"TICKWHEEL_MAX_BODY_BYTES": "65536"}
    )
    try:
        lines = [json.dumps(timer(f"big-{n}", payload="y" * 20_000)) for n in range(12)]
        lines[5] = json.dumps(timer("big-5", payload="z" * 65_500))
        path = write_lines(tmp_path / "big.jsonl", lines)
        result = CliRunner().invoke(app, ["import", str(path), "--api", small.url])
        assert result.exit_code == 2, result.output
        assert result.stdout.endswith("11 created, 0 existing, 1 failed of 12 timers\n")
        assert result.stderr.startswith("line 6: the body is over the limit of 65536 bytes")
        assert result.stderr.rstrip().endswith("[HTTP 413 payload_too_large]")
        assert len(result.stderr.splitlines()) == 1
        listed = CliRunner().invoke(app, ["ls", "--json", "--limit", "100", "--api", small.url])
        assert {t["id"] for t in json.loads(listed.stdout)["timers"]} == {
            f"big-{n}" for n in range(12) if n != 5
        }
    finally:
        small.stop()
