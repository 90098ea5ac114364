"""Exceptions raised by tickwheel, all under one root.

::

    TickwheelError
     ├── InvalidArgument (ValueError)    bad input, named by `argument`
     └── Closed (RuntimeError)           the scheduler or queue was closed
"""

from __future__ import annotations


class TickwheelError(Exception):
    """Root of every error tickwheel raises on purpose."""


class InvalidArgument(TickwheelError, ValueError):
    """An argument was rejected; `argument` names it so a caller can act."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument


class Closed(TickwheelError, RuntimeError):
    """The scheduler or queue was closed and accepts no more work."""
