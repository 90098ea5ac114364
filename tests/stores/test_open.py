"""`open_store` turns the URLs `tickwheel serve --store` takes into stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tickwheel.errors import InvalidArgument, StoreUnavailable
from tickwheel.model import Timer
from tickwheel.stores import MemoryStore, StoreSettings
from tickwheel.stores.open import open_store
from tickwheel.stores.postgres import PostgresStore
from tickwheel.stores.sqlite import SqliteStore


async def test_memory_url_opens_a_memory_store() -> None:
    settings = StoreSettings(retention_ms=5)
    store = open_store("memory://", settings)
    assert isinstance(store, MemoryStore)
    assert store.settings is settings
    await store.close()


async def test_sqlite_url_with_three_slashes_is_relative_and_makes_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///./data/timers.db")
    assert isinstance(store, SqliteStore)
    assert (tmp_path / "data").is_dir()
    await store.add(Timer(id="t", due_ms=0))
    await store.close()
    assert (tmp_path / "data" / "timers.db").is_file()


async def test_sqlite_url_with_four_slashes_is_absolute(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "timers.db"
    assert str(path).startswith("/")
    settings = StoreSettings(retention_ms=5)
    store = open_store(f"sqlite:///{path}", settings)
    assert isinstance(store, SqliteStore)
    assert store.path == path
    assert store.settings is settings
    await store.close()


async def test_a_postgresql_url_opens_a_postgres_store_in_its_schema(postgres_server: Any) -> None:
    store = open_store(f"{postgres_server.url}?schema=opened_here&application_name=t")
    assert isinstance(store, PostgresStore)
    assert store.names.schema == "opened_here"
    await store.add(Timer(id="t", due_ms=0))
    assert (await store.get("t")) is not None
    await store.close()
    other = open_store(postgres_server.url.replace("postgresql://", "postgres://"))
    assert isinstance(other, PostgresStore)
    assert other.names.schema == "tickwheel"
    assert await other.get("t") is None
    await other.close()


@pytest.mark.parametrize(
    "url",
    [
        "mysql://localhost/timers",
        "timers.db",
        "",
        "sqlite://",
        "sqlite:///",
        "sqlite://host/timers.db",
        "memory://somewhere",
    ],
)
def test_unknown_or_malformed_urls_are_invalid_arguments(url: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        open_store(url)
    assert caught.value.argument == "url"


def test_a_directory_that_cannot_be_made_is_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreUnavailable):
        open_store(f"sqlite:///{tmp_path}/file/timers.db")


async def test_a_redis_url_may_name_a_key_prefix(redis_server: Any) -> None:
    first = open_store(f"{redis_server.url}/0?prefix=one")
    second = open_store(f"{redis_server.url}/0?prefix=two")
    try:
        timer = await first.add(Timer(due_ms=first.now_ms() + 60_000, payload=1))
        assert await first.get(timer.id) is not None
        assert await second.get(timer.id) is None  # another keyspace on the same server
        assert redis_server.client().keys("{one:*")  # every key opens with its shard's tag
        assert not redis_server.client().keys("{two:*")
    finally:
        await first.close()
        await second.close()


def test_a_redis_url_names_its_prefix_once(redis_server: Any) -> None:
    with pytest.raises(InvalidArgument):
        open_store(f"{redis_server.url}/0?prefix=a&prefix=b")


async def test_a_redis_url_may_set_the_shard_count(redis_server: Any) -> None:
    store = open_store(f"{redis_server.url}/0?shards=3&prefix=three")
    try:
        for n in range(30):
            await store.add(Timer(id=f"t{n}", due_ms=store.now_ms() + 60_000, payload=n))
        records = {key.split("}")[0] for key in redis_server.client().keys("{three:*}:r")}
        assert records == {"{three:0", "{three:1", "{three:2"}
    finally:
        await store.close()


@pytest.mark.parametrize("query", ["shards=0", "shards=x", "shards=-1", "shards=2&shards=2"])
def test_a_bad_shard_count_in_a_redis_url_is_refused(redis_server: Any, query: str) -> None:
    with pytest.raises(InvalidArgument):
        open_store(f"{redis_server.url}/0?{query}")


@pytest.mark.parametrize(
    "url",
    [
        "redsi://:hunter2@cache:6379/0",
        "memory://user:hunter2@somewhere",
        "redis+clustr://u:hunter2@cache:6379?password=hunter2",
        "nosuch://cache/0?password=hunter2",
    ],
)
def test_an_invalid_url_is_named_without_its_password(url: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        open_store(url)
    assert "hunter2" not in str(caught.value)
    assert "***" in str(caught.value)
