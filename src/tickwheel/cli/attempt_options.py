"""The options of `serve` and `worker` that say how much attempt history the store keeps."""

from __future__ import annotations

from typing import Annotated

import typer

from tickwheel.stores.attempt_record import MAX_ATTEMPT_HISTORY, MAX_ATTEMPT_RETENTION_S

AttemptHistoryOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=MAX_ATTEMPT_HISTORY,
        metavar="N",
        help="Attempts kept per timer, newest first; 0 records none (default: 20).",
    ),
]
AttemptRetentionOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=MAX_ATTEMPT_RETENTION_S,
        metavar="SECONDS",
        help="How long an attempt is kept, at most as long as its timer (default: 604800).",
    ),
]
