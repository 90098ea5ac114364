"""The options shared by ``add`` and ``schedule add`` (a callback, its retry policy) and the parts
of the API's body they make."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from tickwheel.cli.parse import parse_duration, parse_header, parse_time

MethodOption = Annotated[str, typer.Option("--method", help="The callback's HTTP method.")]
HeaderOption = Annotated[
    list[str] | None, typer.Option("--header", "-H", help="A callback header, Name:value.")
]
DataOption = Annotated[
    str | None,
    typer.Option("--data", "-d", help="The callback's JSON body (sent as application/json)."),
]
TextOption = Annotated[
    str | None, typer.Option("--text", help="The callback's body as text, sent as it is.")
]
MaxAttemptsOption = Annotated[
    int | None, typer.Option("--max-attempts", min=1, help="Attempts before dead-lettering.")
]
TimeoutOption = Annotated[
    str | None, typer.Option("--timeout", help="How long one attempt may take: 10s, 2m.")
]


def callback_of(
    url: str, method: str, header: list[str] | None, data: str | None, text: str | None
) -> dict[str, Any]:
    """The API's `callback`: ``--data`` must be JSON and gets a JSON content-type (unless a
    header sets one); ``--text`` goes as it is.

    Raises:
        typer.BadParameter: both bodies, a `data` that is not JSON, or a header without a colon.
    """
    if data is not None and text is not None:
        raise typer.BadParameter("give --data or --text, not both", param_hint="'--data'")
    headers = dict(parse_header(line) for line in header or ())
    if data is not None:
        try:
            json.loads(data)
        except ValueError as error:
            raise typer.BadParameter(
                f"is not JSON ({error}): give --text for a text body", param_hint="'--data'"
            ) from None
        if not any(name.lower() == "content-type" for name in headers):
            headers["content-type"] = "application/json"
    callback: dict[str, Any] = {"url": url, "method": method.upper(), "headers": headers}
    body = data if data is not None else text
    if body is not None:
        callback["body"] = body
    return callback


def when_of(in_: str | None, at: str | None) -> dict[str, Any]:
    """The API's ``delay`` or ``due`` from exactly one of ``--in`` and ``--at``."""
    if in_ is not None and at is None:
        return {"delay": parse_duration(in_)}
    if at is not None and in_ is None:
        return {"due": parse_time(at)}
    raise typer.BadParameter("give exactly one of --in and --at", param_hint="'--in' / '--at'")


def one_of(argument: str | None, queue: str | None, name: str) -> None:
    """Refuse both or neither of a positional `name` and ``--queue``, and empty ones."""
    if (argument is None) == (queue is None):
        raise typer.BadParameter(
            f"give exactly one of {name} and --queue Q", param_hint=f"'{name}' / '--queue'"
        )
    if argument == "" or queue == "":
        hint = "'--queue'" if queue == "" else f"'{name}'"
        raise typer.BadParameter("must not be empty", param_hint=hint)


def retry_of(max_attempts: int | None, timeout: str | None) -> dict[str, Any]:
    """The API's `retry` from the options; empty for the default policy."""
    retry: dict[str, Any] = {}
    if max_attempts is not None:
        retry["max_attempts"] = max_attempts
    if timeout is not None:
        retry["timeout"] = parse_duration(timeout)
    return retry
