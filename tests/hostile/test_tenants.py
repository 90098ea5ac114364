"""Tenants on a real ``tickwheel serve --tokens FILE`` over SQLite, tried as a neighbour would:
reading, changing and guessing at another tenant's timers and queues, writing with a read token,
changing host limits without admin, and going over a quota."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli.cli_support import Service

pytestmark = pytest.mark.timeout(120)

ALICE = "alice-3c5e0f6a9b1d2e47"
BOB = "bob-8d1f2a3b4c5d6e7f90"
WATCHER = "watcher-0a1b2c3d4e5f67"
ROOT = "root-token-from-flag-1"

TOKENS = f"""
[[token]]
name = "alice"
token = "{ALICE}"
queues = ["alice-*"]
role = "write"
max_pending = 5

[[token]]
name = "bob"
token_file = "bob.token"
queues = ["bob"]
role = "write"
creates_per_second = 3

[[token]]
name = "watcher"
token = "{WATCHER}"
queues = ["*"]
role = "read"
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    directory = tmp_path_factory.mktemp("tenants")
    (directory / "bob.token").write_text(BOB + "\n")
    tokens = directory / "tokens.toml"
    tokens.write_text(TOKENS)
    tokens.chmod(0o600)
    started = Service(
        directory,
        "--store",
        f"sqlite:///{directory}/t.db",
        "--tokens",
        str(tokens),
        "--token",
        ROOT,
        "--no-worker",
    )
    try:
        yield started
    finally:
        started.stop()


