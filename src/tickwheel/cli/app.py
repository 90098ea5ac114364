"""The ``tickwheel`` Typer app, its consoles, and how a command fails."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from tickwheel.model import replace_controls

app = typer.Typer(
    name="tickwheel",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dead_app = typer.Typer(
    help="List dead-lettered timers, or replay one: tickwheel dead replay ID.",
    no_args_is_help=False,
)
app.add_typer(dead_app, name="dead")
schedule_app = typer.Typer(
    help="Recurring timers: tickwheel schedule add | ls | get | pause | resume | rm | runs.",
    no_args_is_help=True,
)
app.add_typer(schedule_app, name="schedule")
limit_app = typer.Typer(
    help="Rate and concurrency limits on callback hosts and queues: tickwheel limit set | ls | rm.",
    no_args_is_help=True,
)
app.add_typer(limit_app, name="limit")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"tickwheel {version('tickwheel')}", markup=False)
        raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
) -> None:
    """Run work at a chosen future time: the timer service and its client."""


# piped output is read by scripts and people alike: no wrapping of rows at 80 columns
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False)


def fail(message: str, status: int = 1) -> NoReturn:
    # the message may quote the service, which may quote a receiver or another user
    err.print(f"[bold red]error:[/] {escape(replace_controls(message))}", soft_wrap=True)
    raise typer.Exit(status)
