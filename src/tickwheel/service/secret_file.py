"""Secrets kept in files (a token, a signing secret), read so that no error ever shows them.

Apart from `settings.py` because the settings and the tenants file (`tenants.py`) both read
secret files, and the settings load the tenants.
"""

from __future__ import annotations

from pathlib import Path

from tickwheel.errors import InvalidArgument

MAX_SECRET_FILE_BYTES = 64 * 1024
"""A secret file longer than this is the wrong file (a log, a device), not a secret."""


def read_secret_file(path: str | Path, argument: str) -> str:
    """Return the secret held in the file at `path`, without its trailing newline.

    The secret itself never appears in an error; `argument` (the flag or variable that named
    the file) does.

    Raises:
        InvalidArgument: the file cannot be read, is empty, is not UTF-8 text or is over
            `MAX_SECRET_FILE_BYTES`.
    """
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_SECRET_FILE_BYTES + 1)
    except OSError as error:
        raise InvalidArgument(argument, f"cannot read {path}: {error.strerror or error}") from None
    if len(raw) > MAX_SECRET_FILE_BYTES:
        raise InvalidArgument(argument, f"{path} is over {MAX_SECRET_FILE_BYTES} bytes")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InvalidArgument(argument, f"{path} is not UTF-8 text") from None
    # one trailing newline is what editors and `echo` add; anything else is the secret's own
    secret = text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
    if not secret:
        raise InvalidArgument(argument, f"{path} is empty")
    return secret
