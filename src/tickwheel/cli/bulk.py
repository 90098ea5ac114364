"""The bulk commands: purge a queue's timers of one state, cancel many timers at once."""

from __future__ import annotations

from typing import Annotated

import typer

from tickwheel.cli.app import app, fail
from tickwheel.cli.session import api, emit
from tickwheel.model import replace_controls

PURGEABLE = ("scheduled", "paused", "dead")


@app.command()
def purge(
    ctx: typer.Context,
    queue: Annotated[str, typer.Option("--queue", help="The queue to purge.")],
    state: Annotated[
        str, typer.Option("--state", help=f"Which of its timers: {', '.join(PURGEABLE)}.")
    ],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask before deleting.")] = False,
) -> None:
    """Delete every timer of a queue in one state, after asking (leased timers are never
    purged: their workers hold them; a schedule's pending occurrence stays with it)."""
    if state not in PURGEABLE:
        fail(f"--state must be one of {', '.join(PURGEABLE)}, got {state!r:.80}", 2)
    # the question is read from stdin: with none to read (a script), --yes is needed
    if not yes and not typer.confirm(
        f"Delete every {state} timer of queue {replace_controls(queue)}?"
    ):
        fail("nothing purged")
    with api(ctx) as client:
        purged = client.purge(queue, state)
    body = {"queue": queue, "state": state, "purged": purged}
    emit(ctx, body, lambda: f"purged {purged} {state} timers of queue {queue}")


def cancel_many(ctx: typer.Context, timer_ids: list[str]) -> None:
    """Cancel `timer_ids` through the bulk route; print each that was not cancelled and end
    with status 1 when any was not."""
    with api(ctx) as client:
        results = client.cancel_many(timer_ids)
    cancelled = sum(result == "cancelled" for result in results.values())
    body = {
        "cancelled": cancelled,
        "results": [{"id": timer_id, "result": result} for timer_id, result in results.items()],
    }

    def view() -> str:
        missed = [f"{timer_id}: {r}" for timer_id, r in results.items() if r != "cancelled"]
        return "\n".join([f"cancelled {cancelled} of {len(results)}", *missed])

    emit(ctx, body, view)
    if cancelled < len(results):
        raise typer.Exit(1)
