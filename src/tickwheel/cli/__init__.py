"""The ``tickwheel`` command: run the service, and talk to a running one.

Exit statuses: 0 success, 1 failure (an API error, an unreachable service, a missing timer),
2 bad input (a usage error, or the API refusing the request as invalid).

The command comes with the ``service`` extra. Without it this package still imports, so that
`main` can say in one line what to install instead of ending in a traceback.
"""

import sys

# what the service extra brings that the command imports (directly, or as typer does)
_SERVICE_PACKAGES = frozenset(
    {
        "click",
        "fastapi",
        "httptools",
        "httpx",
        "prometheus_client",
        "pydantic",
        "rich",
        "starlette",
        "typer",
        "uvicorn",
    }
)


def _needs_service(error: ModuleNotFoundError) -> bool:
    return (error.name or "").partition(".")[0] in _SERVICE_PACKAGES


def _missing_service(error: ModuleNotFoundError) -> int:
    print(
        f"tickwheel: the command needs the service extra ({error.name} is not installed): "
        "pip install 'tickwheel[service]'",
        file=sys.stderr,
    )
    return 2


try:
    from tickwheel.cli import (
        bulk,
        commands,
        defaults,
        flow,
        importer,
        migrate,
        processes,
        schedules,
    )
    from tickwheel.cli.app import app
    from tickwheel.cli.parse import parse_duration, parse_header, parse_time
except ModuleNotFoundError as _error:
    if not _needs_service(_error):
        raise
    _missing: ModuleNotFoundError | None = _error
else:
    _missing = None


def main() -> None:
    """Entry point of the ``tickwheel`` script and ``python -m tickwheel``."""
    if _missing is not None:
        raise SystemExit(_missing_service(_missing))
    try:
        app(prog_name="tickwheel")
    except ModuleNotFoundError as error:  # a command's own import, say uvicorn for serve
        if not _needs_service(error):
            raise
        raise SystemExit(_missing_service(error)) from None


__all__ = [
    "app",
    "bulk",
    "commands",
    "defaults",
    "flow",
    "importer",
    "main",
    "migrate",
    "parse_duration",
    "parse_header",
    "parse_time",
    "processes",
    "schedules",
]
