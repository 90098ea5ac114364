"""The client commands' two ends: the `Client` the global options name, and one output path that
prints the API's JSON with ``--json`` and a view for people without it."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import RenderableType

from tickwheel.cli.app import fail, options, out
from tickwheel.cli.secret_files import secret_of
from tickwheel.client import Client
from tickwheel.errors import ServiceError, ServiceUnreachable

_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$")
"""Spaces at a line's end, before any closing style codes."""


def token_of(ctx: typer.Context) -> str | None:
    """The token of ``--token`` or ``--token-file`` (or their variables); bad ones exit 2."""
    given = options(ctx)
    return secret_of(
        (given.token, given.token_flag, "--token", "TICKWHEEL_TOKEN"),
        (given.token_file, given.token_file_flag, "--token-file", "TICKWHEEL_TOKEN_FILE"),
    )


def unreachable(error: ServiceUnreachable) -> str:
    """The line for an API nothing answers at."""
    return f"{error}: is `tickwheel serve` running at {error.base_url}?"


def ended_by(error: ServiceError | ServiceUnreachable) -> tuple[str, int]:
    """The line and exit status that `error` ends a command with (2: the request was wrong)."""
    if isinstance(error, ServiceUnreachable):
        return unreachable(error), 1
    return str(error), 2 if error.bad_input else 1


def client_of(ctx: typer.Context) -> Client:
    """The client of the API the global options name; a bad URL or token exits 2."""
    try:
        return Client(options(ctx).api, token_of(ctx))
    except ValueError as error:
        fail(str(error), 2)


@contextmanager
def api(ctx: typer.Context) -> Iterator[Client]:
    """`client_of`, open while the block runs; an error of the API ends the command in one
    line on stderr."""
    client = client_of(ctx)
    try:
        with client:
            yield client
    except (ServiceError, ServiceUnreachable) as error:
        fail(*ended_by(error))


def emit(ctx: typer.Context, body: Any, view: Callable[[], RenderableType | str]) -> None:
    """Print `body`, the API's JSON, with ``--json``; else `view()` for people."""
    if options(ctx).as_json:
        print_json(body)
    else:
        render(view())


def render(shown: RenderableType | str) -> None:
    """Print a line or a table without trailing spaces (a string is printed as is, no markup)."""
    with out.capture() as captured:
        if isinstance(shown, str):
            out.print(shown, markup=False, soft_wrap=True)
        else:
            out.print(shown)
    lines = captured.get().splitlines()
    sys.stdout.write("".join(_TRAILING.sub(r"\1", line) + "\n" for line in lines))
    sys.stdout.flush()


def print_json(body: Any) -> None:
    """Write `body` as indented JSON."""
    sys.stdout.write(json.dumps(body, indent=2) + "\n")


def print_line(body: Any) -> None:
    """Write `body` as one line of JSON and flush it: a reader of a stream sees it at once."""
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()
