"""The ``tickwheel`` command: run the service, and talk to a running one.

Exit statuses: 0 success, 1 failure (an API error, an unreachable service, a missing timer),
2 bad input (a usage error, or the API refusing the request as invalid).
"""

from tickwheel.cli import commands, processes
from tickwheel.cli.app import app, main
from tickwheel.cli.parse import parse_duration, parse_header, parse_time

__all__ = ["app", "commands", "main", "parse_duration", "parse_header", "parse_time", "processes"]
