"""Secrets given on the command line or read from a file, which keeps them out of ``ps``."""

from __future__ import annotations

import typer

from tickwheel.cli.app import fail
from tickwheel.errors import InvalidArgument
from tickwheel.service.secret_file import read_secret_file


def secret_from(ctx: typer.Context, name: str, value: str | None, path: str | None) -> str | None:
    """Return the secret of option `name`, given as its value or in the file its ``_file`` names.

    A flag wins over a variable, as it does for every option; two of the same kind, or a file
    that cannot be used, end the command with status 2. The secret is never shown.
    """
    value = value or None
    path = path or None
    if value is not None and path is not None:
        options = (name, f"{name}_file")
        on_command_line = [_source(ctx, option) == "COMMANDLINE" for option in options]
        if on_command_line == [True, False]:
            path = None
        elif on_command_line == [False, True]:
            value = None
        else:
            fail(f"give {_named(ctx, name)} or {_named(ctx, f'{name}_file')}, not both", 2)
    if path is None:
        return value
    try:
        return read_secret_file(path, _named(ctx, f"{name}_file"))
    except InvalidArgument as error:
        fail(str(error), 2)


def _source(ctx: typer.Context, name: str) -> str | None:
    """Return where option `name` came from: ``COMMANDLINE``, ``ENVIRONMENT``, ``DEFAULT``."""
    source = ctx.get_parameter_source(name)
    return None if source is None else source.name


def _named(ctx: typer.Context, name: str) -> str:
    """Return how the user gave option `name`: its flag, or the variable it came from."""
    for param in ctx.command.params:
        if param.name == name:
            if _source(ctx, name) == "ENVIRONMENT" and isinstance(param.envvar, str):
                return param.envvar
            return param.opts[0]
    return name
