"""The ``tickwheel`` Typer app: its global options, its consoles, and how a command fails.

The options every client command takes (`--api`, `--token`, `--token-file`, `--json`) are
declared once, on the app, and read with `options`. They may stand before the command or after
it: `CliGroup` moves them in front before parsing (``tickwheel ls --api URL`` is ``tickwheel
--api URL ls``). A usage error is one line on stderr and exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

# typer forked click at 0.26; its errors are those of the fork
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer.core import TyperGroup

from tickwheel.client.transport import DEFAULT_API
from tickwheel.model import replace_controls

WIDTH = 100
"""Columns of piped output: tables fit it (long fields cut with …; --json has them whole)."""
PROCESS_COMMANDS = frozenset({"serve", "worker", "receiver", "bench", "migrate"})
"""Commands that are no client of the API: their options stay theirs (serve has a ``--token``)."""
GLOBAL_FLAGS = frozenset({"--json"})
GLOBAL_VALUES = frozenset({"--api", "--token", "--token-file"})
GLOBAL_HELP = (
    "Global options, before or after the command: --api URL, --token T or --token-file PATH, "
    "--json (tickwheel --help says more)."
)


@dataclass(frozen=True, slots=True)
class Options:
    """The global options, and whether each secret came from the command line."""

    api: str
    token: str | None
    token_file: str | None
    as_json: bool
    token_flag: bool
    token_file_flag: bool


class CliGroup(TyperGroup):
    """The root command: global options anywhere, usage errors in one line."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, command in self.commands.items():
            if name not in PROCESS_COMMANDS:
                _name_global_options(command)

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = hoisted(self, list(sys.argv[1:] if args is None else args))
        try:
            result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as error:
            error.show()
            result = error.exit_code
        except ClickException as error:
            if not standalone_mode:
                raise
            err.print(f"[bold red]error:[/] {escape(usage_line(error))}", soft_wrap=True)
            result = error.exit_code
        except typer.Abort:
            err.print("aborted", markup=False)
            result = 1
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


def _name_global_options(command: Any) -> None:
    """End the help of `command`, and of its subcommands, with the global options."""
    command.epilog = command.epilog or GLOBAL_HELP
    for sub in getattr(command, "commands", {}).values():
        _name_global_options(sub)


def usage_line(error: ClickException) -> str:
    """`error`'s message in one line, with where to read more."""
    message = " ".join(replace_controls(error.format_message()).split())
    ctx = getattr(error, "ctx", None)
    return message if ctx is None else f"{message} (see {ctx.command_path} --help)"


def hoisted(root: TyperGroup, args: list[str]) -> list[str]:
    """`args` with the global options given after a client command moved before it.

    What follows the command is read with the command's own options, so the value of one of
    them (``--data --json``) stays its value; after ``--`` nothing moves."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        at += 2 if args[at] in GLOBAL_VALUES else 1
    if at >= len(args) or args[at] in PROCESS_COMMANDS:
        return args
    takes_value = set(GLOBAL_VALUES)
    command: Any = root
    moved: list[str] = []
    kept: list[str] = []
    rest = iter(args[at:])
    for arg in rest:
        if arg == "--":
            kept.extend([arg, *rest])
            break
        if arg.partition("=")[0] in GLOBAL_VALUES:
            value = [] if "=" in arg else list(islice(rest, 1))
            if "=" not in arg and not value:  # last, without its value: click says so
                return [*args[:at], *moved, arg]
            moved.extend([arg, *value])
        elif arg in GLOBAL_FLAGS:
            moved.append(arg)
        elif arg in takes_value:  # a value missing at the end stays missing, for click to say
            kept.extend([arg, *islice(rest, 1)])
        else:
            kept.append(arg)
            sub = getattr(command, "commands", {}).get(arg)
            if sub is not None and not arg.startswith("-"):
                command = sub
                takes_value |= _value_options(sub)
    return [*args[:at], *moved, *kept]


def _value_options(command: Any) -> set[str]:
    """The options of `command` that take a value."""
    names: set[str] = set()
    for param in getattr(command, "params", ()):
        if getattr(param, "param_type_name", "") == "option" and not param.is_flag:
            names.update(param.opts)
    return names


app = typer.Typer(
    name="tickwheel",
    cls=CliGroup,
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
    ctx: typer.Context,
    api: Annotated[
        str, typer.Option("--api", envvar="TICKWHEEL_API", metavar="URL", help="The service's URL.")
    ] = DEFAULT_API,
    token: Annotated[
        str | None,
        typer.Option(
            "--token", envvar="TICKWHEEL_TOKEN", help="Bearer token of the API.", show_default=False
        ),
    ] = None,
    token_file: Annotated[
        str | None,
        typer.Option(
            "--token-file",
            envvar="TICKWHEEL_TOKEN_FILE",
            metavar="PATH",
            help="Read the bearer token from this file (keeps it out of `ps`).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the API's JSON instead of a table.")
    ] = False,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
) -> None:
    """Run work at a chosen future time: the timer service and its client.

    The options above go with every client command, before or after it."""
    ctx.obj = Options(
        api=api,
        token=token or None,
        token_file=token_file or None,
        as_json=as_json,
        token_flag=_from_command_line(ctx, "token"),
        token_file_flag=_from_command_line(ctx, "token_file"),
    )


def _from_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def options(ctx: typer.Context) -> Options:
    """The global options of the command running in `ctx`."""
    found: Options = ctx.find_root().obj
    return found


# piped output is read by scripts and people alike: tables fit 100 columns, lines are not wrapped
out = Console(highlight=False, width=None if sys.stdout.isatty() else WIDTH)
err = Console(stderr=True, highlight=False)


def fail(message: str, status: int = 1) -> NoReturn:
    # the message may quote the service, which may quote a receiver or another user
    err.print(f"[bold red]error:[/] {escape(replace_controls(message))}", soft_wrap=True)
    raise typer.Exit(status)