def call(
    service: Service, method: str, path: str, token: str | None, body: Any = None
) -> tuple[int, Any, dict[str, str]]:
    """Send one request; return its status, its JSON body (or None) and its headers."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(service.url + path, data=data, method=method)
    if body is not None:
        request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw, status, headers = (
                answer.read(),
                answer.status,
                {k.lower(): v for k, v in answer.headers.items()},
            )
    except urllib.error.HTTPError as error:
        raw, status, headers = (
            error.read(),
            error.code,
            {k.lower(): v for k, v in error.headers.items()},
        )
    return status, json.loads(raw) if raw else None, headers  # header names in lower case


def timer(queue: str, **fields: Any) -> dict[str, Any]:
    return {"delay": 3_600_000, "queue": queue, "payload": {"n": 1}, **fields}


def test_the_startup_line_names_the_tenants_never_a_token(service: Service) -> None:
    assert service.first_line.endswith("· tokens alice, bob, watcher")
    for secret in (ALICE, BOB, WATCHER, ROOT):
        assert secret not in service.first_line + service.stderr()


def test_another_tenants_timer_is_a_404_and_stays_as_it_was(service: Service) -> None:
    status, _, _ = call(service, "POST", "/v1/timers", BOB, timer("bob", id="bob-secret"))
    assert status == 201
    for method, path, body in [
        ("GET", "/v1/timers/bob-secret", None),
        ("DELETE", "/v1/timers/bob-secret", None),
        ("POST", "/v1/timers/bob-secret/pause", None),
        ("PATCH", "/v1/timers/bob-secret", {"delay": 1}),
        ("PUT", "/v1/timers/bob-secret", timer("alice-x")),
        ("POST", "/v1/dead/bob-secret/replay", None),
    ]:
        status, answer, _ = call(service, method, path, ALICE, body)
        assert status == 404, (method, path, answer)
        assert answer["error"]["message"] == "no timer 'bob-secret'"
    status, found, _ = call(service, "GET", "/v1/timers/bob-secret", BOB)
    assert status == 200
    assert found["state"] == "scheduled"
    assert found["queue"] == "bob"
    _, listed, _ = call(service, "GET", "/v1/timers?limit=1000", ALICE)
    assert all(t["queue"].startswith("alice-") for t in listed["timers"])
    _, queues, _ = call(service, "GET", "/v1/queues", ALICE)
    assert "bob" not in [q["name"] for q in queues["queues"]]


def test_a_queue_outside_the_patterns_is_a_403(service: Service) -> None:
    for method, path, body in [
        ("POST", "/v1/queues/bob/pause", None),
        ("POST", "/v1/dead/replay?queue=bob", None),
        ("POST", "/v1/timers", timer("bob")),
        ("GET", "/v1/queues/bob", None),
    ]:
        status, answer, _ = call(service, method, path, ALICE, body)
        assert status == 403, (method, path, answer)
    _, queue, _ = call(service, "GET", "/v1/queues/bob", BOB)
    assert queue["paused"] is False


def test_a_tenant_pages_through_its_queues_among_hundreds_of_others(service: Service) -> None:
    """A tenant's pages of queues are read from the store a page at a time and filtered: each
    of its queues comes once, in name order, another's never, even from a cursor that names
    one; a page may come back short, even empty, with a cursor to go on from."""
    for n in range(60):
        status, _, _ = call(service, "POST", f"/v1/queues/a-{n:03}/pause", ROOT)
        assert status == 200
    for name in ("alice-paged-1", "alice-paged-2"):
        status, _, _ = call(service, "POST", f"/v1/queues/{name}/pause", ALICE)
        assert status == 200
    _, every, _ = call(service, "GET", "/v1/queues?limit=1000", WATCHER)
    mine = [q["name"] for q in every["queues"] if q["name"].startswith("alice-")]
    assert {"alice-paged-1", "alice-paged-2"} <= set(mine)
    seen: list[str] = []
    cursor, pages = None, 0
    while True:
        query = "/v1/queues?limit=1" + ("" if cursor is None else f"&cursor={cursor}")
        status, page, _ = call(service, "GET", query, ALICE)
        assert status == 200
        assert len(page["queues"]) <= 1
        seen += [q["name"] for q in page["queues"]]
        cursor, pages = page["cursor"], pages + 1
        if cursor is None:
            break
    assert seen == mine
    assert pages > 1  # 60 of another's queues came first: more than one store page's worth
    status, page, _ = call(service, "GET", "/v1/queues?limit=5&cursor=a-030", ALICE)
    assert status == 200
    assert all(q["name"].startswith("alice-") for q in page["queues"])
    status, page, _ = call(service, "GET", "/v1/queues?cursor=a", BOB)  # bob sees "bob" alone
    assert status == 200
    assert [q["name"] for q in page["queues"]] in ([], ["bob"])
    assert page["cursor"] is None


def test_roles(service: Service) -> None:
    status, _, _ = call(service, "POST", "/v1/timers", WATCHER, timer("alice-a"))
    assert status == 403
    status, _, _ = call(service, "GET", "/v1/timers", WATCHER)
    assert status == 200
    status, answer, _ = call(service, "PUT", "/v1/limits/example.com", ALICE, {"rate": 1})
    assert status == 403
    assert "needs admin" in answer["error"]["message"]
    status, _, _ = call(service, "PUT", "/v1/limits/example.com", ROOT, {"rate": 1})
    assert status == 200
    status, _, _ = call(service, "GET", "/v1/timers", "guess-" + ALICE[6:])
    assert status == 401


def test_quotas_refuse_with_429_and_write_nothing(service: Service) -> None:
    batch = {"timers": [timer("alice-q", id=f"aq{n}") for n in range(6)]}
    status, answer, _ = call(service, "POST", "/v1/timers/batch", ALICE, batch)
    assert status == 429
    assert answer["error"]["code"] == "quota_exceeded"
    assert "max_pending" in answer["error"]["message"]
    status, _, _ = call(service, "GET", "/v1/timers/aq0", ALICE)
    assert status == 404
    statuses = [call(service, "POST", "/v1/timers", BOB, timer("bob"))[0] for _ in range(6)]
    assert 429 in statuses
    refused = call(service, "POST", "/v1/timers", BOB, timer("bob"))
    if refused[0] == 429:
        assert refused[2]["retry-after"].isdigit()


def test_a_bad_tokens_file_exits_2_naming_the_field_not_the_secret(tmp_path: Path) -> None:
    (tmp_path / "bob.token").write_text(BOB)
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS.replace('role = "read"', 'role = "root"'))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "tickwheel", "serve", "--port", "0", "--tokens", str(tokens)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 2
    assert "token[2].role" in done.stderr
    assert ALICE not in done.stderr + done.stdout
    assert BOB not in done.stderr + done.stdout
