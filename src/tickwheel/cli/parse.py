"""Parsing the CLI's durations, times, rates and headers into what the API takes."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

import typer

from tickwheel.stores.limit import MAX_RATE, MIN_RATE

_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d+")


def parse_duration(text: str) -> float:
    """Return seconds for ``500ms``, ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m`` or a bare number.

    Raises:
        typer.BadParameter: the text is no duration.
    """
    compact = text.strip().lower().replace(" ", "")
    if _NUMBER.fullmatch(compact):
        seconds = float(compact)
    else:
        parts = _PART.findall(compact)
        if not compact or "".join(number + unit for number, unit in parts) != compact:
            raise typer.BadParameter(
                f"{text!r} is not a duration: write e.g. 500ms, 30s, 5m, 2h or 1h30m"
            )
        seconds = sum(float(number) * _UNITS_S[unit] for number, unit in parts)
    # enough digits make float() infinite, which JSON cannot carry
    if not math.isfinite(seconds):
        raise typer.BadParameter(f"{text!r} is too long a duration")
    return seconds


def parse_time(text: str) -> str | float:
    """Return the API's `due` for RFC 3339 with an offset or epoch seconds.

    Raises:
        typer.BadParameter: the text is neither, or an RFC 3339 time lacks its offset.
    """
    if _NUMBER.fullmatch(text.strip()):
        seconds = float(text)
        if not math.isfinite(seconds):
            raise typer.BadParameter(f"{text!r} is too far a time")
        return seconds
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise typer.BadParameter(
            f"{text!r} is not a time: give RFC 3339 with an offset "
            "(2030-01-01T09:00:00Z, 2030-01-01T10:00:00+01:00) or epoch seconds"
        )
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_rate(text: str) -> float:
    """Return callbacks a second for ``50/s``, ``3000/m``, ``10/h``, ``1/d`` or a bare number.

    Raises:
        typer.BadParameter: the text is no rate, or below one a day or above `MAX_RATE` a second.
    """
    count, slash, unit = text.strip().lower().replace(" ", "").partition("/")
    per_s = _UNITS_S.get(unit if slash else "s")
    if per_s is None or per_s < 1 or not _NUMBER.fullmatch(count):
        raise typer.BadParameter(
            f"{_shown(text)} is not a rate: write e.g. 50/s, 3000/m, 10/h or 50"
        )
    rate = float(count) / per_s
    if not MIN_RATE <= rate <= MAX_RATE:
        raise typer.BadParameter(
            f"{_shown(text)} is out of range: a rate is from 1/d to {MAX_RATE:g}/s"
        )
    return rate


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def describe_rate(rate: float) -> str:
    """Show callbacks a second in the unit that reads best: 50/s, 30/m, 10/h."""
    for unit, per in (("s", 1.0), ("m", 60.0)):
        if rate * per >= 1:
            return f"{rate * per:g}/{unit}"
    return f"{rate * 3600:g}/h"


def parse_instant(text: str) -> str:
    """Return RFC 3339 in UTC for RFC 3339 with an offset or epoch seconds (query parameters
    take only the former).

    Raises:
        typer.BadParameter: the text is no time, or one past the year 9999.
    """
    when = parse_time(text)
    if isinstance(when, str):
        return when
    try:
        moment = datetime.fromtimestamp(when, UTC)
    except (OverflowError, OSError, ValueError):
        raise typer.BadParameter(f"{_shown(text)} is too far a time") from None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise typer.BadParameter(f"{text!r} is not a header: write Name:value")
    return name.strip(), value.strip()
