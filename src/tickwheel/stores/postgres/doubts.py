"""Settles of a `PostgresStore` sent again after a failure that may have landed unheard.

A lease whose last settle failed is noted in `InDoubt`. Sent again, the settle finds the lease
gone if the first one committed; the row then tells: the state that settle sets, with the
lease's token as its attempt (and, for a hand-back, its new due time), is the caller's own
settle, and counts as settled rather than `LeaseLost`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel.stores.base import Lease
from tickwheel.stores.in_doubt import InDoubt
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres.ops import Op


def landed_before(
    doubts: InDoubt,
    leases: Sequence[Lease],
    settled: list[bool],
    state: int,
    dues: Sequence[int | None],
) -> Op[list[bool]]:
    """`settled`, with each lease that was not but whose settle may have landed before
    checked against its row: in `state`, at the lease's token, due at its `dues` entry (None:
    any). One statement, and only when some lease is in doubt."""
    asked = [n for n, done in enumerate(settled) if not done and doubts and doubts.take(leases[n])]
    if not asked:
        return settled
    rows, _ = yield sql.LANDED, {"ids": [leases[n].timer.id for n in asked]}
    found = {row[0]: row[1:] for row in rows}
    settled = list(settled)
    for n in asked:
        row = found.get(leases[n].timer.id)
        due = dues[n]
        settled[n] = (
            row is not None
            and row[0] == state
            and row[1] == leases[n].token
            and (due is None or row[2] == due)
        )
    return settled
