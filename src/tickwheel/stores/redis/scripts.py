"""The Lua scripts of the Redis store: read from ``lua/``, registered per client, run by EVALSHA.

Each script is the part of ``lib.lua`` it uses followed by the script's own file. A Redis error
of any kind leaves this module as `StoreUnavailable`, its cause chained.

Beside a standalone client the store keeps one connection of its own (its `Lane`) and writes
its calls there as already packed RESP: redis-py's command path (every argument packed in
Python, a connection taken from and given back to the pool, a timeout task per write) costs a
sequential caller more than the script itself. Whoever finds the lane busy goes through the
client's pool as before, so concurrent callers never queue behind it.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any, TypeAlias, cast

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from tickwheel.errors import NotReplicated, StoreUnavailable
from tickwheel.stores.redis.durability import WAITED, Replicated

Client: TypeAlias = "Redis | RedisCluster"
Arg: TypeAlias = str | int | float
# (script name, KEYS, ARGV)
ScriptCall: TypeAlias = tuple[str, Sequence[str], Sequence[Arg]]

NAMES = (
    "ack",
    "add",
    "add_one",
    "attempts",
    "cancel",
    "claim",
    "defer",
    "extend",
    "extend_many",
    "get",
    "heads",
    "kill",
    "next_due",
    "pause",
    "peek",
    "purge",
    "purge_queue",
    "queue_page",
    "queues",
    "release",
    "replay",
    "reschedule",
    "resume",
    "retry",
    "scan",
    "schedule_count",
    "schedule_get",
    "schedule_scan",
    "schedule_step",
    "stats",
)
_ERRORS = (RedisError, RedisClusterException, OSError)
# a standalone server propagates a PUBLISH to its replicas, so a PUBLISH before WAIT makes the
# WAIT cover every write made before it, not only its connection's own: a retried add that
# finds its timer stored (and writes nothing) still waits for the first attempt's write (a
# Cluster node gets a SET instead: `Scripts._wait_after`)
BUMP = b"tickwheel:durability"


# a top-level local definition with the comment lines right above it
_TOP_LOCAL = re.compile(r"^(?:--.*\n)*local (?:function (\w+)|([\w, ]+?) =)", re.MULTILINE)
_WORD = re.compile(r"\w+")


def _definitions(lib: str) -> list[tuple[set[str], str]]:
    """Split ``lib.lua`` into its top-level ``local`` definitions: (names defined, text) each."""
    found = list(_TOP_LOCAL.finditer(lib))
    ends = [match.start() for match in found[1:]] + [len(lib)]
    return [
        ({name.strip() for name in (match[1] or match[2]).split(",")}, lib[match.start() : end])
        for match, end in zip(found, ends, strict=True)
    ]


def with_lib(lib: str, body: str) -> str:
    """`body` preceded by the definitions of ``lib.lua`` it uses, directly or not.

    Redis runs a script's whole text on every call, so each definition a script does not use
    would cost it a closure or a string match per call (~10 µs for all of ``lib.lua``).
    """
    used = set(_WORD.findall(body))
    kept: list[str] = []
    for names, text in reversed(_definitions(lib)):
        if names & used:
            kept.append(text)
            used.update(_WORD.findall(text))
    return "".join(reversed(kept)) + body


@functools.cache
def sources() -> dict[str, str]:
    """The text of every script: what it uses of ``lib.lua``, then its own file."""
    folder = resources.files("tickwheel.stores.redis") / "lua"
    lib = (folder / "lib.lua").read_text()
    return {name: with_lib(lib, (folder / f"{name}.lua").read_text()) for name in NAMES}


@contextmanager
def unavailable(action: str) -> Iterator[None]:
    """Turn a Redis or connection error into `StoreUnavailable`."""
    try:
        yield
    except _ERRORS as error:
        raise StoreUnavailable(f"redis {action} failed: {error}") from error


def _packed(arg: Arg | bytes) -> bytes:
    """One argument as a RESP bulk string, encoded as redis-py encodes it."""
    # the exact types first: one comparison for most arguments
    if type(arg) is str:
        data = arg.encode()
    elif type(arg) is int:
        data = b"%d" % arg
    elif isinstance(arg, str):
        data = arg.encode()
    elif isinstance(arg, bytes):
        data = arg
    elif isinstance(arg, int):
        data = b"%d" % arg
    else:
        data = repr(arg).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _command(*args: Arg | bytes) -> bytes:
    """A command as RESP."""
    return b"*%d\r\n%s" % (len(args), b"".join([_packed(arg) for arg in args]))


class Lane:
    """A connection of the store's own, made as the client's pool makes them, for one caller
    at a time.

    Each call runs under one timeout of the pool's ``socket_timeout`` (the connection has none
    of its own: redis-py would start a task per write to time it). Replies are read in order;
    an error reply is returned in its place, so the connection never holds an unread reply. A
    call cancelled or timed out midway leaves it disconnected (redis-py's connection does
    that), and the next call reconnects it, as it does after the server closed it.
    """

    def __init__(self, pool: ConnectionPool) -> None:
        kwargs = dict(pool.connection_kwargs)
        self._timeout_s: float | None = kwargs.get("socket_timeout")
        kwargs["socket_timeout"] = None
        self._connection: AbstractConnection = pool.connection_class(**kwargs)
        self.busy = False

    async def send(self, packed: bytes, count: int) -> list[Any]:
        """Write `count` packed commands at once and return their replies (errors as values)."""
        connection = self._connection
        replies: list[Any] = []
        async with asyncio.timeout(self._timeout_s):
            if connection.is_connected and await self._dirty(connection):
                await connection.disconnect()  # send_packed_command connects it again
            await connection.send_packed_command(packed, check_health=False)
            for _ in range(count):
                try:
                    replies.append(await connection.read_response())
                except ResponseError as error:  # an error reply: the next reply is intact
                    replies.append(error)
        return replies

    async def close(self) -> None:
        await self._connection.disconnect()

    @staticmethod
    async def _dirty(connection: AbstractConnection) -> bool:
        """Whether the server closed the connection while it was idle (it restarted, or timed
        idle clients out), as the pool checks a connection before handing it out."""
        try:
            return await connection.can_read()
        except (RedisError, OSError):
            return True


@functools.cache
def _wait(waited: Replicated) -> bytes:
    """A PUBLISH to `BUMP` then WAIT for one replica, as RESP (two replies)."""
    return _command(b"PUBLISH", BUMP, b"") + _command(b"WAIT", 1, waited.wait_ms)


def _lane_of(client: Client) -> Lane | None:
    """A lane beside a standalone client; None on a Cluster, whose nodes each have a pool."""
    return Lane(client.connection_pool) if isinstance(client, Redis) else None


class Scripts:
    """The scripts registered on one client; with `durability`, the calls of `WAITED`
    scripts are followed by a WAIT on their connection (`durability.py`)."""

    def __init__(self, client: Client, durability: Replicated | None = None) -> None:
        self._client = client
        self._durability = durability
        self._scripts: dict[str, AsyncScript] = {
            name: client.register_script(source) for name, source in sources().items()
        }
        self._lane = _lane_of(client)
        self._keys: dict[tuple[str, ...], bytes] = {}  # KEYS as packed after EVALSHA's sha
        self._shas: dict[str | bytes, bytes] = {}  # each script's sha, packed

    async def run(self, name: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run one script (loaded again if the server forgot it)."""
        if self._durability is not None and name in WAITED:
            return (await self.run_many([(name, keys, args)]))[0]
        lane = self._lane
        if lane is not None and not lane.busy:
            lane.busy = True
            try:
                return (await self._run_on(lane, [(name, keys, args)]))[0]
            except _ERRORS as error:  # (not `unavailable`: a context manager per call)
                raise StoreUnavailable(f"redis {name} failed: {error}") from error
            finally:
                lane.busy = False
        with unavailable(name):
            return await self._scripts[name](keys=keys, args=args)

    async def run_many(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Run script calls in one pipeline; return their replies in order.

        The Cluster client splits the pipeline by node and sends the parts concurrently, in
        order within a node. Calls the server refused with NOSCRIPT (it restarted) did not
        run; they are sent again once the scripts are loaded.
        """
        waited = self._durability
        if waited is not None and not any(call[0] in WAITED for call in calls):
            waited = None
        lane = self._lane
        if lane is not None and not lane.busy:
            lane.busy = True
            try:
                with unavailable(calls[0][0] if calls else "pipeline"):
                    return await self._run_on(lane, calls, waited)
            finally:
                lane.busy = False
        if len(calls) == 1 and waited is None:  # a pipeline of one costs twice a plain call
            name, keys, args = calls[0]
            return [await self.run(name, keys, args)]
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        with unavailable(calls[0][0] if calls else "pipeline"):
            for _ in range(2):
                pipe = self._client.pipeline(transaction=False)
                for n in todo:
                    name, keys, args = calls[n]
                    # execute_command: the Cluster pipeline blocks its evalsha() method, yet
                    # routes EVALSHA by its first key; all keys of one call share a slot
                    sha = self._scripts[name].sha
                    pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
                planned = self._wait_after(pipe, [calls[n] for n in todo], waited)
                answers = await pipe.execute(raise_on_error=False)
                ran = todo
                todo = self._settled(todo, answers[: len(todo)], replies)
                if not todo:
                    if waited is not None:
                        self._check_waits(
                            waited, answers[len(ran) :], [calls[n] for n in ran], planned
                        )
                    return replies
                await self._load()
        raise StoreUnavailable("redis lost its scripts again while they were being loaded")

    async def close(self) -> None:
        """Close the lane's connection."""
        if self._lane is not None:
            await self._lane.close()

    async def _run_on(
        self, lane: Lane, calls: Sequence[ScriptCall], waited: Replicated | None = None
    ) -> list[Any]:
        """`run_many` over the lane: the calls packed here, written at once (then the WAIT,
        if `waited`)."""
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for _ in range(2):
            packed = b"".join([self._pack(*calls[n]) for n in todo])
            if waited is None:
                todo = self._settled(todo, await lane.send(packed, len(todo)), replies)
            else:
                answers = await lane.send(packed + _wait(waited), len(todo) + 2)
                todo = self._settled(todo, answers[:-2], replies)
                if not todo:
                    waited.check(answers[-1])
            if not todo:
                return replies
            scripts = list(self._scripts.values())
            load = [_command(b"SCRIPT", b"LOAD", cast(str, script.script)) for script in scripts]
            for script, sha in zip(
                scripts, await lane.send(b"".join(load), len(load)), strict=True
            ):
                if isinstance(sha, Exception):
                    raise sha
                script.sha = sha.decode() if isinstance(sha, bytes) else sha
        raise StoreUnavailable("redis lost its scripts again while they were being loaded")

    def _wait_after(
        self, pipe: Any, calls: Sequence[ScriptCall], waited: Replicated | None
    ) -> list[str]:
        """Queue a bump and a WAIT after `calls` in `pipe`: on a standalone server a PUBLISH
        to `BUMP`, on a Cluster (which does not replicate a PUBLISH) a SET of a key in the slot
        of a call's keys that expires at once, and its WAIT, for each node the calls go to
        (sent on that node's connection after its calls); return each call's node (none on a
        standalone server)."""
        if waited is None:
            return []
        if not isinstance(self._client, RedisCluster):
            pipe.execute_command("PUBLISH", BUMP, b"")
            pipe.execute_command("WAIT", 1, waited.wait_ms)
            return []
        nodes = {}
        planned = []
        for _, keys, _ in calls:
            node = self._client.get_node_from_key(keys[0])
            if node is None:
                raise StoreUnavailable(f"no Redis Cluster node serves {keys[0]!r}")
            nodes[node.name] = (node, keys[0])
            planned.append(node.name)
        for node, key in nodes.values():
            # the key's hash tag is its call's, so it lives on the call's node
            pipe.execute_command("SET", f"{key}:bump", b"", "PX", 1, target_nodes=node)
            pipe.execute_command("WAIT", 1, waited.wait_ms, target_nodes=node)
        return planned

    def _check_waits(
        self,
        waited: Replicated,
        answers: Sequence[Any],
        calls: Sequence[ScriptCall],
        planned: Sequence[str],
    ) -> None:
        """Raise `NotReplicated` unless every WAIT counts a replica and, on a Cluster,
        every call ran on the node whose WAIT was meant for it (a call redirected by a
        failover or a slot migration ran on a connection no WAIT covered)."""
        for answer in answers:
            if isinstance(answer, Exception):
                raise answer
        for answer in answers[1::2]:  # each WAIT's, after its bump's
            waited.check(answer)
        if isinstance(self._client, RedisCluster):
            for (_, keys, _), name in zip(calls, planned, strict=True):
                node = self._client.get_node_from_key(keys[0])
                if node is None or node.name != name:
                    raise NotReplicated(
                        (),
                        "a write moved to another node while it ran (durability=replicated): "
                        "whether a replica has it is unknown; check it by id",
                    )

    @staticmethod
    def _settled(todo: list[int], answers: Sequence[Any], replies: list[Any]) -> list[int]:
        """Put the answers to calls `todo` in `replies`; return the calls refused with
        NOSCRIPT (they did not run). Any other error reply is raised."""
        missing = []
        for n, answer in zip(todo, answers, strict=True):
            if isinstance(answer, NoScriptError):
                missing.append(n)
            elif isinstance(answer, Exception):
                raise answer
            else:
                replies[n] = answer
        return missing

    def _pack(self, name: str, keys: Sequence[str], args: Sequence[Arg]) -> bytes:
        """EVALSHA of script `name` as RESP; each shard's keys are packed once."""
        keys = tuple(keys)
        packed_keys = self._keys.get(keys)
        if packed_keys is None:
            packed_keys = self._keys[keys] = b"".join(
                [_packed(len(keys)), *[_packed(key) for key in keys]]
            )
        sha = self._scripts[name].sha
        packed_sha = self._shas.get(sha)
        if packed_sha is None:
            packed_sha = self._shas[sha] = _packed(sha)
        return b"".join(
            [
                b"*%d\r\n$7\r\nEVALSHA\r\n" % (3 + len(keys) + len(args)),
                packed_sha,
                packed_keys,
                *[_packed(arg) for arg in args],
            ]
        )

    async def _load(self) -> None:
        # on a Cluster, SCRIPT LOAD goes to every primary
        for script in self._scripts.values():
            script.sha = await self._client.script_load(script.script)
