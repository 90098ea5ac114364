"""``tickwheel import``: create timers from a JSON-lines file, in batches, with a progress bar.

Each line is one ``POST /v1/timers`` body. Lines go out through ``POST /v1/timers/batch``; a
line that is not a JSON object, or that the API refuses, is reported by its number (in line
order: a batch's reports are printed once the API has answered it) and the others are created.
A batch the API refuses as a whole (too large a body, say) is split in halves until the line at
fault stands alone, so one bad line never costs its neighbours.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, BinaryIO, NoReturn

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tickwheel.cli.app import app, err, fail
from tickwheel.cli.session import client_of, emit, ended_by
from tickwheel.client import Client
from tickwheel.client.calls import Answer, failure
from tickwheel.errors import ServiceError, ServiceUnreachable

MAX_LINE_BYTES = 1024 * 1024
"""The longest line read (a timer's body and payload are at most 64 KiB each)."""
BATCH_TIMERS = 1000
"""Timers a request: the batch route's bound."""
BATCH_BYTES = 1024 * 1024
"""Request body a batch, well under the service's default limit of 4 MiB."""
WHOLE_REFUSALS = frozenset({400, 413, 422})
"""A batch's statuses that refuse the request itself, before any timer of it is stored."""
_SKIP_BYTES = 64 * 1024
_BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class Tally:
    """What became of the file's timers so far."""

    timers: int = 0
    created: int = 0
    existing: int = 0
    failed: int = 0

    def summary(self) -> str:
        return (
            f"{self.created} created, {self.existing} existing, {self.failed} failed "
            f"of {self.timers} timers"
        )


@dataclass(frozen=True, slots=True)
class Line:
    """A line holding a timer: its number, the timer, and its size as JSON."""

    number: int
    timer: dict[str, Any]
    size: int


class Importer:
    """Sends timers in batches and reports the lines that failed, in line order."""

    def __init__(self, client: Client, progress: Progress) -> None:
        self.client = client
        self.progress = progress
        self.tally = Tally()
        self.at = 1
        """The first line not yet sent: where the import stopped if it ends early."""
        self.reports: list[tuple[int, str]] = []
        """Failed lines not yet printed: those of the batch being gathered, or just sent."""

    def report(self, number: int, problem: str) -> None:
        """Count line `number` as failed; `print_reports` says why."""
        self.tally.failed += 1
        self.reports.append((number, problem))

    def print_reports(self) -> None:
        """Print the failed lines so far on stderr, above the progress bar, by number."""
        for number, problem in sorted(self.reports):
            self.progress.console.print(f"line {number}: {escape(problem)}", soft_wrap=True)
        self.reports.clear()

    def send(self, batch: list[Line]) -> None:
        """Create the batch's timers; split it on a refusal of the request as a whole."""
        self.at = batch[0].number
        try:
            results = self.client.add_many([line.timer for line in batch])
        except ServiceError as error:
            if error.status not in WHOLE_REFUSALS:
                raise
            if len(batch) == 1:
                self.report(batch[0].number, str(error))
                return
            half = len(batch) // 2
            self.send(batch[:half])
            self.send(batch[half:])
            return
        for line, result in zip(batch, results, strict=True):
            status = result.get("status")
            if status == 201:
                self.tally.created += 1
            elif status == 200:
                self.tally.existing += 1
            else:
                refusal = failure(Answer(int(status or 0), result))
                self.report(line.number, str(refusal))


def _lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None, int]]:
    """Yield each line's number, its bytes (None when over `MAX_LINE_BYTES`) and the bytes read."""
    number = 0
    while raw := stream.readline(MAX_LINE_BYTES + 1):
        number += 1
        consumed = len(raw)
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := stream.readline(_SKIP_BYTES)) and not rest.endswith(b"\n"):
                consumed += len(rest)
            yield number, None, consumed + len(rest)
            continue
        yield number, raw.removeprefix(_BOM) if number == 1 else raw, consumed


def _not_a_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is out of a number's range")
    return value


def parse_line(raw: bytes) -> dict[str, Any] | str:
    """Return one line's timer, or why it holds none: a timer is a JSON object, with finite
    numbers only (JSON has no others)."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_not_a_constant, parse_float=_finite)
    except UnicodeDecodeError:
        return "not UTF-8"
    except ValueError as error:
        return f"not JSON: {error}"
    except RecursionError:
        return "not JSON: nested too deeply"
    if not isinstance(value, dict):
        return "not a JSON object: write one timer object a line"
    return value


def _open(file: str) -> tuple[BinaryIO, int | None]:
    """The file's binary stream and its size when it has one (stdin and pipes do not)."""
    if file == "-":
        return sys.stdin.buffer, None
    try:
        stream = open(file, "rb")  # noqa: SIM115 (closed by the caller, after the import)
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror or error}", 2)
    info = os.fstat(stream.fileno())
    return stream, info.st_size if stat.S_ISREG(info.st_mode) else None


def _run(importer: Importer, stream: BinaryIO, total: int | None) -> None:
    progress = importer.progress
    task = progress.add_task("import", total=total, tally="")
    batch: list[Line] = []
    batch_bytes = 0
    read = 0

    def flush(next_line: int) -> None:
        nonlocal batch, batch_bytes
        if batch:
            importer.send(batch)
        batch, batch_bytes = [], 0
        importer.at = next_line
        importer.print_reports()
        progress.update(task, completed=read, tally=importer.tally.summary())

    for number, raw, consumed in _lines(stream):
        read += consumed
        if raw is not None and not raw.strip():
            continue
        importer.tally.timers += 1
        timer = f"longer than {MAX_LINE_BYTES} bytes" if raw is None else parse_line(raw)
        if isinstance(timer, str):
            importer.report(number, timer)
            if len(importer.reports) >= BATCH_TIMERS:  # held until the batch before them is sent
                flush(number + 1)
            continue
        size = len(json.dumps(timer)) + 1
        if batch and batch_bytes + size > BATCH_BYTES:
            flush(number)
        batch.append(Line(number, timer, size))
        batch_bytes += size
        if len(batch) == BATCH_TIMERS:
            flush(number + 1)
    flush(0)


def _stopped(importer: Importer) -> str:
    return (
        f"the import stopped at line {importer.at}: it and the lines after it were not sent "
        f"(so far {importer.tally.summary()})"
    )


@app.command("import")
def import_timers(
    ctx: typer.Context,
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE",
            help="JSON lines: one POST /v1/timers body a line (blank lines skipped); - is stdin.",
        ),
    ],
) -> None:
    """Create timers from a JSON-lines file, 1,000 a request; bad lines are reported by number
    and the rest created (exit status 2 when any line failed)."""
    client = client_of(ctx)
    stream, total = _open(file)
    progress = Progress(
        TextColumn("importing"),
        BarColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal,
    )
    importer = Importer(client, progress)
    try:
        with client, stream, progress:
            _run(importer, stream, total)
    except (ServiceError, ServiceUnreachable) as error:
        importer.print_reports()
        why, status = ended_by(error)
        fail(f"{why}; {_stopped(importer)}", status)
    except KeyboardInterrupt:
        importer.print_reports()
        fail(f"interrupted; {_stopped(importer)}", 130)
    tally = importer.tally
    counts = {
        "timers": tally.timers,
        "created": tally.created,
        "existing": tally.existing,
        "failed": tally.failed,
    }
    emit(ctx, counts, lambda: f"imported {file}: {tally.summary()}")
    if tally.failed:
        raise typer.Exit(2)
