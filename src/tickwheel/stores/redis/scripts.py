"""The Lua scripts of the Redis store: read from ``lua/``, registered per client, run by EVALSHA.

Each script is the part of ``lib.lua`` it uses followed by the script's own file. A Redis error
of any kind leaves this module as `StoreUnavailable`, its cause chained.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any, TypeAlias

from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from tickwheel.errors import StoreUnavailable

Client: TypeAlias = "Redis | RedisCluster"
Arg: TypeAlias = str | int | float
# (script name, KEYS, ARGV)
ScriptCall: TypeAlias = tuple[str, Sequence[str], Sequence[Arg]]

NAMES = (
    "ack",
    "add",
    "cancel",
    "claim",
    "extend",
    "get",
    "kill",
    "next_due",
    "pause",
    "peek",
    "purge",
    "queues",
    "release",
    "replay",
    "reschedule",
    "resume",
    "retry",
    "scan",
    "schedule_get",
    "schedule_scan",
    "schedule_step",
    "stats",
)
_ERRORS = (RedisError, RedisClusterException, OSError)


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


class Scripts:
    """The scripts registered on one client."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._scripts: dict[str, AsyncScript] = {
            name: client.register_script(source) for name, source in sources().items()
        }

    async def run(self, name: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run one script (redis-py loads it again if the server forgot it)."""
        with unavailable(name):
            return await self._scripts[name](keys=keys, args=args)

    async def run_many(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Run script calls in one pipeline; return their replies in order.

        The Cluster client splits the pipeline by node and sends the parts concurrently, in
        order within a node. Calls the server refused with NOSCRIPT (it restarted) did not
        run; they are sent again once the scripts are loaded.
        """
        if len(calls) == 1:  # a pipeline of one costs the client twice a plain call
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
                answers = await pipe.execute(raise_on_error=False)
                missing = []
                for n, answer in zip(todo, answers, strict=True):
                    if isinstance(answer, NoScriptError):
                        missing.append(n)
                    elif isinstance(answer, Exception):
                        raise answer
                    else:
                        replies[n] = answer
                if not missing:
                    return replies
                await self._load()
                todo = missing
        raise StoreUnavailable("redis lost its scripts again while they were being loaded")

    async def _load(self) -> None:
        # on a Cluster, SCRIPT LOAD goes to every primary
        for script in self._scripts.values():
            script.sha = await self._client.script_load(script.script)
