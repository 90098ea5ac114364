"""A `PostgresStore`'s reads and settings: queue settings, host limits, pages, counts
(`ops` says how operations run)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tickwheel.errors import CapReached
from tickwheel.model import State, Timer
from tickwheel.stores.base import Limit, QueueInfo, QueueSettings, Stats
from tickwheel.stores.codec import (
    decode_limit,
    decode_queue_settings,
    encode_limit,
    encode_queue_settings,
    state_of,
)
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres.ops import Op
from tickwheel.stores.postgres.queries import RowCodec


def write_queue(queue: str, settings: QueueSettings) -> Op[None]:
    """Store `queue`'s settings; the defaults delete its row."""
    if settings == QueueSettings():
        yield sql.DELETE_QUEUE_SETTINGS, {"queue": queue}
    else:
        record = encode_queue_settings(settings)
        yield sql.PUT_QUEUE_SETTINGS, {"queue": queue, "record": record}


def change_queue(queue: str, change: Callable[[QueueSettings], QueueSettings]) -> Op[QueueSettings]:
    """Write `change` of `queue`'s settings (in a transaction, so a concurrent change of another
    part is kept); return the settings it had."""
    yield sql.CAP_LOCK, {"table": f"queue:{queue}"}  # its row may not exist yet to lock
    found, _ = yield sql.QUEUE_SETTINGS_OF, {"queue": queue}
    before = decode_queue_settings(found[0][0]) if found else QueueSettings()
    yield from write_queue(queue, change(before))
    return before


def queue_settings() -> Op[dict[str, QueueSettings]]:
    found, _ = yield sql.QUEUE_SETTINGS, {}
    return {queue: decode_queue_settings(record) for queue, record in found}


def queue_infos(now: int) -> Op[list[QueueInfo]]:
    """Every queue with timers or settings (first in a transaction: one snapshot)."""
    yield "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", {}
    counts: dict[str, dict[State, int]] = {}
    earliest: dict[str, int] = {}
    found, _ = yield sql.QUEUE_COUNTS, {"now": now}
    for queue, code, n, due in found:
        state = state_of(code)
        counts.setdefault(queue, dict.fromkeys(State, 0))[state] = n
        if state is State.SCHEDULED:
            earliest[queue] = due
    settings = yield from queue_settings()
    return [
        QueueInfo(
            queue,
            counts.get(queue) or dict.fromkeys(State, 0),
            earliest.get(queue),
            settings.get(queue, QueueSettings()),
        )
        for queue in sorted(counts.keys() | settings.keys())
    ]


def limits() -> Op[dict[str, Limit]]:
    found, _ = yield sql.LIMITS, {}
    return {host: decode_limit(record) for host, record in found}


def limit_page(cursor: str | None, limit: int) -> Op[list[tuple[str, Limit]]]:
    params = {"cursor": "" if cursor is None else cursor, "limit": limit + 1}
    found, _ = yield sql.LIMIT_PAGE, params
    return [(host, decode_limit(record)) for host, record in found]


def set_limit(host: str, limit: Limit, cap: int) -> Op[None]:
    """Store `host`'s limit, refusing a new host at `cap` (in a transaction)."""
    yield sql.CAP_LOCK, {"table": "limits"}
    found, _ = yield sql.HAS_LIMIT, {"host": host}
    if not found:
        (count,), _ = yield sql.COUNT_LIMITS, {}
        if count[0] >= cap:
            raise CapReached("limits", cap, "host")
    yield sql.PUT_LIMIT, {"host": host, "record": encode_limit(limit)}


def delete_limit(host: str) -> Op[bool]:
    _, deleted = yield sql.DELETE_LIMIT, {"host": host}
    return deleted > 0


def settings_versions() -> Op[tuple[int, int]]:
    ((queues, hosts),), _ = yield sql.SETTINGS_VERSIONS, {}
    return int(queues), int(hosts)


def stats(now: int) -> Op[Stats]:
    ((scheduled, earliest, leased, done, dead, paused),), _ = yield sql.STATS, {"now": now}
    counts = {
        State.SCHEDULED: scheduled,
        State.LEASED: leased,
        State.DONE: done,
        State.DEAD: dead,
        State.PAUSED: paused,
    }
    return Stats(counts, earliest)


def page(rows: RowCodec, query: str, params: Mapping[str, object]) -> Op[list[Timer]]:
    found, _ = yield query, params
    return [rows.timer(row) for row in found]
