"""Secrets given on the command line or read from a file, which keeps them out of ``ps``."""

from __future__ import annotations

import typer

from tickwheel.cli.app import fail
from tickwheel.errors import InvalidArgument
from tickwheel.service.secret_file import read_secret_file

Given = tuple[str | None, bool, str, str]
"""An option's value, whether it came from the command line, its flag and its variable."""


def secret_of(value: Given, path: Given) -> str | None:
    """Return the secret given as `value` or in the file `path` names.

    A flag wins over a variable, as it does for every option; two of the same kind, or a file
    that cannot be used, end the command with status 2. The secret is never shown.
    """
    secret, secret_flag, secret_name, secret_var = value
    file, file_flag, file_name, file_var = path
    if secret is not None and file is not None:
        if secret_flag and not file_flag:
            file = None
        elif file_flag and not secret_flag:
            secret = None
        else:
            named = (secret_name, file_name) if secret_flag else (secret_var, file_var)
            fail(f"give {named[0]} or {named[1]}, not both", 2)
    if file is None:
        return secret
    try:
        return read_secret_file(file, file_name if file_flag else file_var)
    except InvalidArgument as error:
        fail(str(error), 2)


def secret_from(ctx: typer.Context, name: str, value: str | None, path: str | None) -> str | None:
    """Return the secret of the command's option `name`, given as its value or in the file its
    ``_file`` option names (see `secret_of`)."""
    return secret_of(_given(ctx, name, value), _given(ctx, f"{name}_file", path))


def _given(ctx: typer.Context, name: str, value: str | None) -> Given:
    source = ctx.get_parameter_source(name)
    for param in ctx.command.params:
        if param.name == name:
            flag = param.opts[0]
            variable = param.envvar if isinstance(param.envvar, str) else flag
            from_flag = source is not None and source.name == "COMMANDLINE"
            return value or None, from_flag, flag, variable
    return value or None, False, name, name
